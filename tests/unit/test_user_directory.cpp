// The users actor's rules, planned from its store without an actor (domain::user_directory):
// paging in id order, which changes end a user's sessions, and the tenant's last active admin.
#include "domain/user.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

user_directory with(std::vector<std::pair<role, bool>> users) {
  user_directory d;
  std::int64_t id = 0;
  for (auto [r, active] : users) {
    user u;
    u.id = ++id;
    u.user_role = r;
    u.is_active = active;
    u.full_name = "user " + std::to_string(id);
    d.put(u);
  }
  return d;
}

} // namespace

TEST(user_directory, pages_in_id_order) {
  auto d = with({{role::admin, true}, {role::agent, true}, {role::viewer, true}});
  auto p = d.list(2, 2);
  EXPECT_EQ(p.total, 3);
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].id, 3);
  EXPECT_TRUE(d.list(3, 2).items.empty());
  EXPECT_FALSE(d.get(4));
  EXPECT_EQ(d.get(4).error().code, errc::not_found);
}

TEST(user_directory, the_last_active_admin_cannot_be_demoted_or_deactivated) {
  auto d = with({{role::admin, true}, {role::admin, false}, {role::agent, true}});
  user_patch demote;
  demote.role = role::manager;
  EXPECT_EQ(d.plan_update(1, demote).error().code, errc::conflict);
  user_patch off;
  off.is_active = false;
  EXPECT_EQ(d.plan_update(1, off).error().code, errc::conflict);
  // With a second active admin, either may go.
  user_patch on;
  on.is_active = true;
  d.put(d.plan_update(2, on)->next);
  EXPECT_TRUE(d.plan_update(1, demote));
}

TEST(user_directory, role_password_and_deactivation_end_the_sessions_a_rename_does_not) {
  auto d = with({{role::admin, true}, {role::agent, true}});
  user_patch rename;
  rename.full_name = "Dr. Ana";
  auto r = d.plan_update(2, rename);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->revoke);
  EXPECT_EQ(r->next.full_name, "Dr. Ana");
  EXPECT_EQ(d.get(2)->full_name, "user 2"); // planning changes nothing
  user_patch pw;
  pw.password_hash = "$argon2id$...";
  EXPECT_TRUE(d.plan_update(2, pw)->revoke);
  user_patch promote;
  promote.role = role::manager;
  EXPECT_TRUE(d.plan_update(2, promote)->revoke);
  user_patch reactivate;
  reactivate.is_active = true; // already active: no change, no revocation
  EXPECT_FALSE(d.plan_update(2, reactivate)->revoke);
}
