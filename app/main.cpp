// The composition root: parses the command line and wires the components together.
// `carecrm serve | migrate | tenant create`; see `carecrm --help`.
#include "actors/cluster.hpp"
#include "actors/runtime.hpp"
#include "actors/workflows.hpp"
#include "cluster/membership.hpp"
#include "config/settings.hpp"
#include "domain/assistant_lexicon.hpp"
#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/deal.hpp"
#include "domain/revocation_list.hpp"
#include "domain/secret_keys.hpp"
#include "domain/user.hpp"
#include "domain/validation.hpp"
#include "http/api.hpp"
#include "http/audit.hpp"
#include "http/deal_input.hpp"
#include "http/metrics.hpp"
#include "http/placement.hpp"
#include "http/rate_limits.hpp"
#include "http/server.hpp"
#include "net/http_client.hpp"
#include "net/smtp_client.hpp"
#include "net/trusted_proxies.hpp"
#include "net/worker_pool.hpp"
#include "persistence/audit_repo.hpp"
#include "persistence/log.hpp"
#include "persistence/migrations.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/redis_client.hpp"
#include "persistence/revocations.hpp"
#include "persistence/schedule_repo.hpp"
#include "persistence/secrets_repo.hpp"
#include "persistence/subject_repo.hpp"
#include "persistence/user_repo.hpp"

#include <sys/resource.h>

#include <boost/json.hpp>

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <optional>
#include <thread>

