#include "cluster/membership.hpp"

#include "persistence/log_limiter.hpp"

#include "persistence/fence.hpp"
#include "persistence/log.hpp"
#include "persistence/pg_pool.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <map>
#include <random>

namespace crm::cluster {
namespace {

using std::chrono::duration;
using std::chrono::duration_cast;

std::vector<lease> leases_of(const pqxx::result& r) {
  std::vector<lease> out;
  out.reserve(r.size());
  for (const auto& row : r)
    out.push_back({row[0].as<std::int64_t>(), row[1].as<std::string>(), row[2].as<std::int64_t>()});
  return out;
}

// Hands the leases of nodes that are not live to the live ones, least loaded first, each at a
// new epoch. `only` limits it to one node's leases (a node leaving). Returns how many moved.
std::int64_t hand_over(pqxx::work& tx, double dead_after, const std::string* only) {
  auto orphans = only ? tx.exec_params("SELECT tenant_id FROM tenant_leases WHERE node_id = $1"
                                       " ORDER BY tenant_id FOR UPDATE",
                                       *only)
                      : tx.exec("SELECT l.tenant_id FROM tenant_leases l"
                                " JOIN cluster_nodes n USING (node_id)"
                                " WHERE n.state <> 'live' ORDER BY l.tenant_id"
                                " FOR UPDATE OF l SKIP LOCKED");
  if (orphans.empty()) return 0;
  auto live = tx.exec_params(
      "SELECT n.node_id, (SELECT count(*) FROM tenant_leases l WHERE l.node_id = n.node_id)"
      "  FROM cluster_nodes n WHERE crm_node_takes_tenants(n.node_id, $1) AND n.node_id <> $2"
      " ORDER BY n.node_id",
      dead_after, only ? *only : std::string());
  if (live.empty()) return 0;
  // load -> node: the least loaded takes the next tenant.
  std::multimap<std::int64_t, std::string> by_load;
  for (const auto& row : live) by_load.emplace(row[1].as<std::int64_t>(), row[0].as<std::string>());
  std::string tenants = "{", nodes = "{";
  for (std::size_t i = 0; i < orphans.size(); ++i) {
    auto least = by_load.begin();
    auto [load, node] = *least;
    by_load.erase(least);
    by_load.emplace(load + 1, node);
    if (i) {
      tenants += ',';
      nodes += ',';
    }
    tenants += orphans[i][0].c_str();
    nodes += node; // node ids are [A-Za-z0-9_.-]: no quoting needed in an array literal
  }
  tenants += '}';
  nodes += '}';
  auto moved = tx.exec_params(
      "UPDATE tenant_leases l SET node_id = v.node, epoch = l.epoch + 1, moving_to = NULL,"
      "       acquired_at = now()"
      "  FROM unnest($1::bigint[], $2::text[]) AS v(tenant, node) WHERE l.tenant_id = v.tenant",
      tenants, nodes);
  return static_cast<std::int64_t>(moved.affected_rows());
}

} // namespace

lease request_move(persistence::pg_conn& c, std::int64_t tenant, const std::string& to,
                   double dead_after) {
  pqxx::work tx(c.raw());
  auto live = tx.exec_params("SELECT crm_node_live($1, $2), crm_node_takes_tenants($1, $2)", to,
                             dead_after);
  if (!live[0][0].as<bool>()) throw std::runtime_error("node " + to + " is not a live member");
  if (!live[0][1].as<bool>())
    throw std::runtime_error("node " + to + " is stopping and takes no tenants");
  // Nobody holds it, or its owner is not live: it goes to `to` at once. (A tenant that does not
  // exist has no lease to take: the lease's reference to it says so.)
  pqxx::result r;
  try {
    r = tx.exec_params("INSERT INTO tenant_leases (tenant_id, node_id, epoch) VALUES ($1, $2, 1)"
                       " ON CONFLICT (tenant_id) DO UPDATE SET node_id = EXCLUDED.node_id,"
                       "   epoch = tenant_leases.epoch + 1, moving_to = NULL, acquired_at = now()"
                       "  WHERE tenant_leases.node_id <> EXCLUDED.node_id"
                       "    AND NOT crm_node_live(tenant_leases.node_id, $3)"
                       " RETURNING tenant_id, node_id, epoch",
                       tenant, to, dead_after);
  } catch (const pqxx::foreign_key_violation&) {
    throw std::runtime_error("no tenant " + std::to_string(tenant));
  }
  if (r.empty())
    // A live owner (or `to` itself): the owner hands it over when its heartbeat sees this.
    r = tx.exec_params("UPDATE tenant_leases SET moving_to = CASE WHEN node_id = $2 THEN NULL"
                       "                                      ELSE $2 END"
                       " WHERE tenant_id = $1 RETURNING tenant_id, node_id, epoch",
                       tenant, to);
  tx.commit();
  return leases_of(r).front();
}

std::optional<lease> lease_now(persistence::pg_conn& c, std::int64_t tenant) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT tenant_id, node_id, epoch FROM tenant_leases"
                          " WHERE tenant_id = $1",
                          tenant);
  if (r.empty()) return std::nullopt;
  return leases_of(r).front();
}

