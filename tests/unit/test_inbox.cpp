// Unit tests for domain/inbox (docs/channels.md "Teams and assignment"): a channel belongs to
// one team, and a new conversation goes to the available member with the fewest open
// conversations under the cap, round-robin among equals.
#include "domain/inbox.hpp"

#include "domain/channel.hpp"

#include <gtest/gtest.h>

#include <random>

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

namespace {

conversation held_by(std::int64_t id, std::optional<std::int64_t> assignee,
                     conversation_status status = conversation_status::open) {
  conversation c;
  c.id = id;
  c.assignee_id = assignee;
  c.status = status;
  return c;
}

} // namespace

TEST(open_load, counts_each_assignees_open_conversations_as_they_change) {
  open_load load;
  auto a = held_by(1, 10), b = held_by(2, 10), c = held_by(3, std::nullopt);
  load.change(nullptr, &a);
  load.change(nullptr, &b);
  load.change(nullptr, &c); // nobody's: not counted
  EXPECT_EQ(load.of_assignees(), (open_load::counts{{10, 2}}));
  auto moved = held_by(2, 11);
  load.change(&b, &moved);
  EXPECT_EQ(load.of_assignees(), (open_load::counts{{10, 1}, {11, 1}}));
  auto closed = held_by(1, 10, conversation_status::closed);
  load.change(&a, &closed); // a user with none open is not listed
  EXPECT_EQ(load.of_assignees(), (open_load::counts{{11, 1}}));
  auto pending = held_by(1, 10, conversation_status::pending);
  load.change(&closed, &pending); // reopened: pending counts as open
  load.change(&moved, nullptr);   // gone (an erasure)
  EXPECT_EQ(load.of_assignees(), (open_load::counts{{10, 1}}));
  // A staged change on a copy leaves the kept counts alone.
  auto copy = load.of_assignees();
  auto taken = held_by(4, 12);
  open_load::adjust(copy, nullptr, &taken);
  EXPECT_EQ(copy, (open_load::counts{{10, 1}, {12, 1}}));
  EXPECT_EQ(load.of_assignees(), (open_load::counts{{10, 1}}));
  load.clear();
  EXPECT_TRUE(load.of_assignees().empty());
}

TEST(open_load, always_equals_a_recount_of_the_conversations_held) {
  // Random changes of 50 conversations among 5 users (or none) and the three statuses, each given
  // to the load as the channels actor does (what was held, what is held now); after each, the load
  // is what counting every conversation gives.
  std::mt19937 rng(20261129);
  std::map<std::int64_t, conversation> held;
  open_load load;
  const conversation_status statuses[] = {conversation_status::open, conversation_status::pending,
                                          conversation_status::closed};
  for (int step = 0; step < 5000; ++step) {
    std::int64_t id = 1 + static_cast<std::int64_t>(rng() % 50);
    auto it = held.find(id);
    const conversation* before = it == held.end() ? nullptr : &it->second;
    if (before && rng() % 10 == 0) {
      load.change(before, nullptr);
      held.erase(it);
    } else {
      auto who = rng() % 6;
      auto next = held_by(id, who == 5 ? std::nullopt : std::optional<std::int64_t>(100 + who),
                          statuses[rng() % 3]);
      load.change(before, &next);
      held[id] = next;
    }
    open_load::counts recount;
    for (auto& [_, c] : held)
      if (c.assignee_id && c.status != conversation_status::closed) ++recount[*c.assignee_id];
    ASSERT_EQ(load.of_assignees(), recount) << "step " << step;
  }
}
