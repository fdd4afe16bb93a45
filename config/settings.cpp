// Loading of settings from the four layers, driven by one table of options so that the TOML
// key, the environment variable, the flag and the help text of a setting never drift apart.
#include "config/settings.hpp"

#include <sys/random.h>

#include <cerrno>

#include <toml++/toml.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

extern char** environ;

namespace crm::config {
namespace {

struct option {
  const char* flag;    // --flag
  const char* section; // TOML table
  const char* key;     // TOML key
  const char* env;     // environment variable
  const char* help;
  std::function<void(settings&, const std::string&)> set;
};

int to_int(const std::string& name, const std::string& v) {
  int out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc{} || p != v.data() + v.size())
    throw config_error(name + ": not an integer: '" + v + "'");
  return out;
}

std::size_t to_size(const std::string& name, const std::string& v) {
  int n = to_int(name, v);
  if (n <= 0) throw config_error(name + ": must be positive");
  return static_cast<std::size_t>(n);
}

// A count where 0 means "off" (the rate limits).
std::size_t to_count(const std::string& name, const std::string& v) {
  int n = to_int(name, v);
  if (n < 0) throw config_error(name + ": must be 0 (off) or positive");
  return static_cast<std::size_t>(n);
}

double to_seconds(const std::string& name, const std::string& v) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  // At most ~3 years: beyond that a conversion to milliseconds would overflow (inf included).
  if (v.empty() || end != v.c_str() + v.size() || !(d > 0) || !(d <= 1e8))
    throw config_error(name + ": not a positive number of seconds up to 1e8: '" + v + "'");
  return d;
}