std::string cluster_status_json(persistence::pg_conn& c, double dead_after) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params(
      "SELECT json_build_object('nodes', coalesce((SELECT json_agg(json_build_object("
      "   'node_id', n.node_id, 'http_address', n.http_address,"
      "   'actor_address', n.actor_host || ':' || n.actor_port,"
      "   'state', CASE WHEN n.state = 'live' AND NOT crm_node_live(n.node_id, $1)"
      "                 THEN 'suspect'"
      "                 WHEN n.state = 'live' AND n.stopping_since IS NOT NULL THEN 'stopping'"
      "                 ELSE n.state END,"
      "   'heartbeat_age_seconds', round(extract(epoch FROM now() - n.heartbeat_at)::numeric, 3),"
      "   'tenants', (SELECT count(*) FROM tenant_leases l WHERE l.node_id = n.node_id))"
      "   ORDER BY n.node_id) FROM cluster_nodes n), '[]'::json),"
      " 'leases', coalesce((SELECT json_agg(json_build_object('tenant_id', l.tenant_id,"
      "   'node_id', l.node_id, 'epoch', l.epoch, 'moving_to', l.moving_to)"
      "   ORDER BY l.tenant_id) FROM tenant_leases l), '[]'::json))::text",
      dead_after);
  return r[0][0].as<std::string>();
}

bool valid_node_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

membership::membership(options o, persistence::pg_pool& pool)
    : opts_(std::move(o)), pool_(pool), book_(opts_.node_id) {
  std::random_device rd;
  incarnation_ = static_cast<std::int64_t>((static_cast<std::uint64_t>(rd()) << 31) ^ rd()) &
                 0x7fffffffffffffff;
}

membership::~membership() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void membership::join(std::string http_address, std::string actor_host, int actor_port,
                      lost_fn on_lost, moving_fn on_moving) {
  on_moving_ = std::move(on_moving);
  opts_.http_address = std::move(http_address);
  opts_.actor_host = std::move(actor_host);
  opts_.actor_port = actor_port;
  on_lost_ = std::move(on_lost);
  conn_ = std::make_unique<persistence::pg_conn>(pool_.url());
  auto started = lease_book::clock::now();
  {
    pqxx::work tx(conn_->raw());
    tx.exec_params(
        "INSERT INTO cluster_nodes (node_id, http_address, actor_host, actor_port, incarnation)"
        " VALUES ($1, $2, $3, $4, $5)"
        " ON CONFLICT (node_id) DO UPDATE SET http_address = EXCLUDED.http_address,"
        "   actor_host = EXCLUDED.actor_host, actor_port = EXCLUDED.actor_port,"
        "   incarnation = EXCLUDED.incarnation, state = 'live', started_at = now(),"
        "   heartbeat_at = now(), stopping_since = NULL",
        opts_.node_id, opts_.http_address, opts_.actor_host, opts_.actor_port, incarnation_);
    // What a previous incarnation held is taken again at new epochs: anything it left queued
    // (a zombie process of the same id) can no longer commit.
    auto mine = tx.exec_params("UPDATE tenant_leases SET epoch = epoch + 1, moving_to = NULL,"
                               "       acquired_at = now()"
                               " WHERE node_id = $1 RETURNING tenant_id, node_id, epoch",
                               opts_.node_id);
    auto mark = book_.mark();
    tx.commit();
    book_.reconcile(leases_of(mine), mark);
  }
  steady_since_ = last_beat_ = started;
  book_.fresh_until(started + duration_cast<lease_book::clock::duration>(
                                  duration<double>(opts_.dead_after - opts_.heartbeat_interval)));
  persistence::log_info("cluster: node {} joined (incarnation {}, {} leases held)", opts_.node_id,
                        incarnation_, book_.held_count());
  thread_ = std::thread([this] {
    name_this_thread("crm.cluster");
    loop();
  });
}

