#include "domain/rate_limit.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace crm::domain {

rate_limiter::rate_limiter(rate_policy p)
    : policy_(std::move(p)), rate_(policy_.quota > 0 ? policy_.quota / policy_.window : 0) {}

rate_limiter::shard& rate_limiter::shard_of(std::string_view key) {
  return shards_[std::hash<std::string_view>{}(key) % shards_.size()];
}

rate_decision rate_limiter::take(std::string_view key, double now) {
  rate_decision d;
  if (!enabled()) return d;
  const double q = policy_.quota;
  auto& sh = shard_of(key);
  std::lock_guard lock(sh.mutex);
  // A shard that grew large drops its full buckets: a full bucket and no bucket are the same.
  if (sh.buckets.size() >= 4096)
    std::erase_if(sh.buckets,
                  [&](auto& kv) { return kv.second.tokens + (now - kv.second.at) * rate_ >= q; });
  auto [it, fresh] = sh.buckets.try_emplace(std::string(key), bucket{q, now});
  auto& b = it->second;
  b.tokens = std::min(q, b.tokens + std::max(0.0, now - b.at) * rate_);
  b.at = std::max(b.at, now);
  if (b.tokens >= 1) {
    b.tokens -= 1;
  } else {
    d.allowed = false;
    d.retry_after =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil((1 - b.tokens) / rate_)));
  }
  d.remaining = static_cast<std::int64_t>(std::floor(b.tokens));
  d.reset = static_cast<std::int64_t>(std::ceil((q - b.tokens) / rate_));
  return d;
}

std::size_t rate_limiter::keys() const {
  std::size_t n = 0;
  for (auto& sh : shards_) {
    std::lock_guard lock(sh.mutex);
    n += sh.buckets.size();
  }
  return n;
}

} // namespace crm::domain
