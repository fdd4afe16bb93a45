#include "domain/revocation_list.hpp"

#include <mutex>

namespace crm::domain {

void revocation_list::revoke(std::string sid, std::int64_t until) {
  std::unique_lock lock(mutex_);
  auto& u = sessions_[std::move(sid)];
  if (until > u) u = until;
}

bool revocation_list::is_revoked(std::string_view sid) const {
  std::shared_lock lock(mutex_);
  return sessions_.find(sid) != sessions_.end();
}

void revocation_list::prune(std::int64_t now_seconds) {
  std::unique_lock lock(mutex_);
  std::erase_if(sessions_, [&](const auto& kv) { return kv.second <= now_seconds; });
}

std::size_t revocation_list::size() const {
  std::shared_lock lock(mutex_);
  return sessions_.size();
}

} // namespace crm::domain