void membership::loop() {
  std::unique_lock lock(mutex_);
  auto interval =
      duration_cast<std::chrono::milliseconds>(duration<double>(opts_.heartbeat_interval));
  // While Postgres is away every beat fails alike: one line per 10 s, saying how many since.
  log_limiter failing(std::chrono::seconds(10));
  const std::string cause = "heartbeat";
  while (!stopping_) {
    cv_.wait_for(lock, interval);
    if (stopping_) break;
    lock.unlock();
    std::string why;
    try {
      beat(*conn_);
      if (auto n = failing.clear(cause))
        persistence::log_info("cluster: the heartbeat works again after {} failed", n);
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
      why = "a non-standard exception";
    }
    if (!why.empty()) {
      ++heartbeat_failures_;
      std::uint64_t held_back = 0;
      if (failing.admit(cause, held_back))
        persistence::log_error("cluster: the heartbeat failed: {}{}", why,
                               held_back ? " (and " + std::to_string(held_back) +
                                               " times since the last line like this)"
                                         : std::string());
      run_guarded("reconnecting the cluster heartbeat", [&] { conn_->reset(); });
    }
    lock.lock();
  }
}

void membership::beat(persistence::pg_conn& c) {
  auto started = lease_book::clock::now();
  pqxx::work tx(c.raw());
  auto me = tx.exec_params("UPDATE cluster_nodes SET heartbeat_at = now(), state = 'live',"
                           "       stopping_since = CASE WHEN $3 THEN coalesce(stopping_since,"
                           "                                                    now()) END"
                           " WHERE node_id = $1 AND incarnation = $2 RETURNING node_id",
                           opts_.node_id, incarnation_, draining_.load());
  if (me.empty()) {
    // Another process took this node id (a restart while this one was paused): this one owns
    // nothing from now on.
    tx.abort();
    book_.fresh_until({});
    auto lost = book_.reconcile({}, book_.mark());
    lost_ += lost.size();
    if (!lost.empty() && on_lost_) on_lost_(lost);
    persistence::log_error("cluster: node id {} was taken by a newer process; serving no tenant",
                           opts_.node_id);
    return;
  }
  // A gap in this node's own heartbeats (a failure, a pause, a slow Postgres) restarts the
  // window after which it may judge the others.
  auto gap =
      duration_cast<lease_book::clock::duration>(duration<double>(2 * opts_.heartbeat_interval));
  if (started - last_beat_ > gap) steady_since_ = started;
  auto judge = started - steady_since_ >=
               duration_cast<lease_book::clock::duration>(duration<double>(opts_.dead_after));
  judging_ = judge;
  if (judge) {
    auto dead = tx.exec_params("UPDATE cluster_nodes SET state = 'dead'"
                               " WHERE state = 'live' AND NOT crm_node_live(node_id, $1)"
                               " RETURNING node_id",
                               opts_.dead_after);
    for (const auto& row : dead)
      persistence::log_warn("cluster: node {} declared dead (no heartbeat for {} s)",
                            row[0].c_str(), opts_.dead_after);
    declared_dead_ += dead.size();
    auto handed = hand_over(tx, opts_.dead_after, nullptr);
    taken_over_ += static_cast<std::uint64_t>(handed);
    if (handed > 0)
      persistence::log_warn("cluster: the leases of {} tenants of dead nodes handed to live nodes",
                            handed);
  }
  auto mark = book_.mark();
  auto rows = tx.exec_params("SELECT tenant_id, node_id, epoch, moving_to FROM tenant_leases"
                             " WHERE node_id = $1",
                             opts_.node_id);
  auto members =
      tx.exec_params("SELECT n.node_id, n.http_address, n.actor_host, n.actor_port, n.state,"
                     "       extract(epoch FROM now() - n.heartbeat_at)::float8,"
                     "       (SELECT count(*) FROM tenant_leases l WHERE l.node_id = n.node_id),"
                     "       n.stopping_since IS NOT NULL"
                     "  FROM cluster_nodes n ORDER BY n.node_id");
  tx.commit();
  // A tenant an operator moves away (moving_to) is no longer held: it stops here like a lost
  // one, and requests for it go to where it moves; once stopped, finish_move hands it over.
  std::vector<lease> mine;
  std::vector<move> moves;
  for (const auto& row : rows) {
    lease l{row[0].as<std::int64_t>(), row[1].as<std::string>(), row[2].as<std::int64_t>()};
    if (row[3].is_null() || row[3].as<std::string>() == opts_.node_id) {
      mine.push_back(std::move(l));
      continue;
    }
    moves.push_back({l.tenant, l.epoch, row[3].as<std::string>()});
  }
  auto lost = book_.reconcile(mine, mark);
  // Leases that came here from another node (taken over from a dead one, or moved here: an
  // epoch past the first), so that the node serving them says so.
  std::set<std::int64_t> held;
  std::size_t came = 0;
  std::int64_t example = 0;
  for (auto& l : mine) {
    held.insert(l.tenant);
    // (What this node holds at its first beat came with it, not from another node.)
    if (l.epoch > 1 && !held_.count(l.tenant) && heartbeats_ > 0) {
      ++came;
      example = l.tenant;
    }
  }
  if (came > 0)
    persistence::log_info("cluster: node {} now holds {} tenants it took over (tenant {} among "
                          "them), {} in all",
                          opts_.node_id, came, example, held.size());
  held_ = std::move(held);
  last_beat_ = started;
  book_.fresh_until(started + duration_cast<lease_book::clock::duration>(
                                  duration<double>(opts_.dead_after - opts_.heartbeat_interval)));
  std::vector<node_info> nodes;
  for (const auto& row : members)
    nodes.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
                     row[3].as<int>(), row[4].as<std::string>(), row[5].as<double>(),
                     row[6].as<std::int64_t>(), row[7].as<bool>()});
  std::vector<node_info> down;
  {
    std::lock_guard lock(mutex_);
    auto live = [this](const node_info& n) {
      return n.state == "live" && n.heartbeat_age <= opts_.dead_after;
    };
    for (auto& before : nodes_) {
      if (!live(before) || before.id == opts_.node_id) continue;
      auto now = std::find_if(nodes.begin(), nodes.end(),
                              [&](const node_info& n) { return n.id == before.id; });
      if (now == nodes.end() || !live(*now) || now->actor_port != before.actor_port)
        down.push_back(before);
    }
    nodes_ = std::move(nodes);
  }
  if (on_node_down_)
    for (auto& n : down) on_node_down_(n);
  ++heartbeats_;
  std::vector<move> starting;
  {
    std::lock_guard lock(mutex_);
    for (auto& m : moves) {
      if (std::find(moving_.begin(), moving_.end(), m.tenant) != moving_.end()) continue;
      moving_.push_back(m.tenant);
      starting.push_back(m);
    }
  }
  for (auto& m : starting) book_.learn({m.tenant, m.to, m.epoch});
  if (!lost.empty()) {
    lost_ += lost.size();
    persistence::log_warn("cluster: node {} lost the leases of {} tenants", opts_.node_id,
                          lost.size());
    if (on_lost_) on_lost_(lost);
  }
  for (auto& m : starting) {
    persistence::log_info("cluster: moving tenant {} to node {}", m.tenant, m.to);
    if (on_moving_) on_moving_(m);
  }
}

