// Which tenant owns a channel or workflow id that a webhook names (those routes carry no token).
// Ids never move between tenants, so an owner once found is remembered; an id Postgres does not
// know is remembered as missing for a few seconds, so a caller repeating unknown ids does not
// put a database round trip per request in the queue that commits wait in. A create on this
// node forgets the missing ids at once.
#pragma once
#include "domain/failure.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace crm::persistence {
class pg_conn;
class pg_pool;
} // namespace crm::persistence

namespace crm::http {

class owner_directory {
public:
  using lookup_fn = std::optional<std::int64_t> (*)(persistence::pg_conn&, std::int64_t);
  // `done` gets the owner, nothing for an unknown id, or the database failure; it runs on the
  // caller's thread when the answer is remembered, else on a pool thread.
  using done_fn = std::function<void(domain::outcome<std::optional<std::int64_t>>)>;

  // `kind` labels the metrics (carecrm_owner_lookups_total{kind, source}).
  owner_directory(const char* kind, lookup_fn lookup,
                  std::chrono::seconds missing_ttl = std::chrono::seconds(5));

  void find(persistence::pg_pool& pool, std::int64_t id, done_fn done);
  void forget_missing(); // after a create

  // Every directory's lookups, answered by Postgres or from memory, in Prometheus text.
  static void write_metrics(std::string& out);

private:
  using clock = std::chrono::steady_clock;
  void remember(std::int64_t id, std::optional<std::int64_t> owner);

  const char* kind_;
  lookup_fn lookup_;
  std::atomic<std::uint64_t> from_db_{0}, from_memory_{0};
  std::chrono::seconds missing_ttl_;
  std::mutex mutex_;
  std::unordered_map<std::int64_t, std::int64_t> owners_;
  std::unordered_map<std::int64_t, clock::time_point> missing_; // id -> until
};

// `reply` of a create, first forgetting the ids `d` remembers as missing.
template <class Callback>
Callback forgetting_missing(owner_directory& d, Callback reply) {
  return Callback([&d, reply](auto r) {
    if (r) d.forget_missing();
    reply(std::move(r));
  });
}

} // namespace crm::http
