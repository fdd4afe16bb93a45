#include "persistence/group_committer.hpp"

#include <chrono>

#include "persistence/audit_repo.hpp"
#include "persistence/fence.hpp"
#include "persistence/log.hpp"
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

std::string sql_text::quote(std::string_view s) const {
  return tx_.quote(std::string(s));
}

void sql_text::need_prepared(const char* name, const char* prepare_statement) {
  if (conn_.has_prepared(name)) return;
  for (auto p : preparing_)
    if (std::string_view(p) == name) return;
  preparing_.push_back(name);
  prelude_ += prepare_statement;
}

std::string sql_text::transaction() const {
  std::string s;
  s.reserve(prelude_.size() + body_.size() + 16);
  s += prelude_;
  s += "BEGIN;\n";
  s += body_;
  s += "COMMIT;";
  return s;
}

void sql_text::committed() {
  for (auto p : preparing_) conn_.add_prepared(p);
  preparing_.clear();
}

void commit_batches(pg_conn& c, const tx_batch* const* batches, std::size_t n,
                    std::vector<refused_batch>& refused) {
  // BEGIN, every batch and COMMIT in one simple query: a single round trip, one fsync. A failed
  // statement skips the rest, COMMIT included; the connection, left inside the failed
  // transaction, is dropped. Prepared statements live in the session, so the pool needs
  // session-level connections (docs/design.md).
  try {
    pqxx::nontransaction tx(c.raw());
    sql_text text(tx, c);
    for (std::size_t i = 0; i < n; ++i) {
      auto mark = text.position();
      try {
        text.body() += fence_sql(batches[i]->tenant());
        batches[i]->append_sql(text);
        append_audit_sql(text, batches[i]->audit);
      } catch (const not_leased& e) {
        text.rewind(mark);
        refused.push_back({i, pg_pool::failure_of(e)});
      } catch (const std::exception& e) {
        log_error("a batch of tenant {} could not be written: {}", batches[i]->tenant(), e.what());
        text.rewind(mark);
        refused.push_back(
            {i, domain::failure::of(domain::errc::internal, "the change could not be stored")});
      }
    }
    if (text.empty()) return;
    tx.exec(text.transaction());
    text.committed();
  } catch (...) {
    c.reset();
    throw;
  }
}

group_committer::group_committer(pg_pool& pool, int max_in_flight,
                                 std::atomic<std::uint64_t>* transactions,
                                 domain::latency_histogram* latency)
    : pool_(pool), max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight),
      transactions_(transactions), latency_(latency) {}

void group_committer::submit(std::shared_ptr<const tx_batch> batch, done_fn done) {
  key k{batch->tenant(), std::type_index(typeid(*batch))};
  auto answer = [self = shared_from_this(), k,
                 done = std::move(done)](domain::outcome<domain::done> r) {
    done(std::move(r));
    self->settled(k);
  };
  std::lock_guard lock(mutex_);
  ++unsettled_[k];
  waiting_.push_back({std::move(batch), std::move(answer)});
  if (in_flight_ < max_in_flight_) start_locked();
}

void group_committer::when_settled(std::int64_t tenant, std::type_index kind,
                                   std::function<void()> then) {
  key k{tenant, kind};
  {
    std::lock_guard lock(mutex_);
    if (unsettled_.count(k)) {
      settle_waiters_.emplace(k, std::move(then));
      return;
    }
  }
  then();
}

void group_committer::settled(const key& k) {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard lock(mutex_);
    auto it = unsettled_.find(k);
    if (it == unsettled_.end() || --it->second > 0) return;
    unsettled_.erase(it);
    auto [from, to] = settle_waiters_.equal_range(k);
    for (auto w = from; w != to; ++w) ready.push_back(std::move(w->second));
    settle_waiters_.erase(from, to);
  }
  for (auto& f : ready) f();
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
  auto started = std::chrono::steady_clock::now();
  auto committed = [this, &started] {
    if (transactions_) transactions_->fetch_add(1, std::memory_order_relaxed);
    auto now = std::chrono::steady_clock::now();
    if (latency_) latency_->observe(now - started);
    started = now;
  };
  auto fail = [&c](item& it, const std::exception& e) {
    c.reset();
    it.done(pg_pool::failure_of(e));
  };
  std::vector<const tx_batch*> batches;
  batches.reserve(items.size());
  for (auto& it : items) batches.push_back(it.batch.get());
  // A batch its connection cannot write is the fault of that request alone (its input got past
  // validation): it gets a 500 at once, and the others go on without it. A batch of a tenant
  // whose lease this node lost gets a 503.
  std::vector<refused_batch> refused;
  std::vector<bool> answered(items.size(), false);
  auto answer_refused = [&] {
    for (auto& r : refused) {
      if (answered[r.index]) continue;
      answered[r.index] = true;
      items[r.index].done(r.why);
    }
  };
  try {
    commit_batches(c, batches.data(), batches.size(), refused);
    answer_refused();
    committed();
    for (std::size_t i = 0; i < items.size(); ++i)
      if (!answered[i]) items[i].done(domain::done{});
    return;
  } catch (const std::exception& e) {
    answer_refused();
    // Only a transaction known to be rolled back is retried, batch by batch, to find the
    // faulty one. A lost connection or an unknown outcome fails them all: a retry could write
    // twice.
    if (items.size() - refused.size() <= 1 || !rolled_back(e)) {
      for (std::size_t i = 0; i < items.size(); ++i)
        if (!answered[i]) fail(items[i], e);
      return;
    }
    c.reset();
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (answered[i]) continue;
    try {
      refused.clear();
      commit_batches(c, &batches[i], 1, refused);
      if (refused.empty()) {
        committed();
        items[i].done(domain::done{});
      } else {
        items[i].done(refused.front().why);
      }
    } catch (const std::exception& e) {
      fail(items[i], e);
    }
  }
}

} // namespace crm::persistence