std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= v.size()) {
    auto end = v.find(',', start);
    if (end == std::string::npos) end = v.size();
    auto item = v.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

// A secret kept in a file (mode 0600, or a systemd credential): its text without the line end
// an editor adds.
std::string read_secret_file(const std::string& name, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw config_error(name + ": cannot read " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) throw config_error(name + ": " + path + " is empty");
  return text;
}

bool to_bool(const std::string& name, const std::string& v) {
  if (v == "1" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "no" || v.empty()) return false;
  throw config_error(name + ": not a boolean: '" + v + "'");
}

const std::vector<option>& options() {
  static const std::vector<option> all = {
      {"listen", "http", "listen", "CARECRM_LISTEN",
       "address:port of the API (port 0: any free port)",
       [](settings& s, const std::string& v) { s.listen = v; }},
      {"metrics-listen", "http", "metrics_listen", "CARECRM_METRICS_LISTEN",
       "address:port of /metrics and /actors",
       [](settings& s, const std::string& v) { s.metrics_listen = v; }},
      {"metrics-token", "http", "metrics_token", "CARECRM_METRICS_TOKEN",
       "bearer token for /actors (and /metrics with --metrics-require-token); none: refused",
       [](settings& s, const std::string& v) { s.metrics_token = v; }},
      {"metrics-require-token", "http", "metrics_require_token", "CARECRM_METRICS_REQUIRE_TOKEN",
       "/metrics also asks for the metrics token",
       [](settings& s, const std::string& v) {
         s.metrics_require_token = to_bool("metrics-require-token", v);
       }},
      {"metrics-hosts", "http", "metrics_hosts", "CARECRM_METRICS_HOSTS",
       "comma-separated Host names the metrics listener answers besides IP literals and localhost",
       [](settings& s, const std::string& v) { s.metrics_hosts = split_list(v); }},
      {"public-url", "http", "public_url", "CARECRM_PUBLIC_URL",
       "absolute base URL clients use (for webhook URLs)",
       [](settings& s, const std::string& v) { s.public_url = v; }},
      {"http-threads", "http", "threads", "CARECRM_HTTP_THREADS", "asio threads (0: one per core)",
       [](settings& s, const std::string& v) { s.http_threads = to_int("http-threads", v); }},
      {"body-limit", "http", "body_limit", "CARECRM_BODY_LIMIT", "largest request body in bytes",
       [](settings& s, const std::string& v) { s.body_limit = to_size("body-limit", v); }},
      {"header-limit", "http", "header_limit", "CARECRM_HEADER_LIMIT",
       "largest request line + headers in bytes",
       [](settings& s, const std::string& v) { s.header_limit = to_size("header-limit", v); }},
      {"header-timeout", "http", "header_timeout", "CARECRM_HEADER_TIMEOUT",
       "seconds to receive a request's headers",
       [](settings& s, const std::string& v) {
         s.header_timeout = to_seconds("header-timeout", v);
       }},
      {"idle-timeout", "http", "idle_timeout", "CARECRM_IDLE_TIMEOUT",
       "seconds an idle keep-alive connection stays open",
       [](settings& s, const std::string& v) { s.idle_timeout = to_seconds("idle-timeout", v); }},
      {"max-connections", "http", "max_connections", "CARECRM_MAX_CONNECTIONS",
       "open client connections at most; more are answered 503 and closed",
       [](settings& s, const std::string& v) {
         s.max_connections = to_size("max-connections", v);
       }},
      {"database-queue-limit", "database", "queue_limit", "CARECRM_DATABASE_QUEUE_LIMIT",
       "database lookups that may wait for a connection; more are answered 503 at once",
       [](settings& s, const std::string& v) {
         s.database_queue_limit = to_size("database-queue-limit", v);
       }},
      {"audit-reads", "audit", "reads", "CARECRM_AUDIT_READS",
       "reads of health records: required (503 when they cannot be audited), best_effort, off",
       [](settings& s, const std::string& v) {
         if (v != "required" && v != "best_effort" && v != "off")
           throw config_error("audit-reads: one of required, best_effort, off: '" + v + "'");
         s.audit_reads = v;
       }},
      {"audit-flush-interval", "audit", "flush_interval", "CARECRM_AUDIT_FLUSH_INTERVAL",
       "seconds between writes of buffered audit rows (what a crash can lose)",
       [](settings& s, const std::string& v) {
         s.audit_flush_interval = to_seconds("audit-flush-interval", v);
         if (s.audit_flush_interval < 0.001 || s.audit_flush_interval > 10)
           throw config_error("audit-flush-interval: between 0.001 and 10 seconds");
       }},
      {"audit-chain-interval", "audit", "chain_interval", "CARECRM_AUDIT_CHAIN_INTERVAL",
       "seconds between claims of every tenant's pending change audit rows (stored with each "
       "change) into the hash chains; a flush of reads claims its tenants' each time",
       [](settings& s, const std::string& v) {
         s.audit_chain_interval = to_seconds("audit-chain-interval", v);
         if (s.audit_chain_interval < 0.01 || s.audit_chain_interval > 60)
           throw config_error("audit-chain-interval: between 0.01 and 60 seconds");
       }},
      {"audit-buffer", "audit", "buffer", "CARECRM_AUDIT_BUFFER",
       "audit rows buffered in memory at most; beyond it audited reads answer 503",
       [](settings& s, const std::string& v) {
         s.audit_buffer = to_size("audit-buffer", v);
         if (s.audit_buffer < 1) throw config_error("audit-buffer: at least 1");
       }},
      {"audit-retention-days", "audit", "retention_days", "CARECRM_AUDIT_RETENTION_DAYS",
       "days the audit trail is kept (whole months are pruned once all their rows are older)",
       [](settings& s, const std::string& v) {
         s.audit_retention_days = to_seconds("audit-retention-days", v);
         if (s.audit_retention_days < 1 || s.audit_retention_days > 36500)
           throw config_error("audit-retention-days: from 1 to 36500");
       }},
      {"audit-retention-override", "audit", "retention_override",
       "CARECRM_AUDIT_RETENTION_OVERRIDE",
       "allow --audit-retention-days below the legal minimum of 2192 days (6 years: HIPAA "
       "45 CFR 164.316(b)(2)); refused without it",
       [](settings& s, const std::string& v) {
         s.audit_retention_override = to_bool("audit-retention-override", v);
       }},
      {"body-timeout", "http", "body_timeout", "CARECRM_BODY_TIMEOUT",
       "seconds to receive a request's body",
       [](settings& s, const std::string& v) { s.body_timeout = to_seconds("body-timeout", v); }},
      {"database-url", "database", "url", "CARECRM_DATABASE_URL", "PostgreSQL connection URL",
       [](settings& s, const std::string& v) { s.database_url = v; }},
      {"database-pool-size", "database", "pool_size", "CARECRM_DATABASE_POOL_SIZE",
       "PostgreSQL connections (each on its own thread)",
       [](settings& s, const std::string& v) {
         s.database_pool_size = static_cast<int>(to_size("database-pool-size", v));
       }},
      {"commits-in-flight", "database", "commits_in_flight", "CARECRM_COMMITS_IN_FLIGHT",
       "group-commit transactions at once (1 to 16)",
       [](settings& s, const std::string& v) {
         auto n = to_size("commits-in-flight", v);
         if (n < 1 || n > 16) throw config_error("commits-in-flight: from 1 to 16");
         s.commits_in_flight = static_cast<int>(n);
       }},
      {"redis-url", "redis", "url", "CARECRM_REDIS_URL", "Redis URL (redis://host:port[/db])",
       [](settings& s, const std::string& v) { s.redis_url = v; }},
      {"rate-limit-user", "rate_limits", "user", "CARECRM_RATE_LIMIT_USER",
       "requests per minute per user (token bucket; 0: off)",
       [](settings& s, const std::string& v) {
         s.rate_limit_user = to_count("rate-limit-user", v);
       }},
      {"rate-limit-tenant", "rate_limits", "tenant", "CARECRM_RATE_LIMIT_TENANT",
       "requests per minute per tenant (0: off)",
       [](settings& s, const std::string& v) {
         s.rate_limit_tenant = to_count("rate-limit-tenant", v);
       }},
      {"rate-limit-login", "rate_limits", "login", "CARECRM_RATE_LIMIT_LOGIN",
       "login and refresh requests per minute per source address (0: off)",
       [](settings& s, const std::string& v) {
         s.rate_limit_login = to_count("rate-limit-login", v);
       }},
      {"rate-limit-webhook", "rate_limits", "webhook", "CARECRM_RATE_LIMIT_WEBHOOK",
       "inbound webhook requests per minute per source address (0: off)",
       [](settings& s, const std::string& v) {
         s.rate_limit_webhook = to_count("rate-limit-webhook", v);
       }},
      {"rate-limit-address", "rate_limits", "address", "CARECRM_RATE_LIMIT_ADDRESS",
       "other requests without a valid token, per minute per source address (0: off)",
       [](settings& s, const std::string& v) {
         s.rate_limit_address = to_count("rate-limit-address", v);
       }},
      {"jwt-secret", "auth", "jwt_secret", "CARECRM_JWT_SECRET", "HS256 key, at least 32 bytes",
       [](settings& s, const std::string& v) { s.jwt_secret = v; }},
      {"secret-keys", "auth", "secret_keys", "CARECRM_SECRET_KEYS",
       "keys sealing secrets at rest: id:base64-of-32-bytes[,id:...]; the first seals",
       [](settings& s, const std::string& v) { s.secret_keys = v; }},
      {"jwt-secret-file", "auth", "jwt_secret_file", "CARECRM_JWT_SECRET_FILE",
       "file holding the JWT secret (also $CREDENTIALS_DIRECTORY/jwt_secret, from systemd)",
       [](settings& s, const std::string& v) {
         s.jwt_secret = read_secret_file("jwt-secret-file", v);
       }},
      {"secret-keys-file", "auth", "secret_keys_file", "CARECRM_SECRET_KEYS_FILE",
       "file holding the secret keys (also $CREDENTIALS_DIRECTORY/secret_keys, from systemd)",
       [](settings& s, const std::string& v) {
         s.secret_keys = read_secret_file("secret-keys-file", v);
       }},
      {"hash-threads", "auth", "hash_threads", "CARECRM_HASH_THREADS",
       "Argon2id hashing threads (0: one per core)",
       [](settings& s, const std::string& v) { s.hash_threads = to_int("hash-threads", v); }},
      {"hash-queue-limit", "auth", "hash_queue_limit", "CARECRM_HASH_QUEUE_LIMIT",
       "password hashes waiting before logins get 503",
       [](settings& s, const std::string& v) {
         s.hash_queue_limit = to_size("hash-queue-limit", v);
       }},
      {"login-max-failures", "auth", "login_max_failures", "CARECRM_LOGIN_MAX_FAILURES",
       "failed logins per e-mail before 429",
       [](settings& s, const std::string& v) {
         s.login_max_failures = static_cast<int>(to_size("login-max-failures", v));
       }},
      {"login-window", "auth", "login_window_seconds", "CARECRM_LOGIN_WINDOW",
       "seconds over which failed logins count",
       [](settings& s, const std::string& v) {
         s.login_window_seconds = static_cast<int>(to_size("login-window", v));
       }},
      {"actor-threads", "actors", "threads", "CARECRM_ACTOR_THREADS",
       "actor scheduler threads (0: one per core)",
       [](settings& s, const std::string& v) { s.actor_threads = to_int("actor-threads", v); }},
      {"tenant-idle-timeout", "actors", "tenant_idle_timeout", "CARECRM_TENANT_IDLE_TIMEOUT",
       "seconds before an idle tenant's actors stop and free their memory",
       [](settings& s, const std::string& v) {
         s.tenant_idle_timeout = to_seconds("tenant-idle-timeout", v);
       }},
      {"node-id", "cluster", "node_id", "CARECRM_NODE_ID",
       "this node's id in a cluster (letters, digits, _ . -; up to 64); none: one node owning "
       "every tenant (docs/cluster.md)",
       [](settings& s, const std::string& v) {
         auto ok = !v.empty() && v.size() <= 64;
         for (char c : v)
           ok = ok &&
                (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
         if (!ok) throw config_error("node-id: letters, digits, _ . - (1 to 64): '" + v + "'");
         s.cluster_node_id = v;
       }},
      {"cluster-listen", "cluster", "listen", "CARECRM_CLUSTER_LISTEN",
       "address:port other nodes reach this node's actors at (port 0: any free port)",
       [](settings& s, const std::string& v) { s.cluster_listen = v; }},
      {"cluster-advertise", "cluster", "advertise", "CARECRM_CLUSTER_ADVERTISE",
       "host:port other nodes dial to reach this node's actors when that is not cluster-listen "
       "(NAT, a container's port mapping, a TCP proxy); none: cluster-listen with its bound port",
       [](settings& s, const std::string& v) {
         if (host_and_port("cluster-advertise", v).second == 0)
           throw config_error("cluster-advertise: needs a port other nodes can dial: '" + v + "'");
         s.cluster_advertise = v;
       }},
      {"cluster-cert", "cluster", "cert", "CARECRM_CLUSTER_CERT",
       "PEM file: this node's certificate (and chain) for TLS between nodes; required with "
       "node-id",
       [](settings& s, const std::string& v) { s.cluster_cert = v; }},
      {"cluster-key", "cluster", "key", "CARECRM_CLUSTER_KEY",
       "PEM file: the private key of cluster-cert",
       [](settings& s, const std::string& v) { s.cluster_key = v; }},
      {"cluster-ca", "cluster", "ca", "CARECRM_CLUSTER_CA",
       "PEM file: the CA that signs every node's certificate (a CA for the cluster alone); a "
       "peer without a certificate it signed is refused",
       [](settings& s, const std::string& v) { s.cluster_ca = v; }},
      {"heartbeat-interval", "cluster", "heartbeat_interval", "CARECRM_HEARTBEAT_INTERVAL",
       "seconds between a node's heartbeats",
       [](settings& s,
          const std::string& v) { s.heartbeat_interval = to_seconds("heartbeat-interval", v); }},
      {"dead-after", "cluster", "dead_after", "CARECRM_DEAD_AFTER",
       "seconds without a heartbeat before a node is declared dead and its tenants taken over",
       [](settings& s, const std::string& v) { s.dead_after = to_seconds("dead-after", v); }},
      {"cluster-rebalance", "cluster", "rebalance", "CARECRM_CLUSTER_REBALANCE",
       "hand a tenant whose requests arrive mostly at another node to that node, a few every 5 "
       "seconds (true or false)",
       [](settings& s, const std::string& v) {
         s.cluster_rebalance = to_bool("cluster-rebalance", v);
       }},
      {"shutdown-grace", "http", "shutdown_grace", "CARECRM_SHUTDOWN_GRACE",
       "seconds a stopping node keeps serving with /readyz answering 503 (let a load balancer "
       "take it out first)",
       [](settings& s, const std::string& v) {
         s.shutdown_grace = to_seconds("shutdown-grace", v);
       }},
      {"outbound-allow-private", "automation", "outbound_allow_private",
       "CARECRM_OUTBOUND_ALLOW_PRIVATE",
       "let webhooks and http_request actions reach loopback, private and link-local addresses",
       [](settings& s, const std::string& v) {
         s.outbound_allow_private = to_bool("outbound-allow-private", v);
       }},
      {"smtp-ca-file", "automation", "smtp_ca_file", "CARECRM_SMTP_CA_FILE",
       "PEM file of the CAs e-mail channels' SMTP servers are trusted by, instead of the "
       "system's (an internal mail relay)",
       [](settings& s, const std::string& v) { s.smtp_ca_file = v; }},
      {"outbound-connect-timeout", "automation", "outbound_connect_timeout",
       "CARECRM_OUTBOUND_CONNECT_TIMEOUT", "seconds to connect to a webhook receiver",
       [](settings& s, const std::string& v) {
         s.outbound_connect_timeout = to_seconds("outbound-connect-timeout", v);
       }},
      {"outbound-timeout", "automation", "outbound_timeout", "CARECRM_OUTBOUND_TIMEOUT",
       "seconds for a whole outbound request",
       [](settings& s,
          const std::string& v) { s.outbound_timeout = to_seconds("outbound-timeout", v); }},
      {"webhook-retry-base", "automation", "webhook_retry_base", "CARECRM_WEBHOOK_RETRY_BASE",
       "seconds before the first retry of a failed delivery (doubling after)",
       [](settings& s, const std::string& v) {
         s.webhook_retry_base = to_seconds("webhook-retry-base", v);
       }},
      {"webhook-retry-max", "automation", "webhook_retry_max", "CARECRM_WEBHOOK_RETRY_MAX",
       "longest delay between delivery attempts (seconds)",
       [](settings& s,
          const std::string& v) { s.webhook_retry_max = to_seconds("webhook-retry-max", v); }},
      {"webhook-retry-window", "automation", "webhook_retry_window", "CARECRM_WEBHOOK_RETRY_WINDOW",
       "seconds a failing delivery keeps being retried",
       [](settings& s, const std::string&
                           v) { s.webhook_retry_window = to_seconds("webhook-retry-window", v); }},
      {"outbound-report-wait", "automation", "outbound_report_wait", "CARECRM_OUTBOUND_REPORT_WAIT",
       "seconds a WhatsApp or SMS message whose send's outcome was lost waits for the provider's "
       "report before it is sent again",
       [](settings& s, const std::string& v) {
         s.outbound_report_wait = to_seconds("outbound-report-wait", v);
       }},
      {"automation-poll", "automation", "automation_poll", "CARECRM_AUTOMATION_POLL",
       "seconds between checks of idle tenants for due automation work",
       [](settings& s, const std::string& v) {
         s.automation_poll = to_seconds("automation-poll", v);
       }},
      {"ai-timeout", "ai", "ai_timeout", "CARECRM_AI_TIMEOUT",
       "seconds one call to an AI agent's model provider may take (each of up to 3 attempts)",
       [](settings& s, const std::string& v) { s.ai_timeout = to_seconds("ai-timeout", v); }},
      {"log-format", "log", "format", "CARECRM_LOG_FORMAT",
       "text (a line for people) or json (one JSON object per line, for collectors)",
       [](settings& s, const std::string& v) {
         if (v != "text" && v != "json")
           throw config_error("log-format: one of text, json: '" + v + "'");
         s.log_format = v;
       }},
      {"trusted-proxies", "http", "trusted_proxies", "CARECRM_TRUSTED_PROXIES",
       "addresses or CIDR blocks of the proxies whose X-Forwarded-For names the client (rate "
       "limits, audit rows); empty (default): the header is ignored",
       [](settings& s, const std::string& v) { s.trusted_proxies = v; }},
      {"access-log", "log", "access", "CARECRM_ACCESS_LOG",
       "one log line per request: request id, tenant, user, route, status, duration",
       [](settings& s, const std::string& v) { s.access_log = to_bool("access-log", v); }},
      {"dev", "", "dev", "CARECRM_DEV",
       "development mode: allows a missing or short JWT secret and missing secret keys",
       [](settings& s, const std::string& v) { s.dev = to_bool("dev", v); }},
  };
  return all;
}

const option* find_flag(std::string_view name) {
  for (auto& o : options())
    if (name == o.flag) return &o;
  return nullptr;
}

std::string node_text(const toml::node& n, const std::string& name) {
  if (auto s = n.as_string()) return s->get();
  if (auto i = n.as_integer()) return std::to_string(i->get());
  if (auto f = n.as_floating_point()) {
    std::ostringstream os;
    os << f->get();
    return os.str();
  }
  if (auto b = n.as_boolean()) return b->get() ? "true" : "false";
  throw config_error(name + ": unsupported TOML value type");
}

void apply_toml(settings& s, const std::string& path, bool must_exist) {
  if (!std::filesystem::exists(path)) {
    if (must_exist) throw config_error("config file not found: " + path);
    return;
  }
  toml::table tbl;
  try {
    tbl = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << path << ": " << e.description() << " at " << e.source().begin;
    throw config_error(os.str());
  }
  for (auto& o : options()) {
    const toml::node* n = nullptr;
    if (*o.section == '\0') {
      n = tbl.get(o.key);
    } else if (auto t = tbl[o.section].as_table()) {
      n = t->get(o.key);
    }
    if (n) {
      std::string name = std::string(o.section) + "." + o.key;
      o.set(s, node_text(*n, name));
    }
  }
}

} // namespace

invocation load(int argc, const char* const* argv, const char* const* env) {
  invocation inv;
  std::vector<std::pair<const option*, std::string>> flags;
  std::string config_path = inv.values.config_file;
  bool config_given = false;

  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      inv.help = true;
      continue;
    }
    if (a == "--version") {
      inv.version = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      inv.words.emplace_back(a);
      continue;
    }
    a.remove_prefix(2);
    std::string name, value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string_view::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    } else {
      name = a;
    }
    if ((name == "dev" || name == "password-stdin" || name == "demo") && !has_value) {
      value = "true";
      has_value = true;
    }
    if (!has_value) {
      if (i + 1 >= argc) throw config_error("--" + name + " needs a value");
      value = argv[++i];
    }
    if (name == "config") {
      config_path = value;
      config_given = true;
    } else if (auto o = find_flag(name)) {
      flags.emplace_back(o, value);
    } else {
      inv.options[name] = value;
    }
  }

  apply_toml(inv.values, config_path, config_given);
  inv.values.config_file = config_path;

  // systemd's credentials (LoadCredential=): the secrets it hands over, below the explicit
  // environment and flags.
  for (const char* const* e = env ? env : environ; e && *e; ++e) {
    std::string_view kv = *e;
    if (kv.rfind("CREDENTIALS_DIRECTORY=", 0) != 0) continue;
    std::filesystem::path dir(std::string(kv.substr(kv.find('=') + 1)));
    std::error_code ec;
    if (std::filesystem::exists(dir / "jwt_secret", ec))
      inv.values.jwt_secret = read_secret_file("credential jwt_secret", dir / "jwt_secret");
    if (std::filesystem::exists(dir / "secret_keys", ec))
      inv.values.secret_keys = read_secret_file("credential secret_keys", dir / "secret_keys");
  }
  for (const char* const* e = env ? env : environ; e && *e; ++e) {
    std::string_view kv = *e;
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    auto key = kv.substr(0, eq);
    for (auto& o : options())
      if (key == o.env) o.set(inv.values, std::string(kv.substr(eq + 1)));
  }
  for (auto& [o, v] : flags) o->set(inv.values, v);
  return inv;
}

