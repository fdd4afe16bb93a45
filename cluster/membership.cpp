#include "cluster/membership.hpp"

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
      "  FROM cluster_nodes n WHERE n.state = 'live'"
      "   AND n.heartbeat_at >= now() - make_interval(secs => $1) AND n.node_id <> $2"
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
                      lost_fn on_lost) {
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
        "   heartbeat_at = now()",
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
  book_.fresh_until(started + duration_cast<lease_book::clock::duration>(
                                  duration<double>(opts_.dead_after - opts_.heartbeat_interval)));
  persistence::log_info("cluster: node {} joined (incarnation {}, {} leases held)", opts_.node_id,
                        incarnation_, book_.held_count());
  thread_ = std::thread([this] { loop(); });
}

void membership::loop() {
  std::unique_lock lock(mutex_);
  auto interval =
      duration_cast<std::chrono::milliseconds>(duration<double>(opts_.heartbeat_interval));
  while (!stopping_) {
    cv_.wait_for(lock, interval);
    if (stopping_) break;
    lock.unlock();
    if (!run_guarded("the cluster heartbeat", [&] { beat(*conn_); })) {
      ++heartbeat_failures_;
      conn_->reset();
    }
    lock.lock();
  }
}

void membership::beat(persistence::pg_conn& c) {
  auto started = lease_book::clock::now();
  pqxx::work tx(c.raw());
  auto me = tx.exec_params("UPDATE cluster_nodes SET heartbeat_at = now(), state = 'live'"
                           " WHERE node_id = $1 AND incarnation = $2 RETURNING node_id",
                           opts_.node_id, incarnation_);
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
  auto dead = tx.exec_params("UPDATE cluster_nodes SET state = 'dead'"
                             " WHERE state = 'live'"
                             "   AND heartbeat_at < now() - make_interval(secs => $1)"
                             " RETURNING node_id",
                             opts_.dead_after);
  for (const auto& row : dead)
    persistence::log_warn("cluster: node {} declared dead (no heartbeat for {} s)", row[0].c_str(),
                          opts_.dead_after);
  declared_dead_ += dead.size();
  taken_over_ += static_cast<std::uint64_t>(hand_over(tx, opts_.dead_after, nullptr));
  auto mark = book_.mark();
  auto mine = tx.exec_params(
      "SELECT tenant_id, node_id, epoch FROM tenant_leases WHERE node_id = $1", opts_.node_id);
  auto members =
      tx.exec_params("SELECT n.node_id, n.http_address, n.actor_host, n.actor_port, n.state,"
                     "       extract(epoch FROM now() - n.heartbeat_at)::float8,"
                     "       (SELECT count(*) FROM tenant_leases l WHERE l.node_id = n.node_id)"
                     "  FROM cluster_nodes n ORDER BY n.node_id");
  tx.commit();
  auto lost = book_.reconcile(leases_of(mine), mark);
  book_.fresh_until(started + duration_cast<lease_book::clock::duration>(
                                  duration<double>(opts_.dead_after - opts_.heartbeat_interval)));
  std::vector<node_info> nodes;
  for (const auto& row : members)
    nodes.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
                     row[3].as<int>(), row[4].as<std::string>(), row[5].as<double>(),
                     row[6].as<std::int64_t>()});
  {
    std::lock_guard lock(mutex_);
    nodes_ = std::move(nodes);
  }
  ++heartbeats_;
  if (!lost.empty()) {
    lost_ += lost.size();
    persistence::log_warn("cluster: node {} lost the leases of {} tenants", opts_.node_id,
                          lost.size());
    if (on_lost_) on_lost_(lost);
  }
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

void membership::acquire(std::int64_t tenant, std::function<void(owner_outcome)> done) {
  pool_.run<lease>(
      [this, tenant](persistence::pg_conn& c) {
        pqxx::work tx(c.raw());
        // The least-loaded live node takes a tenant nobody holds, or one whose owner is not
        // live (this node first on a tie: no forward for the request that asked).
        auto r = tx.exec_params(
            "WITH live AS ("
            "  SELECT n.node_id,"
            "         (SELECT count(*) FROM tenant_leases l WHERE l.node_id = n.node_id) AS load"
            "    FROM cluster_nodes n WHERE n.state = 'live'"
            "     AND n.heartbeat_at >= now() - make_interval(secs => $3))"
            " INSERT INTO tenant_leases (tenant_id, node_id, epoch)"
            " SELECT $1, node_id, 1 FROM live ORDER BY load, node_id <> $2, node_id LIMIT 1"
            " ON CONFLICT (tenant_id) DO UPDATE SET node_id = EXCLUDED.node_id,"
            "   epoch = tenant_leases.epoch + 1, moving_to = NULL, acquired_at = now()"
            "  WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes n"
            "                     WHERE n.node_id = tenant_leases.node_id AND n.state = 'live'"
            "                       AND n.heartbeat_at >= now() - make_interval(secs => $3))"
            " RETURNING tenant_id, node_id, epoch",
            tenant, opts_.node_id, opts_.dead_after);
        if (r.empty())
          r = tx.exec_params(
              "SELECT tenant_id, node_id, epoch FROM tenant_leases WHERE tenant_id = $1", tenant);
        tx.commit();
        if (r.empty()) throw persistence::not_leased(tenant); // no live node can take it: a 503
        ++acquisitions_;
        auto l = leases_of(r).front();
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
