// A fixed pool of PostgreSQL connections, each owned by its own thread. Work is queued as a
// function of a connection and runs on one of those threads, so no blocking database call ever
// runs on an asio or actor scheduler thread. The caller's continuation runs on the pool thread:
// it must only hand the result on (send a message, post to a strand).
#pragma once
#include "domain/failure.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace pqxx {
template <typename CONNECTPOLICY>
class basic_connection_base;
class connect_direct;
} // namespace pqxx

namespace crm::domain {
class secret_keys;
}

namespace crm::persistence {

using pqxx_connection = pqxx::basic_connection_base<pqxx::connect_direct>;

// A statement a connection parses and plans once (PREPARE), not at every execution.
struct prepared_statement {
  const char* name;
  std::string sql;
};

// One pooled connection; persistence code reaches the libpqxx connection with `raw()`.
class pg_conn {
public:
  explicit pg_conn(std::string url, const domain::secret_keys* keys = nullptr);
  ~pg_conn();
  pqxx_connection& raw(); // (re)connects when needed; throws pqxx::broken_connection
  void reset();           // drop the connection after a failure

  // Server-side prepared statements (SQL PREPARE) of the current connection: a new
  // connection has none.
  bool has_prepared(std::string_view name) const;
  void add_prepared(std::string name);
  // Declares `s` on this connection unless it is already (libpqxx prepares it at its first use:
  // exec_prepared(s.name, ...)).
  void prepare_once(const prepared_statement& s);

  // The keys that seal secrets at rest (domain/secret_keys.hpp); throws when none were given.
  const domain::secret_keys& keys() const;

private:
  std::string url_;
  const domain::secret_keys* keys_ = nullptr;
  std::unique_ptr<pqxx_connection> conn_;
  std::vector<std::string> prepared_;
};

// A trivial round trip (readiness checks).
void pg_ping(pg_conn& c);

class pg_pool {
public:
  using job = std::function<void(pg_conn&)>;

  // `queue_limit`: jobs `run` may leave waiting for a connection (0: no limit).
  // `keys`: what the connections seal secrets with (outlives the pool).
  pg_pool(std::string url, int size, std::size_t queue_limit = 0,
          const domain::secret_keys* keys = nullptr);
  // A pool of no threads for deterministic tests (tests/actors): each job runs at once on the
  // caller's thread, on one connection to `url` (made only when a job uses it).
  struct run_inline_t {};
  static constexpr run_inline_t run_inline{};
  pg_pool(run_inline_t, std::string url, const domain::secret_keys* keys = nullptr);
  ~pg_pool();
  pg_pool(const pg_pool&) = delete;
  pg_pool& operator=(const pg_pool&) = delete;

  // Always queued: work already promised (commits, internal jobs).
  void submit(job j);
  // Queued unless `queue_limit` jobs already wait; false (and counted) when refused.
  bool try_submit(job j);

  // Runs `work(conn)` on a pool thread and passes its outcome to `done` (on that thread).
  // An exception from `work` drops the connection, so a failed transaction never leaves a
  // half-open one behind, and becomes the failure `failure_of` names.
  // When the queue is full, `done` gets errc::service_unavailable at once, on the caller's
  // thread: a flood of lookups gets a clear 503 instead of making every commit wait behind it.
  template <class T, class Work, class Done>
  void run(Work work, Done done) {
    auto shared_done = std::make_shared<Done>(std::move(done));
    bool queued = try_submit([work = std::move(work), shared_done](pg_conn& c) mutable {
      auto& done = *shared_done;
      std::optional<domain::outcome<T>> r;
      try {
        r.emplace(work(c));
      } catch (const std::exception& e) {
        c.reset();
        r.emplace(failure_of(e));
      }
      done(std::move(*r));
    });
    if (!queued)
      (*shared_done)(domain::outcome<T>(domain::failure::of(domain::errc::service_unavailable,
                                                            "the database is busy, retry later")));
  }

  const std::string& url() const { return url_; }
  const domain::secret_keys& keys() const;
  std::size_t queue_depth();
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  void stop();

  static domain::failure unavailable(const char* what);
  // What a caller is told of an exception from database work: a lost connection, an unknown
  // outcome, a server shutting down, short of resources, a constraint violated by a row the
  // caller did not know of, or a lock or serialization conflict is errc::service_unavailable (503,
  // worth a retry); anything else (a statement the server refused, a value that could not be
  // converted or quoted) is errc::internal (500), logged.
  static domain::failure failure_of(const std::exception& e);

private:
  void loop(int index);

  std::string url_;
  const domain::secret_keys* keys_ = nullptr;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<job> queue_;
  std::size_t queue_limit_ = 0;
  std::atomic<std::uint64_t> refused_{0};
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::unique_ptr<pg_conn> inline_conn_; // only in a pool made with run_inline
};

} // namespace crm::persistence