void require_legal_retention(const settings& s) {
  if (s.audit_retention_days < audit_retention_minimum_days && !s.audit_retention_override)
    throw config_error("audit-retention-days below " +
                       std::to_string(static_cast<int>(audit_retention_minimum_days)) +
                       " (6 years, the legal minimum for an audit trail of health data) needs "
                       "--audit-retention-override");
}

void require_serveable(settings& s) {
  require_legal_retention(s);
  if (!s.cluster_node_id.empty() && s.dead_after < 2 * s.heartbeat_interval)
    throw config_error("dead-after must be at least twice heartbeat-interval");
  if (!s.cluster_node_id.empty() &&
      (s.cluster_cert.empty() || s.cluster_key.empty() || s.cluster_ca.empty()))
    throw config_error("a cluster node needs cluster-cert, cluster-key and cluster-ca: nodes "
                       "talk over mutual TLS only (docs/cluster.md)");
  if (s.jwt_secret.size() >= 32) return;
  if (!s.dev)
    throw config_error("a JWT secret of at least 32 bytes is required (CARECRM_JWT_SECRET or "
                       "--jwt-secret); --dev allows a generated one");
  // A fixed development key would let anyone who read this source forge tokens for any dev
  // server: --dev draws one per process (its tokens end with it).
  unsigned char key[32];
  for (std::size_t got = 0; got < sizeof key;) {
    auto n = ::getrandom(key + got, sizeof key - got, 0);
    if (n < 0 && errno != EINTR) throw config_error("no random bytes for the JWT secret");
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  static constexpr char hex[] = "0123456789abcdef";
  s.jwt_secret.clear();
  for (unsigned char b : key) {
    s.jwt_secret += hex[b >> 4];
    s.jwt_secret += hex[b & 15];
  }
}

std::string help_text() {
  std::ostringstream os;
  os << "carecrm: a multi-tenant healthcare CRM service\n\n"
        "Usage:\n"
        "  carecrm serve [options]        run the HTTP API (applies migrations first)\n"
        "  carecrm migrate [options]      apply database migrations and exit\n"
        "  carecrm tenant create --name N --admin-email E --admin-password P [--admin-name F]\n"
        "                        [--currency C] [--demo]\n"
        "                                 create a tenant (default pipeline, default currency\n"
        "                                 C, ISO 4217, USD if not given) and its first admin;\n"
        "                                 --demo adds a patient, a calendar, a service and a\n"
        "                                 booking on the next weekday; prints JSON\n"
        "  carecrm cluster status         the cluster's members and tenant leases; JSON\n"
        "  carecrm cluster move --tenant N --to NODE [--timeout S]\n"
        "                                 hand tenant N to node NODE (its owner stops it first);\n"
        "                                 waits until NODE holds it; prints JSON\n"
        "  carecrm secrets status         count the stored secrets by the key sealing them\n"
        "  carecrm secrets rotate         seal every stored secret with the first key of\n"
        "                                 --secret-keys (list the new key first, keep the old\n"
        "                                 one until status shows nothing under it)\n"
        "  carecrm audit verify --tenant N  check tenant N's audit hash chain (0: events of no\n"
        "                                 tenant); exit 1 names the first row that does not hold\n"
        "  carecrm audit prune            drop the audit partitions past --audit-retention-days\n"
        "  carecrm tenant list            the tenants, with their users and contacts; JSON\n"
        "  carecrm user reset-password --tenant N --email E [--password-stdin]\n"
        "                                 set a user's password (read from stdin, or drawn\n"
        "                                 and printed once) and end their sessions\n"
        "  carecrm --version\n"
        "  carecrm --help\n\n"
        "Settings (defaults < TOML file < environment < flags):\n"
        "  --config PATH                  TOML file (default config/carecrm.toml, optional)\n";
  for (auto& o : options()) {
    std::string flag = std::string("  --") + o.flag;
    if (std::strcmp(o.flag, "dev") != 0) flag += " V";
    os << flag;
    for (std::size_t n = flag.size(); n < 33; ++n) os << ' ';
    os << o.help << "\n";
    os << "                                   env " << o.env;
    if (*o.section)
      os << ", toml [" << o.section << "] " << o.key;
    else
      os << ", toml " << o.key;
    os << "\n";
  }
  return os.str();
}

std::pair<std::string, int> host_and_port(const std::string& name, const std::string& value) {
  auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw config_error(name + ": needs host:port: '" + value + "'");
  try {
    std::size_t used = 0;
    auto port = std::stoi(value.substr(colon + 1), &used);
    if (used == value.size() - colon - 1 && port >= 0 && port <= 65535)
      return {value.substr(0, colon), port};
  } catch (const std::exception&) {
  }
  throw config_error(name + ": not a port: '" + value + "'");
}

} // namespace crm::config
