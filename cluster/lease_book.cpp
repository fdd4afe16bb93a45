#include "cluster/lease_book.hpp"

#include <algorithm>

namespace crm::cluster {

lease_book::lease_book(std::string node_id) : node_(std::move(node_id)) {}

std::optional<persistence::held_lease> lease_book::lease_of(std::int64_t tenant) const {
  if (!fresh()) return std::nullopt;
  std::shared_lock lock(mutex_);
  auto it = held_.find(tenant);
  if (it == held_.end()) return std::nullopt;
  return persistence::held_lease{&node_, it->second.epoch};
}

void lease_book::learn(const lease& l) {
  std::unique_lock lock(mutex_);
  if (l.node == node_) {
    if (stopping_.count(l.tenant)) return; // held again once its old actors stopped
    held_[l.tenant] = {l.epoch, ++marks_};
    elsewhere_.erase(l.tenant);
  } else {
    held_.erase(l.tenant);
    elsewhere_[l.tenant] = l.node;
  }
}

std::optional<std::string> lease_book::owner_elsewhere(std::int64_t tenant) const {
  std::shared_lock lock(mutex_);
  auto it = elsewhere_.find(tenant);
  if (it == elsewhere_.end()) return std::nullopt;
  return it->second;
}

void lease_book::forget(std::int64_t tenant) {
  std::unique_lock lock(mutex_);
  elsewhere_.erase(tenant);
}

std::uint64_t lease_book::mark() const {
  std::shared_lock lock(mutex_);
  return marks_;
}

std::vector<std::int64_t> lease_book::reconcile(const std::vector<lease>& mine,
                                                std::uint64_t since) {
  std::unordered_map<std::int64_t, std::int64_t> now;
  now.reserve(mine.size());
  for (auto& l : mine) now.emplace(l.tenant, l.epoch);
  std::vector<std::int64_t> lost;
  std::unique_lock lock(mutex_);
  for (auto& [tenant, e] : held_) {
    if (e.learned > since) continue;
    auto it = now.find(tenant);
    if (it == now.end() || it->second != e.epoch) lost.push_back(tenant);
  }
  for (auto t : lost) {
    held_.erase(t);
    stopping_.insert(t);
  }
  // Leases Postgres gives this node that it did not know of (a dead node's tenants, a move
  // here): held from now on. A lost tenant held again at a newer epoch comes back the same way
  // on a later heartbeat, once its old actors have stopped (`stopped`).
  ++marks_;
  for (auto& [tenant, epoch] : now) {
    if (stopping_.count(tenant)) continue;
    auto it = held_.find(tenant);
    if (it != held_.end() && it->second.learned > since) continue;
    held_[tenant] = {epoch, marks_};
    elsewhere_.erase(tenant);
  }
  return lost;
}

void lease_book::stopped(std::int64_t tenant) {
  std::unique_lock lock(mutex_);
  stopping_.erase(tenant);
}

bool lease_book::stopping(std::int64_t tenant) const {
  std::shared_lock lock(mutex_);
  return stopping_.count(tenant) > 0;
}

bool lease_book::release(std::int64_t tenant) {
  std::unique_lock lock(mutex_);
  return held_.erase(tenant) > 0;
}

std::vector<lease> lease_book::held() const {
  std::shared_lock lock(mutex_);
  std::vector<lease> out;
  out.reserve(held_.size());
  for (auto& [tenant, e] : held_) out.push_back({tenant, node_, e.epoch});
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.tenant < b.tenant; });
  return out;
}

std::size_t lease_book::held_count() const {
  std::shared_lock lock(mutex_);
  return held_.size();
}

void lease_book::fresh_until(clock::time_point until) {
  fresh_until_.store(until.time_since_epoch().count(), std::memory_order_release);
}

bool lease_book::fresh() const {
  return clock::now().time_since_epoch().count() < fresh_until_.load(std::memory_order_acquire);
}

} // namespace crm::cluster
