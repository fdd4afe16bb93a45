// The service's configuration (contract §9): built-in defaults < TOML file < environment <
// command-line flags. Loading fails fast with a config_error naming the offending setting.
#pragma once
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace crm::config {

struct config_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct settings {
  // [http]
  std::string listen = "127.0.0.1:8080";
  std::string metrics_listen = "127.0.0.1:9464";
  std::string metrics_token; // empty: /actors refused (docs/operations.md)
  bool metrics_require_token = false;
  std::vector<std::string> metrics_hosts;
  std::string public_url; // empty: derived from `listen`
  int http_threads = 0;   // 0: one per core
  std::size_t body_limit = 1024 * 1024;
  std::size_t header_limit = 8 * 1024;
  double header_timeout = 10;
  double idle_timeout = 60;
  double body_timeout = 30;
  std::size_t max_connections = 4096;
  // [database]
  std::string database_url = "postgresql://postgres@127.0.0.1:5432/carecrm";
  int database_pool_size = 8;
  int commits_in_flight = 2; // group-commit transactions at once (persistence/group_committer)
  std::size_t database_queue_limit = 2048; // queued lookups beyond it: 503 at once
  // [redis]
  std::string redis_url = "redis://127.0.0.1:6379";
  // [auth]
  std::string jwt_secret;
  // Keys sealing secrets at rest, "id:base64(32 bytes)[,...]"; the first seals
  // (docs/operations.md "Secrets at rest").
  std::string secret_keys;
  int hash_threads = 0; // 0: one per core
  std::size_t hash_queue_limit = 256;
  int login_max_failures = 5;
  // Rate limits, requests per minute (0: off); docs/operations.md.
  std::size_t rate_limit_user = 6000;
  std::size_t rate_limit_tenant = 30000;
  std::size_t rate_limit_login = 600;
  std::size_t rate_limit_webhook = 12000;
  std::size_t rate_limit_address = 6000;
  int login_window_seconds = 900;
  // [actors]
  int actor_threads = 0; // 0: one per core
  double tenant_idle_timeout = 300;
  // [cluster] (docs/cluster.md)
  std::string cluster_node_id; // empty: no cluster
  std::string cluster_listen = "127.0.0.1:0";
  // Where other nodes dial this node's gateway when that is not the listen address (NAT, a
  // container's port mapping, a TCP proxy); empty: the listen address with the bound port.
  std::string cluster_advertise;
  // Mutual TLS between nodes: this node's certificate chain and key, and the CA that signs every
  // node's certificate (a CA for the cluster alone: any certificate it signed is a node).
  std::string cluster_cert, cluster_key, cluster_ca;
  double heartbeat_interval = 1;
  double dead_after = 5;
  bool cluster_rebalance = true; // tenants follow their requests (docs/cluster.md "Balance")
  double shutdown_grace = 0; // seconds /readyz answers 503 before a stopping node stops accepting
  // [automation] (docs/automation.md)
  bool outbound_allow_private = false; // also e-mail channels' SMTP servers
  std::string smtp_ca_file;            // empty: the system's CAs
  double outbound_connect_timeout = 5;
  double outbound_timeout = 10;
  double webhook_retry_base = 5;
  double webhook_retry_max = 3600;
  double webhook_retry_window = 86400;
  double outbound_report_wait = 600;
  double automation_poll = 1;
  double ai_timeout = 20;
  // [audit] (docs/compliance.md "Audit trail")
  std::string audit_reads = "required";  // required | best_effort | off
  double audit_flush_interval = 0.1;     // seconds: the most a crash can lose of read rows
  double audit_chain_interval = 1;       // seconds between claims of the changes' rows
  std::size_t audit_buffer = 65536;      // read rows buffered before reads answer 503
  double audit_retention_days = 2192;    // 6 years
  bool audit_retention_override = false; // allows less than audit_retention_minimum_days
  // [log]
  std::string log_format = "text"; // text | json
  bool access_log = true;
  std::string trusted_proxies; // net/trusted_proxies.hpp; empty: X-Forwarded-For ignored
  // mode
  bool dev = false;
  std::string config_file = "config/carecrm.toml";
};

// The result of parsing a command line: settings plus what is not a setting (the command
// words and the command's own `--name value` options).
struct invocation {
  settings values;
  std::vector<std::string> words;             // e.g. {"tenant", "create"}
  std::map<std::string, std::string> options; // e.g. {"name": "Demo"}
  bool help = false;
  bool version = false;
};

// Parses argv, reads the TOML file (`--config`; the default file may be absent), then the
// environment, then flags. `env` is injectable for tests (nullptr: the process environment).
invocation load(int argc, const char* const* argv, const char* const* env = nullptr);

// Checks what `serve` needs: a JWT secret of at least 32 bytes unless `dev`.
// The audit trail's legal minimum retention (6 years; HIPAA 45 CFR 164.316(b)(2)).
inline constexpr double audit_retention_minimum_days = 2192;
// Refuses an --audit-retention-days below the minimum without --audit-retention-override.
void require_legal_retention(const settings& s);
void require_serveable(settings& s);

std::string help_text();

// The host and port of "host:port" (`value` of setting `name`), port 0 to 65535; a config_error
// naming the setting when it is not that.
std::pair<std::string, int> host_and_port(const std::string& name, const std::string& value);

} // namespace crm::config
