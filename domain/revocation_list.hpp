// The in-process set of revoked sessions that every authenticated request consults. Filled at
// start-up from Postgres and kept current from Redis by the revocation feed; read-mostly, so
// readers share a lock. Entries drop out once every token of the session has expired.
#pragma once
#include <cstdint>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace crm::domain {

class revocation_list {
public:
  // Tokens of session `sid` are refused until `until` (seconds since the epoch).
  void revoke(std::string sid, std::int64_t until);
  bool is_revoked(std::string_view sid) const;
  // Forgets entries whose `until` has passed.
  void prune(std::int64_t now_seconds);
  std::size_t size() const;

private:
  struct sid_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::int64_t, sid_hash, std::equal_to<>> sessions_;
};

} // namespace crm::domain
