// Where the requests of the tenants a node holds come from (domain/tenant_demand.hpp).
#include "domain/tenant_demand.hpp"

#include <algorithm>
#include <optional>

namespace crm::domain {

void demand_tracker::note(std::int64_t tenant, std::string_view via) {
  std::lock_guard lock(mutex_);
  counts& c = window_[tenant];
  if (via.empty()) {
    ++c.here;
    return;
  }
  auto it = c.via.find(via);
  if (it == c.via.end()) it = c.via.emplace(std::string(via), 0).first;
  ++it->second;
}

namespace {

// The node most of a tenant's requests came through, if the rules call for a move there.
template <class Counts>
std::optional<demand_move> candidate(std::int64_t tenant, const Counts& c,
                                     const demand_rules& rules) {
  std::uint32_t total = c.here;
  const std::pair<const std::string, std::uint32_t>* best = nullptr;
  for (const auto& v : c.via) {
    total += v.second;
    if (best == nullptr || v.second > best->second) best = &v;
  }
  if (best == nullptr || best->second < rules.min_requests ||
      static_cast<double>(best->second) < rules.min_share * static_cast<double>(total))
    return std::nullopt;
  return demand_move{tenant, best->first, best->second, total};
}

} // namespace

std::vector<demand_move> demand_tracker::end_window(const demand_rules& rules,
                                                    clock::time_point now,
                                                    const std::function<bool(std::int64_t)>& held) {
  std::unordered_map<std::int64_t, counts> window;
  {
    std::lock_guard lock(mutex_);
    window.swap(window_);
  }
  std::erase_if(cooling_, [now](const auto& c) { return c.second <= now; });
  std::vector<demand_move> all;
  for (const auto& [tenant, c] : window)
    if (held(tenant) && !cooling_.contains(tenant))
      if (auto m = candidate(tenant, c, rules)) all.push_back(std::move(*m));
  std::sort(all.begin(), all.end(), [](const demand_move& a, const demand_move& b) {
    return a.from_there != b.from_there ? a.from_there > b.from_there : a.tenant < b.tenant;
  });
  if (all.size() > rules.max_moves) all.resize(rules.max_moves);
  for (const demand_move& m : all) cooling_[m.tenant] = now + rules.cooldown;
  return all;
}

} // namespace crm::domain
