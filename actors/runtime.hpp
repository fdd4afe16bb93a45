// The actor runtime: the CAF actor system, the tenant registry (tenant id → supervisor, spawned
// lazily, passivated when idle) and what every tenant's actors share. Callers outside actors/
// see only this header and the per-area API headers (users.hpp, ...), never CAF.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace crm::persistence {
class audit_writer;
class pg_pool;
} // namespace crm::persistence

namespace crm::cluster {
class membership;
}

namespace crm::actors {

// Mutual TLS between a cluster's nodes (CAF's OpenSSL module): PEM files, read again for each
// new connection (a certificate replaced by a rename is used from the next one).
struct cluster_tls {
  std::string certificate; // this node's certificate (and chain)
  std::string key;         // its private key
  std::string ca;          // the CA that signs every node's certificate
};

struct runtime_options {
  int threads = 0;                  // scheduler threads; 0: one per core
  double tenant_idle_timeout = 300; // seconds without a message before a tenant passivates
  // Where actors record the reads they disclose themselves (sensitive values); none: such
  // reads are refused.
  persistence::audit_writer* audit = nullptr;
  // In a cluster (docs/cluster.md): the membership whose lease book says which tenants this
  // node may run. A tenant it holds no lease of is acquired first (it may be placed on another
  // node: the messages for it then answer 503). None: every tenant runs here.
  cluster::membership* cluster = nullptr;
  // Group-commit transactions at once. One slot merges more batches into each transaction; the
  // second keeps one slow batch (a lock wait, a large import) from stalling every other
  // tenant's commits. Nodes sharing one machine's cores may take one each (docs/cluster.md).
  int commits_in_flight = 2;
  // With `cluster`: how nodes authenticate each other (all three files required).
  cluster_tls tls;
};

class runtime {
public:
  runtime(runtime_options opts, persistence::pg_pool& pool);
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  // Stops every tenant (each finishes what is in its mailbox) and waits for the actors.
  void shutdown();

  // {"tenants":[{"tenant_id":N,"mailbox":N,"children":[{"name":"users","mailbox":0,
  // "messages":N,"busy_ms":N,"restarts":N,"busy_times":[N,...]}]}],"tenants_live":N,
  // "busy_bounds_us":[10,...]} (busy_times: the messages that took less than each bound, and
  // more than the last): every live tenant, or (with
  // `limit`) the `limit` busiest (the deepest mailboxes, then the most messages handled) whose
  // id contains `search`.
  std::string actors_json(std::string_view search = {}, std::size_t limit = 0) const;
  std::size_t live_tenants() const;
  bool is_live(std::int64_t tenant) const;
  // Tenants passivated on this node since it started (idle, evicted, moved away).
  std::uint64_t passivations() const;

  // In a cluster: stops the tenants whose leases this node lost, at once (each finishes what
  // is in its mailbox; its writes are refused by the fence).
  void evict(const std::vector<std::int64_t>& tenants);
  // Runs `then` once `tenant` has no live actors here (at once when it has none now; else
  // when its supervisor leaves the registry, every write of its committed or refused).
  void when_stopped(std::int64_t tenant, std::function<void()> then);

  // Operator action: fails child `child` ("users", "contacts") of a live tenant as a crash
  // would, so its supervisor restarts it from Postgres on next use. False if the tenant is not
  // live or the child name is unknown.
  bool fail_child(std::int64_t tenant, std::string_view child);

  struct impl;
  impl& internals() { return *impl_; }

private:
  std::unique_ptr<impl> impl_;
};

} // namespace crm::actors
