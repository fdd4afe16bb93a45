#include "persistence/pg_pool.hpp"

#include "persistence/fence.hpp"
#include "persistence/log.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <stdexcept>

namespace crm::persistence {

pg_conn::pg_conn(std::string url, const domain::secret_keys* keys)
    : url_(std::move(url)), keys_(keys) {
  // Never wait forever for an unreachable server: a request waits for this thread.
  if (url_.find("connect_timeout") == std::string::npos)
    url_ += (url_.find('?') == std::string::npos ? "?" : "&") + std::string("connect_timeout=3");
}

void pg_ping(pg_conn& c) {
  pqxx::nontransaction tx(c.raw());
  tx.exec("SELECT 1");
}
pg_conn::~pg_conn() = default;

pqxx_connection& pg_conn::raw() {
  if (conn_ && !conn_->is_open()) reset();
  if (!conn_) conn_ = std::make_unique<pqxx::connection>(url_);
  return *conn_;
}

void pg_conn::reset() {
  conn_.reset();
  prepared_.clear();
}

bool pg_conn::has_prepared(std::string_view name) const {
  return std::find(prepared_.begin(), prepared_.end(), name) != prepared_.end();
}

void pg_conn::add_prepared(std::string name) {
  prepared_.push_back(std::move(name));
}

void pg_conn::prepare_once(const prepared_statement& s) {
  if (has_prepared(s.name)) return;
  raw().prepare(s.name, s.sql);
  add_prepared(s.name);
}

const domain::secret_keys& pg_conn::keys() const {
  if (!keys_) throw std::logic_error("no secret keys were given to this connection");
  return *keys_;
}

pg_pool::pg_pool(std::string url, int size, std::size_t queue_limit,
                 const domain::secret_keys* keys)
    : url_(std::move(url)), keys_(keys), queue_limit_(queue_limit) {
  if (size < 1) size = 1;
  for (int i = 0; i < size; ++i)
    threads_.emplace_back([this, i] {
      name_this_thread("crm.pg");
      loop(i);
    });
}

pg_pool::pg_pool(run_inline_t, std::string url, const domain::secret_keys* keys)
    : url_(std::move(url)), keys_(keys), inline_conn_(std::make_unique<pg_conn>(url_, keys)) {}

const domain::secret_keys& pg_pool::keys() const {
  if (!keys_) throw std::logic_error("no secret keys were given to this pool");
  return *keys_;
}

pg_pool::~pg_pool() {
  stop();
}

void pg_pool::submit(job j) {
  if (inline_conn_) {
    if (!run_guarded("a postgres job", [&] { j(*inline_conn_); })) inline_conn_->reset();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(j));
  }
  cv_.notify_one();
}

bool pg_pool::try_submit(job j) {
  if (inline_conn_) {
    submit(std::move(j));
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_limit_ > 0 && queue_.size() >= queue_limit_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    queue_.push_back(std::move(j));
  }
  cv_.notify_one();
  return true;
}

std::size_t pg_pool::queue_depth() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void pg_pool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

domain::failure pg_pool::unavailable(const char* what) {
  log_warn("postgres: {}", what);
  return domain::failure::of(domain::errc::service_unavailable, "the database is unavailable");
}

domain::failure pg_pool::failure_of(const std::exception& e) {
  // A write of a tenant whose lease this node no longer holds (docs/cluster.md): refused here
  // or by crm_fence in the transaction. The client's retry reaches the new owner.
  if (dynamic_cast<const not_leased*>(&e)) return tenant_moving();
  if (dynamic_cast<const pqxx::broken_connection*>(&e) ||
      dynamic_cast<const pqxx::in_doubt_error*>(&e) ||
      dynamic_cast<const pqxx::transaction_rollback*>(&e))
    return unavailable(e.what());
  if (auto sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    // SQLSTATE classes: 08 connection, 23 integrity (a row written behind the actor's back:
    // its state is reloaded, and the retry gets the right answer), 40 rollback, 53 resources,
    // 55 object state (lock not available), 57 operator intervention (shutdown, cancel), 58
    // system error.
    const std::string& state = sql->sqlstate();
    if (state == fenced_sqlstate) {
      log_warn("postgres: {}", e.what());
      return tenant_moving();
    }
    static constexpr std::string_view retryable[] = {"08", "23", "40", "53", "55", "57", "58"};
    if (state.size() < 2) return unavailable(e.what());
    for (auto cls : retryable)
      if (std::string_view(state).substr(0, 2) == cls) return unavailable(e.what());
    log_error("postgres refused a statement ({}): {}", state, e.what());
  } else {
    log_error("database work failed: {}", e.what());
  }
  return domain::failure::of(domain::errc::internal, "internal error");
}

void pg_pool::loop(int) {
  pg_conn conn(url_, keys_);
  for (;;) {
    job j;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      // Drain the queue before stopping: queued work was promised an answer.
      if (queue_.empty()) return;
      j = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!run_guarded("a postgres job", [&] { j(conn); })) conn.reset();
  }
}

} // namespace crm::persistence
