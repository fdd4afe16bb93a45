// A warning that repeats for one cause (an address that cannot be reached, say) written at most
// once per period: the first at once, the others counted, and their number told on the next
// line written and when the cause is over. Not thread-safe: it has one owner (an actor's state).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace crm {

class log_limiter {
public:
  using clock = std::chrono::steady_clock;
  explicit log_limiter(clock::duration every) : every_(every) {}

  // Whether to write this occurrence of `cause` now; when so, `held_back` is how many were not
  // written since the last one that was.
  bool admit(const std::string& cause, std::uint64_t& held_back,
             clock::time_point now = clock::now()) {
    auto [it, first] = causes_.try_emplace(cause);
    auto& e = it->second;
    ++e.total;
    if (!first && now - e.last < every_) {
      ++e.held;
      return false;
    }
    held_back = e.held;
    e.held = 0;
    e.last = now;
    return true;
  }

  // The cause is over: how many times it occurred (0: it had not), and it is forgotten.
  std::uint64_t clear(const std::string& cause) {
    auto it = causes_.find(cause);
    if (it == causes_.end()) return 0;
    auto n = it->second.total;
    causes_.erase(it);
    return n;
  }

private:
  struct entry {
    clock::time_point last{};
    std::uint64_t held = 0;
    std::uint64_t total = 0;
  };
  clock::duration every_;
  std::map<std::string, entry> causes_;
};

} // namespace crm