namespace {

using namespace crm;

int cores() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// glibc keeps up to 7 freed blocks of each small size per thread (tcache), out of reach of
// malloc_trim: after idle tenants passivate, blocks cached by the pool, asio and actor threads
// keep the pages around them resident. With 3 per size, resident memory after passivation
// went from +12 % to +8–10 % of its level before the tenants loaded, with no measurable change
// in requests/s (benchmarks/RESULTS.md). glibc reads the setting only at start-up, from
// GLIBC_TUNABLES: unless that already sets it, `serve` executes itself again once with it.
void with_malloc_tunables(char** argv) {
  constexpr std::string_view setting = "glibc.malloc.tcache_count";
  const char* current = std::getenv("GLIBC_TUNABLES");
  std::string tunables = current ? current : "";
  if (tunables.find(setting) != std::string::npos) return;
  tunables += (tunables.empty() ? "" : ":") + std::string(setting) + "=3";
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Not re-executed (no /proc?): serve with glibc's defaults.
}

// The keys sealing secrets at rest (docs/operations.md). `draw`: with none configured, draw
// one for this process (--dev: what it seals cannot be opened after it stops).
domain::secret_keys load_secret_keys(const config::settings& cfg, bool draw) {
  if (cfg.secret_keys.empty()) {
    if (!draw)
      throw config::config_error("secret keys are required (CARECRM_SECRET_KEYS or "
                                 "--secret-keys, id:base64-of-32-bytes)" +
                                 std::string(cfg.dev ? "" : "; --dev draws one"));
    log_warn("no --secret-keys: secrets stored by this development server are sealed with a key "
             "drawn for this process and cannot be opened after it stops");
    return domain::secret_keys::generate("dev-" + domain::random_token(6));
  }
  try {
    return domain::secret_keys::parse(cfg.secret_keys);
  } catch (const domain::secret_error& e) {
    throw config::config_error(e.what());
  }
}

std::string joined(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// The migrations, with the configured keys when there are some (016 signs the audit heads with
// them, and is refused without).
int migrate_database(const config::settings& cfg, const domain::secret_keys* keys = nullptr) {
  std::optional<domain::secret_keys> parsed;
  if (!keys && !cfg.secret_keys.empty())
    keys = &parsed.emplace(domain::secret_keys::parse(cfg.secret_keys));
  return persistence::apply_migrations(cfg.database_url, keys);
}

int serve(config::settings cfg) {
  config::require_serveable(cfg);
  net::trusted_proxies proxies;
  try {
    proxies = net::trusted_proxies::parse(cfg.trusted_proxies);
  } catch (const std::invalid_argument& e) {
    throw config::config_error(std::string("trusted-proxies: ") + e.what());
  }
  const auto keys = load_secret_keys(cfg, cfg.dev);
  // Fewer malloc arenas: with one per thread (pools, scheduler, asio) freed tenant state stays
  // scattered over many arenas and less of it can be returned after passivation.
  mallopt(M_ARENA_MAX, 4);

  // Every thread started from here on inherits this mask; main waits for the signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto applied = migrate_database(cfg, &keys);
  if (applied > 0) log_info("{} migration(s) applied", applied);

  {
    // Plaintext from before sealing existed is sealed now, and a server that could not open
    // what is stored does not start.
    persistence::pg_conn conn(cfg.database_url, &keys);
    // Erasures a crash left half-done are completed before any tenant's state is loaded.
    if (auto n = persistence::complete_pending_erasures(conn))
      log_info("{} interrupted erasure(s) completed", n);
    auto missing = persistence::prepare_secrets(conn);
    if (!missing.empty()) {
      auto what = "stored secrets are sealed with key(s) " + joined(missing) +
                  ", which --secret-keys does not list";
      if (!cfg.dev) throw config::config_error(what);
      log_warn("{}: tenants holding them will fail to load", what);
    }
  }
  persistence::pg_pool pool(cfg.database_url, cfg.database_pool_size, cfg.database_queue_limit,
                            &keys);
  persistence::redis_client redis(cfg.redis_url);
  domain::revocation_list revoked;
  persistence::revocation_store revocations(revoked, redis, cfg.redis_url);
  revocations.start(pool);
  persistence::login_throttle throttle(redis, cfg.login_max_failures, cfg.login_window_seconds);
  net::worker_pool hashing(cfg.hash_threads > 0 ? cfg.hash_threads : cores(), cfg.hash_queue_limit);
  // The assistant's dictionaries (about 0.2 s for Portuguese) load here, off the actor threads
  // whose first index build or answer would otherwise read them.
  hashing.try_submit([] {
    for (auto l : {domain::ai::language::en, domain::ai::language::pt, domain::ai::language::es})
      (void)domain::ai::lexicon::available(l);
  });
  // The audit trail (docs/compliance.md): partitions exist before the first row is written.
  {
    persistence::pg_conn conn(cfg.database_url, &keys);
    persistence::maintain_audit_partitions(conn, cfg.audit_retention_days, &keys);
  }
  persistence::audit_writer audit_writer(
      cfg.database_url,
      {std::chrono::milliseconds(static_cast<std::int64_t>(cfg.audit_flush_interval * 1000)),
       cfg.audit_buffer, 8192, cfg.audit_retention_days,
       std::chrono::milliseconds(static_cast<std::int64_t>(cfg.audit_chain_interval * 1000)),
       &keys});
  // In a cluster (docs/cluster.md) the lease book decides which tenants run here, and fences
  // every write of theirs.
  std::unique_ptr<cluster::membership> members;
  actors::cluster_tls tls{cfg.cluster_cert, cfg.cluster_key, cfg.cluster_ca};
  if (!cfg.cluster_node_id.empty()) {
    try {
      actors::check_cluster_tls(tls);
    } catch (const std::invalid_argument& e) {
      throw config::config_error(e.what());
    }
    cluster::options co;
    co.node_id = cfg.cluster_node_id;
    co.heartbeat_interval = cfg.heartbeat_interval;
    co.dead_after = cfg.dead_after;
    members = std::make_unique<cluster::membership>(co, pool);
    persistence::install_lease_source(&members->book());
  }
  actors::runtime rt({cfg.actor_threads, cfg.tenant_idle_timeout, &audit_writer, members.get(),
                      cfg.commits_in_flight, tls},
                     pool);
  http::http_metrics metrics;
  http::auditor auditor(audit_writer, cfg.audit_reads == "off" ? http::auditor::read_policy::off
                                      : cfg.audit_reads == "best_effort"
                                          ? http::auditor::read_policy::best_effort
                                          : http::auditor::read_policy::required);
  std::unique_ptr<http::tenant_placement> placement;
  if (members) placement = std::make_unique<http::tenant_placement>(*members, rt);
  std::atomic<bool> stopping{false};
  http::services svc{cfg,     rt,      pool,    redis,           revocations, throttle,
                     hashing, metrics, auditor, placement.get(), &stopping};
  auto api = http::make_api_router(svc);
  auto ops = http::make_ops_router(svc);
  metrics.add_routes(api);
  metrics.add_routes(ops);

  // Every connection is a file descriptor: the cap stays below the process's limit, leaving
  // room for Postgres, Redis, outbound calls and the listeners.
  if (rlimit rl{}; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    auto room = static_cast<std::size_t>(rl.rlim_cur > 512 ? rl.rlim_cur - 256 : rl.rlim_cur / 2);
    if (cfg.max_connections > room) {
      log_warn("--max-connections {} lowered to {} (open file limit {})", cfg.max_connections, room,
               rl.rlim_cur);
      cfg.max_connections = room;
    }
  }
  http::rate_limits rates(
      {static_cast<double>(cfg.rate_limit_user), static_cast<double>(cfg.rate_limit_tenant),
       static_cast<double>(cfg.rate_limit_login), static_cast<double>(cfg.rate_limit_webhook),
       static_cast<double>(cfg.rate_limit_address)});
  http::server srv(cfg.http_threads,
                   {cfg.body_limit, cfg.header_limit, cfg.header_timeout, cfg.idle_timeout,
                    cfg.body_timeout, cfg.max_connections, cfg.access_log, std::move(proxies)},
                   {cfg.jwt_secret,
                    &revoked,
                    {cfg.metrics_token, cfg.metrics_require_token, cfg.metrics_hosts},
                    &rates,
                    &auditor,
                    placement.get(),
                    &pool},
                   metrics);
  auto api_at = srv.listen(cfg.listen, api);
  auto ops_at = srv.listen(cfg.metrics_listen, ops);
  // Automation: outbound HTTP on its own thread, and the sweeper that wakes idle tenants with
  // due work (what a crash left unfinished included). Installed after the API is bound (so
  // webhook_url can name the real port) and before it serves, so every actor sees it.
  net::client_options outbound;
  outbound.allow_private = cfg.outbound_allow_private;
  outbound.connect_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(cfg.outbound_connect_timeout * 1000));
  outbound.response_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(cfg.outbound_timeout * 1000));
  outbound.user_agent = "carecrm-webhooks/1";
  // Model providers stream an answer as server-sent events: a long one needs more than 64 KiB.
  outbound.max_response_body = 1024 * 1024;
  net::http_client client(outbound);
  net::smtp_options smtp_opts;
  smtp_opts.allow_private = cfg.outbound_allow_private;
  smtp_opts.ca_file = cfg.smtp_ca_file;
  net::smtp_client smtp(smtp_opts);
  actors::automation_options automation;
  automation.client = &client;
  automation.smtp = &smtp;
  automation.public_url = cfg.public_url.empty() ? "http://" + api_at : cfg.public_url;
  while (!automation.public_url.empty() && automation.public_url.back() == '/')
    automation.public_url.pop_back();
  automation.retry_base = cfg.webhook_retry_base;
  automation.retry_max = cfg.webhook_retry_max;
  automation.retry_window = cfg.webhook_retry_window;
  automation.report_wait = cfg.outbound_report_wait;
  automation.poll_interval = cfg.automation_poll;
  automation.ai_timeout = cfg.ai_timeout;
  automation.read_contact_patch = &http::read_contact_patch;
  automation.read_deal_fields = [](const boost::json::object& o, bool move) {
    return http::read_deal(o, !move, move, {std::string("params")});
  };
  actors::start_automation(rt, std::move(automation));
  if (members) {
    // Other nodes forward requests of the tenants held here to this gateway.
    auto [host, port] = config::host_and_port("cluster-listen", cfg.cluster_listen);
    // What the others dial: the listen address, or the one advertised in front of it (checked
    // when the settings were read).
    auto [dial_host, dial_port] =
        cfg.cluster_advertise.empty()
            ? std::pair{host, 0}
            : config::host_and_port("cluster-advertise", cfg.cluster_advertise);
    port = actors::publish_gateway(
        rt, host, port, [&srv, &api](actors::forwarded_request req, actors::forwarded_reply reply) {
          srv.serve_forwarded(api, std::move(req), std::move(reply));
        });
    auto* m = members.get();
    members->on_node_down([&rt](const cluster::node_info& n) {
      // A planned stop reads as one: the tenant moves, nothing crashed.
      actors::forget_gateway(rt, n.actor_host, n.actor_port,
                             n.state == "left"
                                 ? "the node holding this tenant is stopping and hands it to "
                                   "another node; retry"
                                 : "the node holding this tenant stopped answering; retry");
    });
    if (cfg.cluster_advertise.empty()) dial_port = port;
    members->join(
        api_at, dial_host, dial_port,
        [&rt, m](const std::vector<std::int64_t>& lost) {
          rt.evict(lost);
          // Held again (at a newer epoch) only once the old actors are gone.
          for (auto t : lost) rt.when_stopped(t, [m, t] { m->book().stopped(t); });
        },
        [&rt, m](const cluster::membership::move& mv) {
          rt.when_stopped(mv.tenant, [m, mv] { m->finish_move(mv); });
        });
    if (cfg.cluster_rebalance) placement->start_rebalancing(std::chrono::seconds(5));
    log_info("cluster: node {} with its gateway on {}:{} (dialled at {}:{})", cfg.cluster_node_id,
             host, port, dial_host, dial_port);
  }
  if (cfg.access_log) start_log_writer();
  srv.start();

