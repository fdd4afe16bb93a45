// Where the requests of the tenants a node holds come from (docs/cluster.md "Balance"): each
// request a node runs for a tenant it holds is noted as received here, or as forwarded by node
// X. At the end of a window, a tenant whose requests came mostly through one other node (the
// one the load balancer sends them to: the node was down when the tenant was placed, or it
// joined since) is handed to that node, a few at a time, the busiest first; a tenant moved so
// is left where it went for a cool-down. Pure: the node's placement notes and acts; a unit
// test reaches every rule.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace crm::domain {

struct demand_rules {
  std::uint32_t min_requests = 10; // forwarded by one node in the window, at least
  double min_share = 0.8;          // of all the tenant's requests in the window, at least
  std::size_t max_moves = 2;       // a window, at most (bounded moves per second)
  std::chrono::seconds cooldown{60};
};

struct demand_move {
  std::int64_t tenant = 0;
  std::string to;
  std::uint32_t from_there = 0; // its requests that came through `to` in the window
  std::uint32_t total = 0;      // all its requests in the window
  bool operator==(const demand_move&) const = default;
};

class demand_tracker {
public:
  using clock = std::chrono::steady_clock;

  // A request of `tenant` run here: received from a client (`via` empty) or forwarded by the
  // node named `via`. Any thread.
  void note(std::int64_t tenant, std::string_view via);
  // Ends the window: the moves its requests call for (at most rules.max_moves, most requests
  // through the other node first, then the lower tenant id), each tenant then cooling down.
  // Tenants no longer held here (`held` false) are skipped. Only one caller at a time.
  std::vector<demand_move> end_window(const demand_rules& rules, clock::time_point now,
                                      const std::function<bool(std::int64_t)>& held);

private:
  struct counts {
    std::uint32_t here = 0;
    std::map<std::string, std::uint32_t, std::less<>> via;
  };

  std::mutex mutex_;
  std::unordered_map<std::int64_t, counts> window_;
  std::unordered_map<std::int64_t, clock::time_point> cooling_; // only the window's caller
};

} // namespace crm::domain
