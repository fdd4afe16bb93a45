// The tasks actor's rules, planned from its store without an actor (domain::task_store): who may
// change or delete a task, the list's filters and order, when task.overdue is due (once per due
// time), and what a contact's or a deal's deletion leaves.
#include "domain/task.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

constexpr std::int64_t hour = 3600LL * 1'000'000;
constexpr std::int64_t now = 1000 * hour;

task make(std::int64_t id, std::optional<std::int64_t> due, std::optional<std::int64_t> assignee,
          std::optional<std::int64_t> contact = std::nullopt) {
  task t;
  t.id = id;
  t.tenant_id = 1;
  t.title = "task " + std::to_string(id);
  t.due_at = due;
  t.assignee_id = assignee;
  t.created_by = 7;
  t.contact_id = contact;
  return t;
}

std::vector<std::int64_t> ids_of(const page<task>& p) {
  std::vector<std::int64_t> out;
  for (auto& t : p.items) out.push_back(t.id);
  return out;
}

using ids = std::vector<std::int64_t>;

// A query with one filter set.
template <class F>
task_query where(F set) {
  task_query q;
  set(q);
  return q;
}

} // namespace

TEST(task_store, a_new_task_is_assigned_to_its_creator_unless_someone_else_is_named) {
  task_store s;
  requester agent{9, role::agent};
  auto mine = s.plan_create(make(0, std::nullopt, std::nullopt), 1, agent, now);
  EXPECT_EQ(mine.assignee_id, 9);
  EXPECT_EQ(mine.created_by, 9);
  EXPECT_EQ(mine.created_at, now);
  auto theirs = s.plan_create(make(0, std::nullopt, 4), 1, agent, now);
  EXPECT_EQ(theirs.assignee_id, 4);
  // An API key is nobody: the task is unassigned.
  auto by_key =
      s.plan_create(make(0, std::nullopt, std::nullopt), 1, {std::nullopt, role::admin}, now);
  EXPECT_FALSE(by_key.assignee_id);
  EXPECT_FALSE(by_key.created_by);
}

TEST(task_store, the_assignee_the_creator_or_a_manager_may_change_a_task_and_no_one_else) {
  task_store s;
  s.put(make(1, std::nullopt, 4)); // created by 7, assigned to 4
  task_patch done;
  done.status = task_status::done;
  for (auto who : {requester{4, role::agent}, requester{7, role::agent},
                   requester{99, role::manager}, requester{std::nullopt, role::admin}})
    EXPECT_TRUE(s.plan_update(1, done, who, now));
  auto other = s.plan_update(1, done, {5, role::agent}, now);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, errc::insufficient_permissions);
  // Deleting is the creator's or a manager's: not the assignee's.
  EXPECT_FALSE(s.plan_delete(1, {4, role::agent}));
  EXPECT_TRUE(s.plan_delete(1, {7, role::agent}));
  EXPECT_TRUE(s.plan_delete(1, {3, role::manager}));
  EXPECT_EQ(s.plan_delete(2, {3, role::manager}).error().code, errc::not_found);
}

TEST(task_store, done_records_when_and_reopening_clears_it) {
  task_store s;
  s.put(make(1, std::nullopt, 4));
  task_patch p;
  p.status = task_status::done;
  auto done = *s.plan_update(1, p, {4, role::agent}, now);
  EXPECT_EQ(done.completed_at, now);
  s.put(done);
  p.status = task_status::open;
  auto reopened = *s.plan_update(1, p, {4, role::agent}, now + 5);
  EXPECT_FALSE(reopened.completed_at);
  EXPECT_GT(reopened.updated_at, done.updated_at);
}