  log_info("carecrm serving on http://{} (metrics on http://{})", api_at, ops_at);
  std::cout << R"({"event":"listening","http":")" << api_at << R"(","metrics":")" << ops_at << "\"}"
            << std::endl;

  int sig = 0;
  sigwait(&signals, &sig);
  log_info("signal {}: stopping", sig);
  // /readyz says so at once; requests are still served for --shutdown-grace, so a load
  // balancer's health check takes this node out before it stops accepting (docs/cluster.md).
  stopping = true;
  const auto grace_ends = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(std::max(0.0, cfg.shutdown_grace)));
  // The cluster places nothing more here (the tenants held here are served until they are
  // handed over, below).
  if (members) members->begin_stopping();
  std::this_thread::sleep_until(grace_ends);

  // Stop taking work, answer what is in flight, then stop each layer from the top down.
  srv.stop_accepting();
  if (!srv.drain(10)) log_warn("stopping with requests still in flight");
  rt.shutdown();
  // Every tenant here has stopped and committed: their leases go to the live nodes.
  if (members) members->leave();
  audit_writer.stop();
  revocations.stop();
  hashing.stop();
  redis.stop();
  pool.stop();
  srv.stop();
  log_info("stopped");
  stop_log_writer();
  return 0;
}

// `carecrm secrets status | rotate`: counts the stored secrets by key; rotate first seals them
// all with the first key listed.
int secrets(const config::invocation& inv) {
  const auto& cfg = inv.values;
  const auto keys = load_secret_keys(cfg, false);
  migrate_database(cfg, &keys);
  persistence::pg_conn conn(cfg.database_url, &keys);
  boost::json::object o;
  o["active_key"] = keys.active_id();
  if (inv.words[1] == "rotate") {
    auto r = persistence::reseal_secrets(conn, false);
    // A security event of carecrm itself: chain 0 (docs/compliance.md "Audit trail").
    auto row = domain::make_audit(nullptr, 0, "secrets", std::nullopt, "rotate");
    row.actor_type = "operator";
    row.actor_ref = "carecrm secrets rotate (key " + keys.active_id() + ")";
    persistence::record_audit(conn, {row});
    o["resealed"] = r.resealed;
    o["hashes_left"] = r.hashes_left;
  }
  auto census = persistence::count_secrets(conn, true);
  boost::json::object sealed, hashed;
  boost::json::array unknown;
  for (auto& [key, n] : census.sealed) sealed[key] = n;
  for (auto& [key, n] : census.hashed) hashed[key] = n;
  for (auto* m : {&census.sealed, &census.hashed})
    for (auto& [key, n] : *m)
      if (!keys.has(key) && std::find(unknown.begin(), unknown.end(), key.c_str()) == unknown.end())
        unknown.emplace_back(key);
  o["sealed"] = std::move(sealed);
  o["hashed"] = std::move(hashed);
  o["plaintext"] = census.plaintext;
  o["unknown_keys"] = std::move(unknown);
  std::cout << boost::json::serialize(o) << std::endl;
  return 0;
}