void membership::finish_move(const move& m) {
  auto forget = [this, tenant = m.tenant] {
    std::lock_guard lock(mutex_);
    moving_.erase(std::remove(moving_.begin(), moving_.end(), tenant), moving_.end());
  };
  pool_.run<std::optional<lease>>(
      [m](persistence::pg_conn& c) -> std::optional<lease> {
        pqxx::work tx(c.raw());
        auto r = tx.exec_params(
            "UPDATE tenant_leases SET node_id = moving_to, epoch = epoch + 1, moving_to = NULL,"
            "       acquired_at = now()"
            " WHERE tenant_id = $1 AND epoch = $2 AND moving_to = $3"
            " RETURNING tenant_id, node_id, epoch",
            m.tenant, m.epoch, m.to);
        tx.commit();
        if (r.empty()) return std::nullopt;
        return leases_of(r).front();
      },
      [this, forget, m](domain::outcome<std::optional<lease>> r) {
        forget();
        if (!r) {
          // The next heartbeat sees moving_to again and tries once more.
          persistence::log_warn("cluster: handing tenant {} to {} failed: {}", m.tenant, m.to,
                                r.error().detail);
          return;
        }
        if (*r) {
          book_.learn(**r);
          persistence::log_info("cluster: tenant {} handed to node {} at epoch {}", m.tenant, m.to,
                                (*r)->epoch);
        }
      });
}

