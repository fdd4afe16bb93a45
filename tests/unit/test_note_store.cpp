// The notes actor's rules, planned from its store without an actor (domain::note_store): who
// may change a note, the order of a contact's notes, the search, and what a contact's deletion
// leaves.
#include "domain/note.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

note_store three_notes() {
  note_store s;
  for (std::int64_t id = 1; id <= 3; ++id) {
    note n;
    n.id = id;
    n.contact_id = id == 3 ? 20 : 10;
    n.author_id = 7;
    n.body = "Note " + std::to_string(id) + (id == 2 ? " about FASTING" : "");
    n.updated_at = 100;
    s.put(n);
  }
  return s;
}

std::vector<std::int64_t> ids_of(const page<note>& p) {
  std::vector<std::int64_t> out;
  for (auto& n : p.items) out.push_back(n.id);
  return out;
}

} // namespace

TEST(note_store, a_contacts_notes_come_pinned_first_then_newest_first) {
  auto s = three_notes();
  EXPECT_EQ(ids_of(s.list(10, "", 1, 20)), (std::vector<std::int64_t>{2, 1}));
  auto first = *s.get(10, 1);
  first.pinned = true;
  s.put(first);
  EXPECT_EQ(ids_of(s.list(10, "", 1, 20)), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(ids_of(s.list(10, "", 2, 1)), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(s.list(10, "", 2, 1).total, 2);
  EXPECT_EQ(ids_of(s.list(10, "fasting", 1, 20)), (std::vector<std::int64_t>{2}));
  EXPECT_TRUE(s.list(99, "", 1, 20).items.empty());
}

TEST(note_store, a_note_of_another_contact_is_not_found) {
  auto s = three_notes();
  EXPECT_TRUE(s.get(10, 1));
  EXPECT_EQ(s.get(20, 1).error().code, errc::not_found);
  EXPECT_EQ(s.get(10, 4).error().code, errc::not_found);
}

TEST(note_store, only_the_author_or_a_manager_changes_or_deletes_a_note) {
  auto s = three_notes();
  note_patch p;
  p.body = "changed";
  requester author{7, role::agent};
  requester colleague{8, role::agent};
  requester api_key{std::nullopt, role::agent};
  requester manager{9, role::manager};
  requester admin{std::nullopt, role::admin};
  EXPECT_EQ(s.plan_update(10, 1, p, colleague, 200).error().code, errc::insufficient_permissions);
  EXPECT_EQ(s.plan_update(10, 1, p, api_key, 200).error().code, errc::insufficient_permissions);
  EXPECT_EQ(s.plan_delete(10, 1, colleague).error().code, errc::insufficient_permissions);
  auto mine = s.plan_update(10, 1, p, author, 50);
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->body, "changed");
  EXPECT_EQ(mine->updated_at, 101);        // never before the stored time
  EXPECT_EQ(s.get(10, 1)->body, "Note 1"); // planning changes nothing
  EXPECT_TRUE(s.plan_update(10, 1, p, manager, 200));
  EXPECT_TRUE(s.plan_delete(10, 1, admin));
  // A new note's author is whoever wrote it, whatever the request said.
  note n;
  n.author_id = 1;
  EXPECT_EQ(s.plan_create(n, 3, colleague, 5).author_id, 8);
  EXPECT_EQ(s.plan_create(n, 3, api_key, 5).author_id, std::nullopt);
}

TEST(note_store, a_deleted_contact_takes_its_notes_along) {
  auto s = three_notes();
  s.forget_contact(10);
  EXPECT_EQ(s.notes.size(), 1u);
  EXPECT_TRUE(s.list(10, "", 1, 20).items.empty());
  s.erase(3);
  EXPECT_TRUE(s.notes.empty());
  EXPECT_TRUE(s.by_contact.empty());
}
