// Where the requests of a node's tenants come from, and which tenants move
// (domain/tenant_demand.hpp).
#include "domain/tenant_demand.hpp"

#include <gtest/gtest.h>

namespace crm::domain {
namespace {

using namespace std::chrono_literals;

const auto all_held = [](std::int64_t) { return true; };

void note(demand_tracker& d, std::int64_t tenant, std::string_view via, int n) {
  for (int i = 0; i < n; ++i) d.note(tenant, via);
}

TEST(demand, a_tenant_whose_requests_come_through_one_node_moves_there) {
  demand_tracker d;
  note(d, 1, "node-2", 30);
  note(d, 1, "", 2);
  const auto now = demand_tracker::clock::now();
  EXPECT_EQ(d.end_window({}, now, all_held), (std::vector<demand_move>{{1, "node-2", 30, 32}}));
  // The window is over: nothing is counted twice.
  EXPECT_TRUE(d.end_window({}, now, all_held).empty());
}

TEST(demand, requests_spread_over_the_nodes_or_too_few_move_nothing) {
  demand_tracker d;
  note(d, 1, "node-2", 20); // round robin over three nodes: a third each
  note(d, 1, "node-3", 20);
  note(d, 1, "", 20);
  note(d, 2, "node-2", 9); // below the minimum
  note(d, 3, "", 50);      // all here
  EXPECT_TRUE(d.end_window({}, demand_tracker::clock::now(), all_held).empty());
}

TEST(demand, a_few_move_a_window_the_busiest_first_then_cool_down) {
  demand_tracker d;
  note(d, 1, "node-2", 10);
  note(d, 2, "node-2", 40);
  note(d, 3, "node-3", 20);
  const auto now = demand_tracker::clock::now();
  demand_rules rules;
  rules.max_moves = 2;
  const auto first = d.end_window(rules, now, all_held);
  ASSERT_EQ(first.size(), 2U);
  EXPECT_EQ(first[0].tenant, 2);
  EXPECT_EQ(first[1].tenant, 3);
  // The next window: tenant 1 still qualifies and moves; 2, moved, cools down.
  note(d, 1, "node-2", 10);
  note(d, 2, "node-2", 40);
  const auto second = d.end_window(rules, now + 5s, all_held);
  ASSERT_EQ(second.size(), 1U);
  EXPECT_EQ(second[0].tenant, 1);
  // After the cool-down it may move again (it went and came back: a load balancer changed).
  note(d, 2, "node-3", 40);
  EXPECT_EQ(d.end_window(rules, now + rules.cooldown + 1s, all_held).size(), 1U);
}

TEST(demand, a_tenant_no_longer_held_here_is_not_moved) {
  demand_tracker d;
  note(d, 7, "node-2", 50);
  EXPECT_TRUE(d.end_window({}, demand_tracker::clock::now(), [](std::int64_t t) {
                 return t != 7;
               }).empty());
}

} // namespace
} // namespace crm::domain
