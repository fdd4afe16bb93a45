// Where a tenant's requests run in a cluster (docs/cluster.md): on the node that holds the
// tenant's lease. Any node accepts any request; one for a tenant held elsewhere is forwarded to
// the owner through CAF's network layer (actors/cluster.hpp) and the owner's answer returned.
// A tenant nobody holds (or whose owner is dead) is first placed (http/placement.cpp). While a
// tenant moves, or its dead owner is not yet declared dead, its requests are held and retried for
// a while (about dead-after) before a 503 goes out.
#pragma once
#include "domain/tenant_demand.hpp"
#include "http/exchange.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace crm::actors {
class runtime;
}
namespace crm::cluster {
class membership;
struct node_info;
} // namespace crm::cluster

namespace crm::http {

struct services;

// For a route whose tenant is known only inside its handler (token refresh, the webhooks of
// channels and workflows): runs `here` on the node that holds `tenant` (at once, or from a
// database thread after acquiring it, under the audit context of the caller), or forwards the
// request to that node, where the handler runs again from the start. Call it before any side
// effect. Without a cluster: `here` at once.
void within_tenant(services& s, const exchange_ptr& ex, std::int64_t tenant,
                   std::function<void()> here);

class tenant_placement {
public:
  tenant_placement(cluster::membership& members, actors::runtime& rt);

  // Runs the request of `tenant` here when this node holds the lease: `here` at once on the
  // calling thread, or `here_later` (from a database thread) after acquiring it. Otherwise
  // forwards it to the owner and answers `ex` with the owner's answer. A request that was
  // `forwarded` here is never forwarded again: when this node is not the owner it is answered
  // 503 with X-Carecrm-Not-Owner, and the node that forwarded it asks Postgres again.
  void route(const exchange_ptr& ex, std::int64_t tenant, bool forwarded,
             const std::function<void()>& here, std::function<void()> here_later);

  // Whether this node's membership is current (a heartbeat recent enough to claim leases).
  bool fresh() const;

  // Balance (docs/cluster.md "Balance"): notes where the requests of the tenants held here come
  // from and, every `window`, hands a few whose requests come mostly through one other node to
  // that node (domain/tenant_demand.hpp). Call once the gateway is published.
  void start_rebalancing(std::chrono::milliseconds window);

  // Prometheus lines of the placement and forwarding counters.
  void write_metrics(std::string& out) const;
  // {"node":..., "nodes":[...], "leases":[{"tenant_id":N,"epoch":N}]} for /actors.
  std::string cluster_json() const;
  // Asks that `tenant` move to node `to` (cluster::membership::move_tenant): `done` gets the
  // answer's body ({"tenant_id", "to", "owner", "epoch"}) or the failure.
  void move(std::int64_t tenant, std::string to,
            std::function<void(domain::outcome<std::string>)> done);

private:
  using clock = std::chrono::steady_clock;
  void acquire_then(const exchange_ptr& ex, std::int64_t tenant, bool forwarded,
                    clock::time_point until, std::function<void()> here_later);
  void forward(const exchange_ptr& ex, std::int64_t tenant, const cluster::node_info& to,
               clock::time_point until, std::function<void()> here_later);
  void hold(const exchange_ptr& ex, std::int64_t tenant, clock::time_point until,
            std::function<void()> here_later, const domain::failure& why);
  std::chrono::milliseconds hold_limit() const;

  void rebalance_tick();

  cluster::membership& members_;
  actors::runtime& rt_;
  std::atomic<std::uint64_t> not_owner_{0};
  std::atomic<std::uint64_t> held_{0};
  std::atomic<bool> rebalancing_{false};
  std::chrono::milliseconds window_{5000};
  domain::demand_tracker demand_;
  domain::demand_rules rules_;
  std::atomic<std::uint64_t> rebalanced_{0};
};

} // namespace crm::http
