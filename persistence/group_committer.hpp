// Group commit across tenants and aggregates. Each record actor (contacts, deals) already
// gathers the writes that arrive while its previous batch commits; this merges the batches of
// many tenants and aggregates into one transaction, so ten busy tenants pay for one COMMIT (and
// one fsync) instead of ten. At most `max_in_flight`
// transactions run at once; a batch submitted meanwhile waits and rides in the next one, with
// every other batch waiting by then.
//
// A tenant's actor has at most one batch in flight (it sees to that), so merging never reorders
// one tenant's writes. When a merged transaction fails on an SQL error, each of its batches is
// committed again alone, so one tenant's fault fails only that tenant's writes. A lost
// connection (the outcome of COMMIT unknown) fails them all without a retry.
#pragma once
#include "domain/failure.hpp"
#include "domain/latency.hpp"
#include "persistence/tx_batch.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <typeindex>
#include <vector>

namespace crm::persistence {

class pg_pool;

// Create with std::make_shared: a transaction in flight keeps its committer alive.
class group_committer : public std::enable_shared_from_this<group_committer> {
public:
  // Runs on a pool thread: it must only hand the outcome on (send a message).
  using done_fn = std::function<void(domain::outcome<domain::done>)>;

  // `transactions` (optional) counts the transactions that committed, `latency` (optional)
  // times them (from the statement's start to its COMMIT).
  group_committer(pg_pool& pool, int max_in_flight,
                  std::atomic<std::uint64_t>* transactions = nullptr,
                  domain::latency_histogram* latency = nullptr);
  group_committer(const group_committer&) = delete;
  group_committer& operator=(const group_committer&) = delete;

  void submit(std::shared_ptr<const tx_batch> batch, done_fn done);

  // Runs `then` once no batch of `tenant` of the same type as `kind` is waiting or committing
  // (at once when none is; else on a pool thread, after the last one's outcome was handed on).
  // A record actor restarted while its predecessor's batch was still queued loads only after
  // that batch settled, so the state it loads includes the batch when it committed.
  void when_settled(std::int64_t tenant, std::type_index kind, std::function<void()> then);

private:
  struct item {
    std::shared_ptr<const tx_batch> batch;
    done_fn done;
  };
  using key = std::pair<std::int64_t, std::type_index>;
  void settled(const key& k); // one batch of `k` was answered
  void start_locked();        // with mutex_ held: sends every waiting batch off in one transaction
  void commit(pg_conn& c, std::vector<item>& items);

  pg_pool& pool_;
  int max_in_flight_;
  std::atomic<std::uint64_t>* transactions_;
  domain::latency_histogram* latency_;
  std::mutex mutex_;
  int in_flight_ = 0;
  std::vector<item> waiting_;
  std::map<key, int> unsettled_; // batches not yet answered
  std::multimap<key, std::function<void()>> settle_waiters_;
};

} // namespace crm::persistence