TEST(task_store, lists_filter_and_come_by_due_time_with_undated_last) {
  task_store s;
  s.put(make(1, now + 2 * hour, 4, 10));
  s.put(make(2, std::nullopt, 4, 10));
  s.put(make(3, now - hour, 5, 20));
  s.put(make(4, now - 2 * hour, 4));
  auto done = make(5, now - 3 * hour, 4, 10);
  done.status = task_status::done;
  s.put(done);
  EXPECT_EQ(ids_of(s.list({}, now, 1, 20)), (ids{5, 4, 3, 1, 2}));
  EXPECT_EQ(ids_of(s.list(where([](task_query& q) { q.assignee_id = 4; }), now, 1, 20)),
            (ids{5, 4, 1, 2}));
  EXPECT_EQ(ids_of(s.list(where([](task_query& q) { q.contact_id = 10; }), now, 1, 20)),
            (ids{5, 1, 2}));
  EXPECT_EQ(ids_of(s.list(where([](task_query& q) { q.status = task_status::open; }), now, 1, 20)),
            (ids{4, 3, 1, 2}));
  // Overdue: open and due before now (the done one is not).
  EXPECT_EQ(ids_of(s.list(where([](task_query& q) { q.overdue = true; }), now, 1, 20)),
            (ids{4, 3}));
  EXPECT_EQ(ids_of(s.list(where([](task_query& q) { q.overdue = false; }), now, 1, 20)),
            (ids{5, 1, 2}));
  EXPECT_EQ(ids_of(s.list(where([](task_query& q) { q.due_before = now; }), now, 1, 20)),
            (ids{5, 4, 3}));
  auto second = s.list({}, now, 2, 2);
  EXPECT_EQ(ids_of(second), (ids{3, 1}));
  EXPECT_EQ(second.total, 5);
}

TEST(task_store, overdue_is_due_once_per_due_time_for_open_tasks) {
  task_store s;
  s.put(make(1, now - hour, 4));
  s.put(make(2, now + hour, 4));
  s.put(make(3, std::nullopt, 4));
  auto closed = make(4, now - hour, 4);
  closed.status = task_status::cancelled;
  s.put(closed);
  EXPECT_EQ(s.due_overdue(now, 10), (ids{1}));
  EXPECT_EQ(s.next_due(), now - hour);
  // Marked (task.overdue fired): not due again, and the timer waits for task 2.
  auto marked = *s.get(1);
  marked.overdue_at = now;
  s.put(marked);
  EXPECT_TRUE(s.due_overdue(now, 10).empty());
  EXPECT_EQ(s.next_due(), now + hour);
  // A new due time lets it fire again once that passes.
  task_patch later;
  later.due_at = now + 30 * 60'000'000LL;
  auto moved = *s.plan_update(1, later, {4, role::agent}, now);
  EXPECT_FALSE(moved.overdue_at);
  s.put(moved);
  EXPECT_EQ(s.next_due(), now + 30 * 60'000'000LL);
  EXPECT_EQ(s.due_overdue(now + hour + 1, 10), (ids{1, 2}));
  EXPECT_EQ(s.due_overdue(now + hour + 1, 1), (ids{1}));
  // Done before its time: never due.
  task_patch finished;
  finished.status = task_status::done;
  s.put(*s.plan_update(2, finished, {4, role::agent}, now));
  EXPECT_EQ(s.due_overdue(now + 2 * hour, 10), (ids{1}));
  // The same due time sent again is no new deadline.
  s.put(marked);
  task_patch same;
  same.due_at = marked.due_at;
  EXPECT_TRUE(s.plan_update(1, same, {4, role::agent}, now)->overdue_at);
}

TEST(task_store, a_deleted_contact_takes_its_tasks_and_a_deleted_deal_leaves_them_unlinked) {
  task_store s;
  s.put(make(1, now - hour, 4, 10));
  auto with_deal = make(2, std::nullopt, 4, 20);
  with_deal.deal_id = 8;
  s.put(with_deal);
  s.forget_contact(10);
  EXPECT_EQ(s.get(1).error().code, errc::not_found);
  EXPECT_TRUE(s.due_overdue(now, 10).empty()); // nor is its task.overdue waited for
  EXPECT_TRUE(s.list(where([](task_query& q) { q.contact_id = 10; }), now, 1, 20).items.empty());
  s.forget_deal(8);
  EXPECT_FALSE(s.get(2)->deal_id);
  EXPECT_EQ(s.get(2)->contact_id, 20);
}
