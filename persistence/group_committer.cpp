#include "persistence/group_committer.hpp"

#include "persistence/pg_pool.hpp"

#include <pqxx/pqxx>

namespace crm::persistence {
namespace {

bool rolled_back(const std::exception& e) {
  if (dynamic_cast<const pqxx::statement_completion_unknown*>(&e)) return false;
  return dynamic_cast<const pqxx::sql_error*>(&e) ||
         dynamic_cast<const pqxx::transaction_rollback*>(&e);
}

} // namespace

group_committer::group_committer(pg_pool& pool, int max_in_flight,
                                 std::atomic<std::uint64_t>* transactions)
    : pool_(pool), max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight),
      transactions_(transactions) {}

void group_committer::submit(std::shared_ptr<const contact_batch> batch, done_fn done) {
  std::lock_guard lock(mutex_);
  waiting_.push_back({std::move(batch), std::move(done)});
  if (in_flight_ < max_in_flight_) start_locked();
}

void group_committer::start_locked() {
  ++in_flight_;
  pool_.submit([self = shared_from_this(), items = std::move(waiting_)](pg_conn& c) mutable {
    self->commit(c, items);
    std::lock_guard lock(self->mutex_);
    --self->in_flight_;
    if (!self->waiting_.empty()) self->start_locked();
  });
  waiting_.clear();
}

void group_committer::commit(pg_conn& c, std::vector<item>& items) {
  auto committed = [this] {
    if (transactions_) transactions_->fetch_add(1, std::memory_order_relaxed);
  };
  auto fail = [&c](item& it, const char* what) {
    c.reset();
    it.done(pg_pool::unavailable(what));
  };
  std::vector<const contact_batch*> batches;
  batches.reserve(items.size());
  for (auto& it : items) batches.push_back(it.batch.get());
  try {
    commit_batches(c, batches.data(), batches.size());
    committed();
    for (auto& it : items) it.done(domain::done{});
    return;
  } catch (const std::exception& e) {
    // Only a transaction known to be rolled back is retried, batch by batch, to find the
    // faulty one. A lost connection or an unknown outcome fails them all: a retry could write
    // twice.
    if (items.size() == 1 || !rolled_back(e)) {
      for (auto& it : items) fail(it, e.what());
      return;
    }
    c.reset();
  }
  for (auto& it : items) {
    try {
      commit_batch(c, *it.batch);
      committed();
      it.done(domain::done{});
    } catch (const std::exception& e) {
      fail(it, e.what());
    }
  }
}

} // namespace crm::persistence
