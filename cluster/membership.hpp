// Membership and tenant placement of a carecrm cluster (docs/cluster.md), all through Postgres:
// the node's row in cluster_nodes and its heartbeat, the declaration of dead nodes and the
// hand-over of their tenants, and the acquisition of a tenant's lease. A thread beats the
// heartbeat; everything else runs on the database pool, never on an asio or actor thread.
#pragma once
#include "cluster/lease_book.hpp"
#include "domain/failure.hpp"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace crm::persistence {
class pg_conn;
class pg_pool;
} // namespace crm::persistence

namespace crm::cluster {

struct options {
  std::string node_id;      // empty: no cluster
  std::string http_address; // host:port clients and operators reach this node's API at
  std::string actor_host;   // where other nodes reach this node's actors (CAF middleman)
  int actor_port = 0;
  double heartbeat_interval = 1; // seconds
  double dead_after = 5;         // seconds without a heartbeat before a node is declared dead
};

struct node_info {
  std::string id;
  std::string http_address;
  std::string actor_host;
  int actor_port = 0;
  std::string state;        // live | dead | left
  double heartbeat_age = 0; // seconds, by Postgres's clock
  std::int64_t tenants = 0; // leases held
  bool stopping = false;    // in its shutdown grace: serves its tenants, is given no more
};

// What `acquire` found: the owner now, or why there is none (no live node).
using owner_outcome = domain::outcome<lease>;

class membership {
public:
  // Told (on the heartbeat thread) of tenants whose leases this node lost: stop them at once.
  using lost_fn = std::function<void(const std::vector<std::int64_t>&)>;
  // Told (on the heartbeat thread) of a tenant an operator moves away from this node (`carecrm
  // cluster move`): its lease is already gone from the book (and `lost_fn` told to stop it);
  // call `finish_move` once its actors have stopped.
  struct move {
    std::int64_t tenant = 0;
    std::int64_t epoch = 0;
    std::string to;
  };
  using moving_fn = std::function<void(const move&)>;

  membership(options o, persistence::pg_pool& pool);
  ~membership();
  membership(const membership&) = delete;
  membership& operator=(const membership&) = delete;

  const options& opts() const { return opts_; }
  lease_book& book() { return book_; }
  const lease_book& book() const { return book_; }

  // Joins, reachable at `http_address` (host:port of the API) and `actor_host`:`actor_port`
  // (this node's gateway): writes this node's row (a new incarnation) and takes its own leases
  // again at new epochs, so nothing a previous incarnation left queued can commit. Throws when
  // Postgres refuses. Then starts the heartbeat thread.
  void join(std::string http_address, std::string actor_host, int actor_port, lost_fn on_lost,
            moving_fn on_moving);
  // Hands a tenant being moved to its new owner at a new epoch (after its actors stopped here).
  void finish_move(const move& m);
  // Told (on the heartbeat thread, set before join) of a member that stopped being live (dead,
  // left, or silent past dead-after): requests forwarded to it are answered at once.
  void on_node_down(std::function<void(const node_info&)> f) { on_node_down_ = std::move(f); }
  // The shutdown grace begins: this node keeps serving its tenants but is given no more (no
  // placement, hand-over, move or balance to it; `cluster status` says `stopping`). Returns once
  // a heartbeat has written it, or after a second.
  void begin_stopping();
  bool is_stopping() const { return draining_.load(); }
  // Leaves: stops the heartbeat, hands this node's leases to the live nodes (least loaded
  // first) and marks it `left`. Call once its tenants are stopped.
  void leave();

  // An operator's move from the console (POST /tenants/{id}/move): request_move on a pool
  // thread. `done` gets the lease as it stands after the request (its owner hands it over on
  // its next heartbeat), or 422 when `to` is not a live member, 404 for no such tenant.
  void move_tenant(std::int64_t tenant, std::string to,
                   std::function<void(domain::outcome<lease>)> done);

  // The owner of `tenant`, placing it on the least-loaded live node (this one on a tie) when
  // it has none or its owner is not live. `done` runs on a pool thread, or at once with a 503
  // when the pool is full.
  void acquire(std::int64_t tenant, std::function<void(owner_outcome)> done);

  // The members as last read (every heartbeat).
  std::vector<node_info> nodes() const;
  std::optional<node_info> node(const std::string& id) const;

  // Counters for /metrics.
  std::uint64_t heartbeats() const { return heartbeats_.load(); }
  std::uint64_t heartbeat_failures() const { return heartbeat_failures_.load(); }
  std::uint64_t nodes_declared_dead() const { return declared_dead_.load(); }
  std::uint64_t leases_taken_over() const { return taken_over_.load(); }
  std::uint64_t leases_lost() const { return lost_.load(); }
  std::uint64_t acquisitions() const { return acquisitions_.load(); }

private:
  void beat(persistence::pg_conn& c);
  void loop();

  options opts_;
  persistence::pg_pool& pool_;
  lease_book book_;
  std::int64_t incarnation_ = 0;
  lost_fn on_lost_;
  moving_fn on_moving_;
  std::function<void(const node_info&)> on_node_down_;
  std::vector<std::int64_t> moving_; // moves being finished (under mutex_)

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<node_info> nodes_;
  std::thread thread_;
  std::unique_ptr<persistence::pg_conn> conn_; // the heartbeat's own connection
  // Since when this node's heartbeats have succeeded without a gap (join, or the first beat
  // after a failed or late one). It declares others dead only after dead-after of this: after
  // an outage of Postgres every node's heartbeat is old, and the first to recover must not take
  // every tenant from the others, which recover within the same window.
  std::chrono::steady_clock::time_point steady_since_{};
  std::chrono::steady_clock::time_point last_beat_{};
  std::set<std::int64_t> held_; // the tenants whose leases the last heartbeat found here
  std::atomic<bool> judging_{false};
  std::atomic<bool> draining_{false}; // begin_stopping was called

  std::atomic<std::uint64_t> heartbeats_{0}, heartbeat_failures_{0}, declared_dead_{0},
      taken_over_{0}, lost_{0}, acquisitions_{0};
};

// Operator side of `carecrm cluster move --tenant N --to NODE`: asks the owner to hand the
// tenant over (it stops the tenant's actors, then gives the lease at a new epoch), or places it
// on `to` directly when nobody holds it or its owner is not live. Throws std::runtime_error
// when `to` is not a live member. Returns the lease as it stands after the request.
lease request_move(persistence::pg_conn& c, std::int64_t tenant, const std::string& to,
                   double dead_after);
// The lease of `tenant` now, if it has one.
std::optional<lease> lease_now(persistence::pg_conn& c, std::int64_t tenant);
// `carecrm cluster status`: the members and their leases, as JSON.
std::string cluster_status_json(persistence::pg_conn& c, double dead_after);

// Whether a node id is acceptable ([A-Za-z0-9_.-], 1 to 64 characters).
bool valid_node_id(const std::string& id);

} // namespace crm::cluster
