// Session revocation across nodes. Postgres holds the authoritative record (sessions.revoked_at);
// Redis holds each revocation under a key with a TTL equal to the longest remaining token
// lifetime, announces it on a stream that every node follows (so a logout is refused everywhere
// within a second), and guards refresh-token rotation (each refresh token is usable once).
#pragma once
#include "domain/revocation_list.hpp"
#include "persistence/redis_client.hpp"

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace crm::persistence {

class pg_pool;

class revocation_store {
public:
  revocation_store(domain::revocation_list& list, redis_client& redis, std::string redis_url);
  ~revocation_store();

  // Loads recent revocations from Postgres (blocking; call at start-up), then follows the stream.
  void start(pg_pool& pool);
  void stop();

  // Applies locally at once, then records in Redis; `done(true)` when Redis acknowledged.
  // Revocations Redis did not take (it was down) are announced again by the feed thread once
  // it answers, so other nodes hear of a logout made during the outage.
  void revoke(const std::vector<std::string>& sids, std::function<void(bool)> done);
  // Revocations still waiting for Redis (metrics, tests).
  std::size_t unannounced() const;
  // Times the feed re-read Postgres after it had been cut off from Redis.
  std::uint64_t catch_ups() const { return caught_up_.load(); }

  enum class rotation : std::uint8_t { fresh, reused, revoked, unavailable };
  // Marks refresh token `jti` of session `sid` as used. `reused` when it had been used before,
  // in which case the whole session has been revoked.
  void rotate(const std::string& sid, const std::string& jti, std::int64_t ttl_seconds,
              std::function<void(rotation)> done);
  // Takes back a fresh rotation of `jti` whose new pair was never issued (a later step of the
  // refresh failed): the client's retry with the same token is then not a reuse. `then` runs
  // once Redis has answered (so the failure is answered only after).
  void unrotate(const std::string& jti, std::function<void()> then);

  domain::revocation_list& list() { return list_; }

private:
  void follow();
  void announce(std::vector<std::pair<std::string, std::int64_t>> revoked,
                std::function<void(bool)> done);
  void announce_pending();
  void catch_up(std::int64_t since);

  domain::revocation_list& list_;
  redis_client& redis_;
  std::string redis_url_;
  std::string last_id_ = "$";
  // Since when (Unix seconds) the feed could not read the stream: once Redis answers again,
  // the revocations Postgres recorded meanwhile are applied (a logout made on another node
  // while this one was cut off from Redis, or while Redis restarted and lost its stream).
  std::atomic<std::int64_t> behind_since_{0};
  pg_pool* pool_ = nullptr;
  std::atomic<std::uint64_t> caught_up_{0};
  std::atomic<bool> stopping_{false};
  std::thread feed_;
  mutable std::mutex pending_mutex_;
  std::vector<std::pair<std::string, std::int64_t>> pending_; // (sid, until) not in Redis yet
  bool announcing_ = false;
};

// Failed-login throttling per e-mail (contract §3): counted in Redis so every node agrees,
// falling back to a local count while Redis is unreachable.
class login_throttle {
public:
  login_throttle(redis_client& redis, int max_failures, int window_seconds);

  // Admits a login attempt before its password is checked: `done(0)` when it may proceed (the
  // caller then calls `finish` exactly once), else `done(seconds until it may)`. An attempt
  // counts against the limit from admission, so concurrent wrong passwords get no more checks
  // than the limit allows between them (per node); attempts over it wait for those in flight
  // to finish instead of being refused, so parallel right passwords all succeed.
  void admit(const std::string& email, std::function<void(int)> done);
  // `right`: the password was right (the count starts over), wrong (one more failure), or
  // nothing (it could not be checked).
  void finish(const std::string& email, std::optional<bool> right);

private:
  struct in_flight {
    int checks = 0;
    std::deque<std::function<void()>> waiting; // admissions to try again when a check ends
  };
  void admit_with(const std::string& email, std::int64_t failures, std::int64_t retry_after,
                  std::function<void(int)> done);
  void check_ended(const std::string& email);

  redis_client& redis_;
  int max_failures_;
  int window_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::pair<int, std::int64_t>> local_; // count, window end
  std::unordered_map<std::string, in_flight> in_flight_;                // by lower-cased e-mail
};

} // namespace crm::persistence
