// This node's view of tenant ownership in a cluster (docs/cluster.md): the leases it holds (with
// their epochs, which fence its writes) and the owners it last saw for other tenants. Postgres's
// tenant_leases is the truth; the book is refreshed from it on every heartbeat and whenever a
// lease is acquired, and a write under a lease the book no longer matches is refused by the
// fence in its transaction.
//
// The book also fences itself: a node that has not beaten its heartbeat for `stale_after` (it
// was paused, or cut off from Postgres) may have been declared dead and its tenants taken, so it
// claims no lease until a heartbeat succeeds again and the leases are re-read.
#pragma once
#include "persistence/fence.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace crm::cluster {

struct lease {
  lease() = default;
  lease(std::int64_t t, std::string n, std::int64_t e) : tenant(t), node(std::move(n)), epoch(e) {}
  std::int64_t tenant = 0;
  std::string node;
  std::int64_t epoch = 0;
  // The owner's gateway and whether it is live (crm_node_live), as membership::acquire read
  // them.
  std::string actor_host;
  int actor_port = 0;
  bool live = true;
};

class lease_book final : public persistence::lease_source {
public:
  using clock = std::chrono::steady_clock;

  explicit lease_book(std::string node_id);

  const std::string& node_id() const { return node_; }

  // persistence::lease_source: the epoch this node may write `tenant` under now.
  std::optional<persistence::held_lease> lease_of(std::int64_t tenant) const override;
  bool holds(std::int64_t tenant) const { return lease_of(tenant).has_value(); }

  // Ownership as Postgres answered it for one tenant (an acquisition or a look-up).
  void learn(const lease& l);
  // The owner last seen for a tenant this node does not hold; empty when unknown.
  std::optional<std::string> owner_elsewhere(std::int64_t tenant) const;
  // Forget what was seen of a tenant held elsewhere (its owner said it no longer is).
  void forget(std::int64_t tenant);

  // A mark to take before reading this node's leases from Postgres: reconcile leaves alone
  // what was learned after it (an acquisition that raced the read).
  std::uint64_t mark() const;
  // After a heartbeat: every lease this node holds, as Postgres had them when read (after
  // `since` was taken). Returns the tenants the node held (or held at another epoch) and does
  // not any more: their actors must stop at once.
  std::vector<std::int64_t> reconcile(const std::vector<lease>& mine, std::uint64_t since);
  // A tenant whose lease was lost is not held again (at a newer epoch, from a later heartbeat or
  // an acquisition) until its old actors have stopped, which `stopped` says. Until then those
  // actors, still finishing their mailboxes, would otherwise write under the new epoch from
  // state they read before the loss, over what another owner wrote meanwhile.
  void stopped(std::int64_t tenant);
  bool stopping(std::int64_t tenant) const;
  // Drops a held lease (given up, moved away); true if it was held.
  bool release(std::int64_t tenant);
  std::vector<lease> held() const;
  std::size_t held_count() const;

  // Heartbeats: leases count only until `until`.
  void fresh_until(clock::time_point until);
  bool fresh() const;

private:
  std::string node_;
  mutable std::shared_mutex mutex_;
  struct held_entry {
    std::int64_t epoch;
    std::uint64_t learned; // the mark when it was learned
  };
  std::unordered_map<std::int64_t, held_entry> held_;
  std::unordered_map<std::int64_t, std::string> elsewhere_; // tenant -> node
  std::unordered_set<std::int64_t> stopping_;               // lost, old actors not yet stopped
  std::uint64_t marks_ = 0;
  std::atomic<clock::rep> fresh_until_{0};
};

} // namespace crm::cluster