// `carecrm audit verify --tenant N`: walks the tenant's hash chain; exit 1 names the first
// row that does not hold. `carecrm audit prune`: applies the retention now (serve does it hourly).
int audit(const config::invocation& inv) {
  const auto& cfg = inv.values;
  config::require_legal_retention(cfg);
  // The heads and retention anchors are signed, and checked, with the configured keys.
  const auto keys = load_secret_keys(cfg, false);
  migrate_database(cfg, &keys);
  persistence::pg_conn conn(cfg.database_url, &keys);
  boost::json::object o;
  if (inv.words[1] == "prune") {
    auto r = persistence::maintain_audit_partitions(conn, cfg.audit_retention_days, &keys);
    boost::json::array created, dropped;
    for (auto& n : r.created) created.emplace_back(n);
    for (auto& n : r.dropped) dropped.emplace_back(n);
    o["created"] = std::move(created);
    o["dropped"] = std::move(dropped);
    std::cout << boost::json::serialize(o) << std::endl;
    return 0;
  }
  auto it = inv.options.find("tenant");
  std::int64_t tenant = -1;
  if (it != inv.options.end()) {
    auto& v = it->second;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), tenant);
    if (ec != std::errc() || end != v.data() + v.size() || tenant < 0) tenant = -1;
  }
  if (tenant < 0) {
    std::cerr << "carecrm: audit verify needs --tenant N (0: events outside any tenant)\n";
    return 2;
  }
  auto v = persistence::verify_audit_chain(conn, tenant, keys);
  o["tenant_id"] = tenant;
  o["ok"] = v.ok;
  o["rows"] = v.rows;
  o["first_seq"] = v.first_seq;
  o["last_seq"] = v.last_seq;
  o["pruned_through"] = v.pruned_through;
  if (!v.ok) {
    o["broken_seq"] = *v.broken_seq;
    o["reason"] = v.reason;
  }
  std::cout << boost::json::serialize(o) << std::endl;
  return v.ok ? 0 : 1;
}

