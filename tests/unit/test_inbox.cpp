// Unit tests for domain/inbox (docs/channels.md "Teams and assignment"): a channel belongs to
// one team, and a new conversation goes to the available member with the fewest open
// conversations under the cap, round-robin among equals.
#include "domain/inbox.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

team front_desk() {
  team t;
  t.name = "Front desk";
  t.member_ids = {12, 10, 11, 10};
  t.channel_ids = {5, 5, 4};
  return t;
}

} // namespace

TEST(inbox_store, a_team_keeps_each_member_and_channel_once_and_a_channel_has_one_team) {
  inbox_store s;
  auto t = s.plan_create(front_desk(), 7, 1000);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->member_ids, (std::vector<std::int64_t>{10, 11, 12}));
  EXPECT_EQ(t->channel_ids, (std::vector<std::int64_t>{4, 5}));
  auto saved = *t;
  saved.id = 1;
  s.put(saved);
  team other;
  other.name = "Lab";
  other.channel_ids = {9, 5};
  auto taken = s.plan_create(other, 7, 1000);
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, errc::conflict);
  EXPECT_EQ(taken.error().detail, "channel 5 is team 1's already");
  // A team may keep its own channels on update; another may not take them.
  team_patch rename;
  rename.name = "Recepção";
  EXPECT_TRUE(s.plan_update(1, rename, 2000));
  other.channel_ids = {9};
  other.id = 2;
  s.put(other);
  team_patch grab;
  grab.channel_ids = std::vector<std::int64_t>{4};
  EXPECT_EQ(s.plan_update(2, grab, 2000).error().code, errc::conflict);
  EXPECT_EQ(s.plan_update(3, rename, 2000).error().code, errc::not_found);
  auto routes = s.routes();
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes.at(5).team_id, 1);
  EXPECT_EQ(routes.at(9).team_id, 2);
}

TEST(pick_assignee, the_fewest_open_then_the_longest_waiting_then_the_lowest_id) {
  team_route r{1, {10, 11, 12}, std::nullopt};
  std::set<std::int64_t> none;
  // Everyone equal and never assigned: the lowest id.
  EXPECT_EQ(pick_assignee(r, none, {}, {}), 10);
  // Round-robin: the one assigned longest ago among those with as few open.
  EXPECT_EQ(pick_assignee(r, none, {}, {{10, 300}, {11, 100}, {12, 200}}), 11);
  // Fewer open conversations first.
  EXPECT_EQ(pick_assignee(r, none, {{10, 2}, {11, 3}, {12, 2}}, {{10, 50}, {12, 40}}), 12);
}

TEST(pick_assignee, never_someone_unavailable_or_at_the_cap) {
  team_route r{1, {10, 11}, 2};
  EXPECT_EQ(pick_assignee(r, {10}, {}, {}), 11);
  EXPECT_EQ(pick_assignee(r, {}, {{10, 2}, {11, 1}}, {}), 11);
  EXPECT_EQ(pick_assignee(r, {11}, {{10, 2}}, {}), std::nullopt);
  EXPECT_EQ(pick_assignee(team_route{1, {}, std::nullopt}, {}, {}, {}), std::nullopt);
}

TEST(inbox_store, availability_is_kept_per_user) {
  inbox_store s;
  EXPECT_TRUE(s.available(3));
  s.set_available(3, false);
  EXPECT_FALSE(s.available(3));
  s.set_available(3, true);
  EXPECT_TRUE(s.available(3));
}

TEST(inbox_store, a_channel_given_to_a_team_from_the_channel_leaves_the_one_it_had) {
  inbox_store s;
  team a;
  a.id = 1;
  a.name = "Desk";
  a.channel_ids = {4, 5};
  team b;
  b.id = 2;
  b.name = "Lab";
  s.put(a);
  s.put(b);
  auto moved = s.plan_channel_team(5, 2, 1000);
  ASSERT_TRUE(moved);
  ASSERT_EQ(moved->size(), 2u);
  EXPECT_EQ((*moved)[0].channel_ids, (std::vector<std::int64_t>{4}));
  EXPECT_EQ((*moved)[1].channel_ids, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(s.plan_channel_team(4, 1, 1000)->size(), 0u); // already there: nothing changes
  auto none = s.plan_channel_team(4, std::nullopt, 1000);
  ASSERT_TRUE(none);
  ASSERT_EQ(none->size(), 1u);
  EXPECT_TRUE((*none)[0].channel_ids == (std::vector<std::int64_t>{5}));
  EXPECT_EQ(s.plan_channel_team(4, 9, 1000).error().code, errc::not_found);
}
