// Fencing of a tenant's writes by its lease (docs/cluster.md). In a cluster, each write
// transaction of a tenant's actors calls `fence` first: it runs crm_fence (migration 014) with
// the lease this node holds, in the same transaction, so a node that lost the lease (paused,
// partitioned, moved away from) can never commit for the tenant again. Without a cluster no
// lease source is installed and `fence` does nothing.
#pragma once
#include "domain/failure.hpp"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace pqxx {
class transaction_base;
}

namespace crm::persistence {

// The SQLSTATE crm_fence raises (class 55, "object not in prerequisite state": a 503).
inline constexpr const char* fenced_sqlstate = "55F01";

struct held_lease {
  const std::string* node = nullptr; // lives as long as the source
  std::int64_t epoch = 0;
};

// What this node holds: the cluster's lease book (cluster/lease_book.hpp).
class lease_source {
public:
  virtual ~lease_source() = default;
  // The lease of `tenant` this node may write under now; nothing when it does not hold one (or
  // its membership is stale: no heartbeat for too long).
  virtual std::optional<held_lease> lease_of(std::int64_t tenant) const = 0;
};

// Installed once by `serve` in a cluster, before any write (null: no fencing).
void install_lease_source(const lease_source* s);
bool fencing();

// What a request of a tenant that is changing owner is answered (503; the retry reaches the new
// owner): a write refused by the fence, or a request held for longer than it may wait.
domain::failure tenant_moving();

// Thrown when this node does not hold the tenant's lease: nothing was sent to Postgres.
struct not_leased : std::runtime_error {
  explicit not_leased(std::int64_t tenant);
};

// In a write transaction of `tenant`: refuses (throws) unless this node holds its lease.
void fence(pqxx::transaction_base& tx, std::int64_t tenant);
// The same check as a statement, for the group committer's one-text transactions; empty
// without fencing. Throws not_leased as `fence` does.
std::string fence_sql(std::int64_t tenant);

} // namespace crm::persistence