int migrate(const config::settings& cfg) {
  auto n = migrate_database(cfg);
  std::cout << R"({"applied": )" << n << "}" << std::endl;
  return 0;
}

int tenant_create(const config::invocation& inv) {
  auto opt = [&](const char* name) -> std::string {
    auto it = inv.options.find(name);
    return it == inv.options.end() ? std::string() : it->second;
  };
  auto name = std::string(domain::trim(opt("name")));
  auto email = std::string(domain::trim(opt("admin-email")));
  auto password = opt("admin-password");
  auto full_name = opt("admin-name");
  auto currency = opt("currency");
  if (currency.empty()) currency = "USD";
  std::vector<std::string> problems;
  if (name.empty()) problems.push_back("--name is required");
  if (!domain::is_valid_email(email)) problems.push_back("--admin-email must be a valid e-mail");
  if (domain::utf8_length(password) < 10)
    problems.push_back("--admin-password must have at least 10 characters");
  if (!domain::is_currency(currency))
    problems.push_back("--currency must be an ISO 4217 code such as USD, EUR or BRL");
  if (!problems.empty()) {
    for (auto& p : problems) std::cerr << "carecrm: " << p << "\n";
    return 2;
  }
  migrate_database(inv.values);
  domain::user admin;
  admin.email = email;
  admin.full_name = full_name.empty() ? "Administrator" : full_name;
  admin.user_role = domain::role::admin;
  admin.password_hash = domain::hash_password(password);
  persistence::pg_conn conn(inv.values.database_url);
  auto r = persistence::create_tenant(conn, name, admin, currency);
  if (!r) {
    std::cerr << "carecrm: " << r.error().detail << "\n";
    return 1;
  }
  boost::json::object o;
  o["tenant_id"] = r->tenant_id;
  o["user_id"] = r->user_id;
  if (opt("demo") == "true") {
    auto demo = persistence::seed_demo_schedule(conn, r->tenant_id);
    o["demo"] = {{"contact_id", demo.contact_id},
                 {"calendar_id", demo.calendar_id},
                 {"service_id", demo.service_id},
                 {"appointment_id", demo.appointment_id}};
  }
  std::cout << boost::json::serialize(o) << std::endl;
  return 0;
}

