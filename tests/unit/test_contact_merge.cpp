// The rules of merges and duplicates (domain/contact_merge.hpp): what the survivor keeps and
// takes, and which pairs of contacts look like one person.
#include "domain/contact_merge.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

contact person(std::int64_t id, std::string first, std::optional<std::string> last = {}) {
  contact c;
  c.id = id;
  c.first_name = std::move(first);
  c.last_name = std::move(last);
  return c;
}

} // namespace

TEST(MergedContact, KeepsTheSurvivorsValuesAndFillsWhatItLacks) {
  auto s = person(1, "R.", "Lee");
  s.phone = "+5511999990001";
  s.tags = {"vip", "Cardio"};
  s.custom_fields = R"({"allergy":"none","blood":null})";
  s.created_at = 10;
  auto d = person(2, "Rita", "Lee-Souza");
  d.email = "rita@example.com";
  d.phone = "+5511999990002";
  d.company_id = 7;
  d.status = contact_status::inactive;
  d.tags = {"cardio", "lab"};
  d.custom_fields = R"({"allergy":"penicillin","blood":"O+","insurer":"Acme"})";
  auto m = merged_contact(s, d, {}, d.custom_fields);
  EXPECT_EQ(m.id, 1);
  EXPECT_EQ(m.created_at, 10);
  EXPECT_EQ(m.first_name, "R.");
  EXPECT_EQ(m.last_name, "Lee");
  EXPECT_EQ(m.email, "rita@example.com");
  EXPECT_EQ(m.phone, "+5511999990001");
  EXPECT_EQ(m.company_id, 7);
  EXPECT_EQ(m.status, contact_status::active);
  EXPECT_EQ(m.tags, (std::vector<std::string>{"vip", "Cardio", "lab"}));
  EXPECT_EQ(m.custom_fields, R"({"allergy":"none","blood":"O+","insurer":"Acme"})");
}

TEST(MergedContact, PreferTakesTheDuplicatesValueWhereItHasOne) {
  auto s = person(1, "R.", "Lee");
  s.email = "old@example.com";
  s.custom_fields = R"({"allergy":"none"})";
  auto d = person(2, "Rita");
  d.email = "rita@example.com";
  d.status = contact_status::qualified;
  d.custom_fields = R"({"allergy":"penicillin"})";
  merge_preferences prefer{{"first_name", merge_side::duplicate},
                           {"last_name", merge_side::duplicate},
                           {"email", merge_side::duplicate},
                           {"status", merge_side::duplicate},
                           {"custom_fields", merge_side::duplicate}};
  auto m = merged_contact(s, d, prefer, d.custom_fields);
  EXPECT_EQ(m.first_name, "Rita");
  EXPECT_EQ(m.last_name, "Lee"); // the duplicate has none: the survivor's stays
  EXPECT_EQ(m.email, "rita@example.com");
  EXPECT_EQ(m.status, contact_status::qualified);
  EXPECT_EQ(m.custom_fields, R"({"allergy":"penicillin"})");
  // "survivor" is the default said out loud.
  auto kept = merged_contact(s, d, {{"email", merge_side::survivor}}, d.custom_fields);
  EXPECT_EQ(kept.email, "old@example.com");
}

TEST(Duplicates, MailboxesIgnoreCaseTagsAndGmailDots) {
  EXPECT_EQ(mailbox_of("Ana.Souza+lab@Gmail.com"), "anasouza@gmail.com");
  EXPECT_EQ(mailbox_of("anasouza@googlemail.com"), "anasouza@gmail.com");
  EXPECT_EQ(mailbox_of("ana.souza+x@clinic.com"), "ana.souza@clinic.com");
  EXPECT_EQ(mailbox_of("+x@clinic.com"), "+x@clinic.com");
}

TEST(Duplicates, CloseNamesAreOneOrTwoEditsApart) {
  EXPECT_TRUE(close_names(person(1, "Joana", "Ferreira"), person(2, "joana", "Fereira")));
  EXPECT_TRUE(close_names(person(1, "Ana  Maria"), person(2, "ana-maria")));
  EXPECT_TRUE(close_names(person(1, "Joana", "Ferreira"), person(2, "Joanna", "Fereira")));
  EXPECT_FALSE(close_names(person(1, "Ana"), person(2, "Ada"))); // short names: exact only
  EXPECT_FALSE(close_names(person(1, "Joana", "Ferreira"), person(2, "Paulo", "Ferreira")));
}

TEST(Duplicates, PairsSharePhoneMailboxOrCloseNamesInACompany) {
  auto a = person(1, "Ana");
  a.phone = "+5511988880000";
  auto b = person(2, "Anna");
  b.phone = "+5511988880000";
  auto c = person(3, "Marta");
  c.email = "marta.s+lab@gmail.com";
  auto d = person(4, "marta");
  d.email = "MartaS@gmail.com";
  auto e = person(5, "Joana", "Ferreira");
  e.company_id = 9;
  auto f = person(6, "Joana", "Fereira");
  f.company_id = 9;
  auto g = person(7, "Joana", "Ferreira"); // no company: nothing shared with e
  auto h = person(8, "Paulo", "Mendes");
  h.company_id = 9;
  auto pairs = find_duplicates({&h, &g, &f, &e, &d, &c, &b, &a});
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(std::make_pair(pairs[0].first, pairs[0].second), std::make_pair(1L, 2L));
  EXPECT_EQ(pairs[0].reasons, (std::vector<std::string>{"phone"}));
  EXPECT_EQ(std::make_pair(pairs[1].first, pairs[1].second), std::make_pair(3L, 4L));
  EXPECT_EQ(pairs[1].reasons, (std::vector<std::string>{"email", "name"}));
  EXPECT_EQ(std::make_pair(pairs[2].first, pairs[2].second), std::make_pair(5L, 6L));
  EXPECT_EQ(pairs[2].reasons, (std::vector<std::string>{"name"}));
}

TEST(Duplicates, AFrontDesksSharedNumberMakesBoundedPairs) {
  std::vector<contact> many;
  for (int i = 0; i < 200; ++i) {
    many.push_back(person(i + 1, "Patient " + std::to_string(i)));
    many.back().phone = "+5511900000000";
  }
  std::vector<const contact*> all;
  for (auto& c : many) all.push_back(&c);
  auto pairs = find_duplicates(all);
  EXPECT_EQ(pairs.size(), duplicate_group_max * (duplicate_group_max - 1) / 2);
}
