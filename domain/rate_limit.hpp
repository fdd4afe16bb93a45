// Token buckets for rate limits (contract §9, docs/operations.md): a policy allows `quota`
// requests per `window` seconds to each key (a user, a tenant, a source address), refilled
// continuously, with bursts of up to `quota`. In memory and per node: nothing on the request
// path waits for Redis or Postgres.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace crm::domain {

struct rate_policy {
  std::string name;   // as the RateLimit headers name it: "user", "tenant", "login", ...
  double quota = 0;   // q; 0 turns the policy off
  double window = 60; // w, seconds
};

struct rate_decision {
  bool allowed = true;
  std::int64_t remaining = 0;   // r: requests left now
  std::int64_t reset = 0;       // t: seconds until the bucket is full again
  std::int64_t retry_after = 0; // refused: seconds until one request is allowed (>= 1)
};

class rate_limiter {
public:
  explicit rate_limiter(rate_policy p);
  rate_limiter(const rate_limiter&) = delete;
  rate_limiter& operator=(const rate_limiter&) = delete;

  bool enabled() const { return policy_.quota > 0; }
  const rate_policy& policy() const { return policy_; }
  // Takes one request from `key`'s bucket at time `now` (seconds, any monotonic origin).
  rate_decision take(std::string_view key, double now);
  std::size_t keys() const; // buckets held (tests, metrics)

private:
  struct bucket {
    double tokens = 0;
    double at = 0;
  };
  struct shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, bucket> buckets;
  };
  shard& shard_of(std::string_view key);

  rate_policy policy_;
  double rate_; // tokens per second
  std::array<shard, 16> shards_;
};

} // namespace crm::domain
