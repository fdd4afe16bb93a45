// The views actor's rules without an actor (domain::view_store): who sees and changes a view,
// the names, and the order of the list.
#include "domain/saved_view.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

const requester ana{1, role::agent};
const requester bia{2, role::agent};
const requester boss{3, role::manager};
const requester api_key{std::nullopt, role::admin};

saved_view named(std::string name) {
  saved_view v;
  v.name = std::move(name);
  v.filter = R"({"filter_groups":[]})";
  return v;
}

// Plans and stores a view (ids as the database would give them).
saved_view add(view_store& s, std::string name, bool shared, const requester& by) {
  auto v = s.plan_create(named(std::move(name)), shared, 1, by, 100);
  EXPECT_TRUE(v) << (v ? "" : v.error().detail);
  v->id = static_cast<std::int64_t>(s.views.size() + 1);
  s.put(*v);
  return *v;
}

} // namespace

TEST(view_store, own_views_are_their_owners_and_shared_ones_everyones) {
  view_store s;
  auto mine = add(s, "My diabetics", false, ana);
  auto team = add(s, "Due this week", true, boss);
  EXPECT_EQ(mine.owner_id, 1);
  EXPECT_TRUE(team.shared());
  EXPECT_TRUE(s.get(mine.id, ana));
  EXPECT_EQ(s.get(mine.id, bia).error().code, errc::not_found); // another's: not seen at all
  EXPECT_EQ(s.get(mine.id, boss).error().code, errc::not_found);
  EXPECT_TRUE(s.get(team.id, bia));
  // The list: shared first, then one's own, each by name.
  add(s, "A first", false, ana);
  std::vector<std::string> names;
  for (auto& v : s.list(ana, 1, 20).items) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Due this week", "A first", "My diabetics"}));
  EXPECT_EQ(s.list(bia, 1, 20).total, 1);
}

TEST(view_store, a_shared_view_is_a_managers_to_make_change_and_delete) {
  view_store s;
  auto refused = s.plan_create(named("Everyone's"), true, 1, ana, 100);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, errc::insufficient_permissions);
  auto team = add(s, "Everyone's", true, boss);
  view_patch rename;
  rename.name = "Renamed";
  EXPECT_EQ(s.plan_update(team.id, rename, ana, 200).error().code, errc::insufficient_permissions);
  EXPECT_EQ(s.plan_delete(team.id, bia).error().code, errc::insufficient_permissions);
  auto renamed = s.plan_update(team.id, rename, boss, 200);
  ASSERT_TRUE(renamed);
  EXPECT_EQ(renamed->name, "Renamed");
  EXPECT_GT(renamed->updated_at, team.updated_at);
  // An API key is nobody: it keeps no view of its own.
  auto by_key = s.plan_create(named("Key's"), false, 1, api_key, 100);
  ASSERT_FALSE(by_key);
  EXPECT_EQ(by_key.error().code, errc::validation);
  EXPECT_TRUE(s.plan_create(named("Key's"), true, 1, api_key, 100));
}

TEST(view_store, names_are_unique_in_each_scope) {
  view_store s;
  add(s, "Follow-ups", false, ana);
  EXPECT_EQ(s.plan_create(named("Follow-ups"), false, 1, ana, 100).error().code, errc::conflict);
  EXPECT_TRUE(s.plan_create(named("Follow-ups"), false, 1, bia, 100)); // another user's scope
  EXPECT_TRUE(s.plan_create(named("Follow-ups"), true, 1, boss, 100)); // the tenant's scope
  auto other = add(s, "Other", false, ana);
  view_patch clash;
  clash.name = "Follow-ups";
  EXPECT_EQ(s.plan_update(other.id, clash, ana, 200).error().code, errc::conflict);
}