// `carecrm tenant list`: every tenant with its numbers of users and contacts, as a JSON array.
int tenant_list(const config::invocation& inv) {
  migrate_database(inv.values);
  persistence::pg_conn conn(inv.values.database_url);
  boost::json::array out;
  for (auto& t : persistence::list_tenants(conn)) {
    out.emplace_back(boost::json::object{{"tenant_id", t.id},
                                         {"name", t.name},
                                         {"created_at", domain::format_rfc3339(t.created_at)},
                                         {"users", t.users},
                                         {"active_users", t.active_users},
                                         {"contacts", t.contacts}});
  }
  std::cout << boost::json::serialize(out) << std::endl;
  return 0;
}

// `carecrm cluster status`: the members and the leases, as JSON. `carecrm cluster move --tenant N
// --to NODE [--timeout S]`: the owner stops the tenant's actors and hands the lease to NODE
// (docs/cluster.md "Moving a tenant"); waits until NODE holds it, then prints the lease.
int cluster_command(const config::invocation& inv) {
  migrate_database(inv.values);
  persistence::pg_conn conn(inv.values.database_url);
  if (inv.words[1] == "status") {
    // Postgres spaces its JSON ("a" : 1); printed compact, as every other command prints.
    std::cout << boost::json::serialize(
                     boost::json::parse(cluster::cluster_status_json(conn, inv.values.dead_after)))
              << std::endl;
    return 0;
  }
  auto opt = [&](const char* name) {
    auto it = inv.options.find(name);
    return it == inv.options.end() ? std::string() : it->second;
  };
  std::int64_t tenant = 0;
  auto t = opt("tenant");
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), tenant);
  auto to = opt("to");
  double timeout = 30;
  if (auto v = opt("timeout"); !v.empty()) timeout = std::atof(v.c_str());
  // Each refusal says which option is wrong and why, then the usage.
  std::string wrong;
  if (t.empty())
    wrong = "--tenant is missing";
  else if (ec != std::errc() || end != t.data() + t.size() || tenant <= 0)
    wrong = "--tenant must be a tenant id (a positive integer), not \"" + t + "\"";
  else if (to.empty())
    wrong = "--to is missing";
  else if (!cluster::valid_node_id(to))
    wrong =
        "--to must be a node id (1 to 64 of A-Z, a-z, 0-9, '_', '.' and '-'), not \"" + to + "\"";
  else if (!(timeout > 0))
    wrong = "--timeout must be a number of seconds above 0";
  if (!wrong.empty()) {
    std::cerr << "carecrm: cluster move: " << wrong
              << "\nusage: carecrm cluster move --tenant N --to NODE [--timeout S]\n";
    return 2;
  }
  auto from = cluster::request_move(conn, tenant, to, inv.values.dead_after);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  for (;;) {
    auto now = cluster::lease_now(conn, tenant);
    if (now && now->node == to) {
      boost::json::object o{
          {"tenant_id", tenant}, {"from", from.node}, {"to", to}, {"epoch", now->epoch}};
      std::cout << boost::json::serialize(o) << std::endl;
      return 0;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "carecrm: tenant " << tenant << " is still held by "
                << (now ? now->node : std::string("nobody")) << " after " << timeout << " s\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// `carecrm user reset-password --tenant N --email E [--password-stdin]`: for an administrator
// locked out. The new password is read from stdin, or drawn and printed once; the user's
// sessions end (every node refuses their tokens within a second when Redis is reachable) and
// the tenant's audit trail records it.
int user_reset_password(const config::invocation& inv) {
  auto opt = [&](const char* name) -> std::string {
    auto it = inv.options.find(name);
    return it == inv.options.end() ? std::string() : it->second;
  };
  std::int64_t tenant = 0;
  auto t = opt("tenant");
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), tenant);
  auto email = std::string(domain::trim(opt("email")));
  if (ec != std::errc() || end != t.data() + t.size() || tenant <= 0 || email.empty()) {
    std::cerr << "carecrm: user reset-password needs --tenant N and --email E\n";
    return 2;
  }
  std::string password;
  bool drawn = false;
  if (inv.options.count("password-stdin")) {
    std::getline(std::cin, password);
    if (!password.empty() && password.back() == '\r') password.pop_back();
  } else {
    password = domain::random_token(15);
    drawn = true;
  }
  if (domain::utf8_length(password) < 10 || domain::utf8_length(password) > 256) {
    std::cerr << "carecrm: the password must have 10 to 256 characters\n";
    return 2;
  }
  migrate_database(inv.values);
  persistence::pg_conn conn(inv.values.database_url);
  auto user = persistence::find_user_by_email(conn, email);
  if (!user || user->tenant_id != tenant) {
    std::cerr << "carecrm: tenant " << tenant << " has no user " << email << "\n";
    return 1;
  }
  user->password_hash = domain::hash_password(password);
  auto changed = persistence::update_user(conn, *user, true);
  auto row = domain::make_audit(nullptr, tenant, "user", user->id, "reset_password");
  row.actor_type = "operator";
  row.actor_ref = "carecrm user reset-password";
  row.fields = {"password"};
  persistence::record_audit(conn, {row});
  // Announced to the running nodes as a sign-out would be.
  bool announced = changed.revoked_sessions.empty();
  if (!announced) {
    persistence::redis_client redis(inv.values.redis_url);
    domain::revocation_list list;
    persistence::revocation_store store(list, redis, inv.values.redis_url);
    std::promise<bool> done;
    auto acknowledged = done.get_future();
    store.revoke(changed.revoked_sessions, [&done](bool ok) { done.set_value(ok); });
    announced = acknowledged.wait_for(std::chrono::seconds(5)) == std::future_status::ready &&
                acknowledged.get();
    redis.stop();
  }
  boost::json::object o;
  o["tenant_id"] = tenant;
  o["user_id"] = user->id;
  o["sessions_revoked"] = changed.revoked_sessions.size();
  o["announced"] = announced;
  if (drawn) o["password"] = password;
  std::cout << boost::json::serialize(o) << std::endl;
  if (!announced)
    std::cerr << "carecrm: Redis did not take the revocations: running nodes refuse the old "
                 "sessions' refresh tokens at once, and their access tokens once Redis answers "
                 "them again (they re-read the revocations from Postgres then)\n";
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    domain::init_crypto();
    auto inv = config::load(argc, argv);
    set_log_style(inv.values.log_format == "json" ? log_style::json : log_style::text);
    if (inv.version) {
      std::cout << "carecrm " << CRM_VERSION << "\n";
      return 0;
    }
    if (inv.help || inv.words.empty()) {
      std::cout << config::help_text();
      return inv.help ? 0 : 2;
    }
    const auto& cmd = inv.words[0];
    if (cmd == "serve" && inv.words.size() == 1) {
      with_malloc_tunables(argv);
      return serve(inv.values);
    }
    if (cmd == "migrate" && inv.words.size() == 1) return migrate(inv.values);
    if (cmd == "tenant" && inv.words.size() == 2 && inv.words[1] == "create")
      return tenant_create(inv);
    if (cmd == "tenant" && inv.words.size() == 2 && inv.words[1] == "list") return tenant_list(inv);
    if (cmd == "user" && inv.words.size() == 2 && inv.words[1] == "reset-password")
      return user_reset_password(inv);
    if (cmd == "audit" && inv.words.size() == 2 &&
        (inv.words[1] == "verify" || inv.words[1] == "prune"))
      return audit(inv);
    if (cmd == "cluster" && inv.words.size() == 2 &&
        (inv.words[1] == "status" || inv.words[1] == "move"))
      return cluster_command(inv);
    if (cmd == "secrets" && inv.words.size() == 2 &&
        (inv.words[1] == "status" || inv.words[1] == "rotate"))
      return secrets(inv);
    std::cerr << "carecrm: unknown command; see carecrm --help\n";
    return 2;
  } catch (const config::config_error& e) {
    std::cerr << "carecrm: configuration: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "carecrm: " << e.what() << "\n";
    return 1;
  }
}
