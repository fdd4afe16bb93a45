#include "domain/send_window.hpp"

namespace crm::domain {

bool send_window::admit(std::int64_t channel, std::int64_t message) {
  auto& l = lanes_[channel];
  if (l.in_flight < limit_) {
    ++l.in_flight;
    return true;
  }
  l.waiting.push_back(message);
  return false;
}

std::optional<std::int64_t> send_window::finish(std::int64_t channel) {
  auto it = lanes_.find(channel);
  if (it == lanes_.end()) return std::nullopt;
  auto& l = it->second;
  if (!l.waiting.empty()) {
    auto next = l.waiting.front(); // takes the finished one's place: in_flight unchanged
    l.waiting.pop_front();
    return next;
  }
  if (l.in_flight > 0) --l.in_flight;
  if (l.in_flight == 0) lanes_.erase(it);
  return std::nullopt;
}

void send_window::clear() {
  lanes_.clear();
}

std::size_t send_window::in_flight(std::int64_t channel) const {
  auto it = lanes_.find(channel);
  return it == lanes_.end() ? 0 : it->second.in_flight;
}

std::size_t send_window::waiting(std::int64_t channel) const {
  auto it = lanes_.find(channel);
  return it == lanes_.end() ? 0 : it->second.waiting.size();
}

} // namespace crm::domain