void membership::begin_stopping() {
  const auto seen = heartbeats_.load();
  draining_ = true;
  if (!thread_.joinable()) return;
  cv_.notify_all(); // the heartbeat says so now rather than at its next interval
  // Wait (briefly) for a heartbeat that wrote it, so that nothing is placed here once the grace
  // begins; a Postgres that does not answer costs at most this second.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (heartbeats_.load() < seen + 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void membership::leave() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!conn_) return;
  run_guarded("leaving the cluster", [&] {
    pqxx::work tx(conn_->raw());
    auto moved = hand_over(tx, opts_.dead_after, &opts_.node_id);
    tx.exec_params("UPDATE cluster_nodes SET state = 'left' WHERE node_id = $1"
                   " AND incarnation = $2",
                   opts_.node_id, incarnation_);
    tx.commit();
    book_.fresh_until({});
    book_.reconcile({}, book_.mark());
    persistence::log_info("cluster: node {} left, {} tenants handed over", opts_.node_id, moved);
  });
}

void membership::move_tenant(std::int64_t tenant, std::string to,
                             std::function<void(domain::outcome<lease>)> done) {
  pool_.run<lease>(
      [tenant, to = std::move(to),
       dead_after = opts_.dead_after](persistence::pg_conn& c) -> domain::outcome<lease> {
        try {
          return request_move(c, tenant, to, dead_after);
        } catch (const pqxx::failure&) {
          throw; // the database's: the pool's failure
        } catch (const std::runtime_error& e) {
          std::string why = e.what();
          if (why.rfind("no tenant", 0) == 0)
            return domain::failure::of(domain::errc::not_found, why);
          return domain::failure::invalid({{{"body", "to"}, why, "value_error"}});
        }
      },
      std::move(done));
}

void membership::acquire(std::int64_t tenant, std::function<void(owner_outcome)> done) {
  pool_.run<lease>(
      [this, tenant](persistence::pg_conn& c) {
        pqxx::work tx(c.raw());
        // A tenant nobody holds, or whose owner is not live, goes to this node (no forward for
        // the request that asked: a balancer that hashes on the tenant keeps sending it here)
        // unless this node holds more than a quarter (at least 2) above the least-loaded live
        // node, which then takes it. One whose owner is not live only once this node may judge
        // the others (see beat): not in the first seconds after an outage of Postgres that left
        // every heartbeat old. The owner's gateway comes along: it may have joined after this
        // node last read the members.
        tx.exec_params(
            "WITH live AS ("
            "  SELECT n.node_id,"
            "         (SELECT count(*) FROM tenant_leases l WHERE l.node_id = n.node_id) AS load"
            "    FROM cluster_nodes n WHERE crm_node_takes_tenants(n.node_id, $3))"
            " INSERT INTO tenant_leases (tenant_id, node_id, epoch)"
            " SELECT $1, node_id, 1 FROM live, (SELECT min(load) AS least FROM live) m"
            "  ORDER BY (node_id = $2 AND load <= least + greatest(2, least / 4)) DESC, load,"
            "           node_id LIMIT 1"
            " ON CONFLICT (tenant_id) DO UPDATE SET node_id = EXCLUDED.node_id,"
            "   epoch = tenant_leases.epoch + 1, moving_to = NULL, acquired_at = now()"
            "  WHERE $4 AND NOT crm_node_live(tenant_leases.node_id, $3)",
            tenant, opts_.node_id, opts_.dead_after, judging_.load());
        // The lease as it stands now (placed above, or held already), with its owner's gateway.
        auto r = tx.exec_params("SELECT l.tenant_id, l.node_id, l.epoch, l.moving_to, n.actor_host,"
                                "       n.actor_port, crm_node_live(l.node_id, $2)"
                                "  FROM tenant_leases l JOIN cluster_nodes n USING (node_id)"
                                " WHERE l.tenant_id = $1",
                                tenant, opts_.dead_after);
        tx.commit();
        // No live node can take it, or an operator is moving it: a 503, retried by the client.
        if (r.empty() || !r[0][3].is_null()) throw persistence::not_leased(tenant);
        ++acquisitions_;
        auto l = leases_of(r).front();
        l.actor_host = r[0][4].as<std::string>();
        l.actor_port = r[0][5].as<int>();
        l.live = r[0][6].as<bool>();
        book_.learn(l);
        return l;
      },
      std::move(done));
}

std::vector<node_info> membership::nodes() const {
  std::lock_guard lock(mutex_);
  return nodes_;
}

std::optional<node_info> membership::node(const std::string& id) const {
  std::lock_guard lock(mutex_);
  for (auto& n : nodes_)
    if (n.id == id) return n;
  return std::nullopt;
}

} // namespace crm::cluster
