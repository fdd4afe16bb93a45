// The audit trail's pure parts (domain/audit.hpp): the chain hash covers every fact of a row,
// the list scanner finds the ids a page returned, and changes are named by field.
#include "domain/audit.hpp"
#include "domain/contact.hpp"
#include "domain/validation.hpp"

#include <gtest/gtest.h>

namespace {

using crm::domain::audit_genesis;
using crm::domain::audit_hash;
using crm::domain::audit_record;
using crm::domain::list_ids;

audit_record sample() {
  audit_record r;
  r.tenant_id = 7;
  r.at = 1'780'000'000'123'456;
  r.actor_type = "user";
  r.user_id = 3;
  r.role = "agent";
  r.resource = "contact";
  r.resource_id = 42;
  r.action = "update";
  r.fields = {"phone", "status"};
  r.outcome = "success";
  r.status = 200;
  r.client_ip = "10.1.2.3";
  r.user_agent = "ua";
  r.request_id = "r-1";
  r.ids = {1, 2};
  return r;
}

TEST(AuditHash, IsStableAndHex) {
  auto h = audit_hash(audit_genesis, 1, sample());
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h, audit_hash(audit_genesis, 1, sample()));
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(AuditHash, ChangesWithEveryFactOfTheRow) {
  auto base = audit_hash(audit_genesis, 1, sample());
  std::vector<void (*)(audit_record&)> edits = {
      [](audit_record& r) { r.tenant_id = 8; },
      [](audit_record& r) { r.at += 1; },
      [](audit_record& r) { r.actor_type = "system"; },
      [](audit_record& r) { r.user_id = std::nullopt; },
      [](audit_record& r) { r.role = "admin"; },
      [](audit_record& r) { r.actor_ref = "x"; },
      [](audit_record& r) { r.resource = "deal"; },
      [](audit_record& r) { r.resource_id = 43; },
      [](audit_record& r) { r.action = "read"; },
      [](audit_record& r) { r.fields = {"phonestatus"}; },
      [](audit_record& r) { r.fields.push_back(""); },
      [](audit_record& r) { r.outcome = "failure"; },
      [](audit_record& r) { r.status = 201; },
      [](audit_record& r) { r.client_ip = "10.1.2.4"; },
      [](audit_record& r) { r.user_agent = ""; },
      [](audit_record& r) { r.request_id = "r-2"; },
      [](audit_record& r) { r.query = "q=1"; },
      [](audit_record& r) { r.ids = {12}; },
  };
  for (std::size_t i = 0; i < edits.size(); ++i) {
    auto r = sample();
    edits[i](r);
    EXPECT_NE(audit_hash(audit_genesis, 1, r), base) << "edit " << i;
  }
  EXPECT_NE(audit_hash(audit_genesis, 2, sample()), base);
  EXPECT_NE(audit_hash(std::string(64, '1'), 1, sample()), base);
}

TEST(AuditListIds, TakesTheIdOfEachItemOnly) {
  std::string body = R"({"items":[{"id":5,"company":{"id":99},"custom_fields":{"id":"7"}},)"
                     R"({"x":"}\"","id":6}],"total":2,"id":1000})";
  EXPECT_EQ(list_ids(body, "items"), (std::vector<std::int64_t>{5, 6}));
}

TEST(AuditListIds, ReadsFhirBundleEntries) {
  std::string body =
      R"({"resourceType":"Bundle","total":2,"link":[{"relation":"self"}],)"
      R"("entry":[{"fullUrl":"u","resource":{"resourceType":"Patient","id":"12"}},)"
      R"({"resource":{"id":"13","name":[{"text":"a"}]},"search":{"mode":"match"}}]})";
  EXPECT_EQ(list_ids(body, "entry", "resource"), (std::vector<std::int64_t>{12, 13}));
}

TEST(AuditListIds, StopsSafelyOnWhatItCannotRead) {
  EXPECT_TRUE(list_ids("", "items").empty());
  EXPECT_TRUE(list_ids(R"({"items":[)", "items").empty());
  EXPECT_TRUE(list_ids(R"({"items":[{"id":"x1"}]})", "items").empty());
  EXPECT_EQ(list_ids(R"({"items":[{"id":1},{"id":)", "items"), (std::vector<std::int64_t>{1}));
  EXPECT_TRUE(list_ids(R"({"items":{"id":1}})", "items").empty());
  EXPECT_TRUE(list_ids(R"({"items":[]})", "items").empty());
}

TEST(AuditChangedFields, NamesWhatChangedAndCustomKeys) {
  crm::domain::contact a;
  a.first_name = "A";
  a.custom_fields = R"({"blood":"O+","allergy":"none"})";
  auto b = a;
  b.phone = "+5511999990000";
  b.custom_fields = R"({"blood":"A+","allergy":"none","note":"x"})";
  EXPECT_EQ(crm::domain::changed_fields(a, b),
            (std::vector<std::string>{"phone", "custom_fields.blood", "custom_fields.note"}));
  EXPECT_TRUE(crm::domain::changed_fields(a, a).empty());
  b.custom_fields = "{}";
  EXPECT_EQ(crm::domain::changed_custom_fields(a.custom_fields, b.custom_fields),
            (std::vector<std::string>{"custom_fields.blood", "custom_fields.allergy"}));
}

} // namespace

TEST(AuditListIds, EndsStringsAtTheFirstQuoteNotEscaped) {
  // JSON text: "a\\" ends after the escaped backslash; "\"}" holds a quote and a brace;
  // "\\\"{" an escaped backslash, an escaped quote and a brace.
  std::string body = R"({"items":[{"x":"a\\","id":1},{"y":"\"}","id":2},)"
                     R"({"z":"\\\"{","w":["\\"],"id":3}],"id":9})";
  EXPECT_EQ(list_ids(body, "items"), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_TRUE(list_ids(R"({"items":[{"x":"open\"}]})", "items").empty());
}

// ---- storable texts (issue 31) -----------------------------------------------------------------

namespace {
bool is_text(const std::string& s) {
  return crm::domain::is_text(s);
}
} // namespace

TEST(AuditStorable, ReplacesBytesThatAreNotTextInEveryFieldAndFlagsTheRow) {
  auto r = sample();
  r.user_agent = std::string("ua\xff\xfe", 4);
  r.request_id = std::string("r\0d", 3);
  r.fields = {std::string("\0", 1), std::string("ok\xc3\x28", 4)};
  r.actor_ref = std::string("POST /x\xc0\xaf", 9); // an overlong '/'
  r.query = "q=\xed\xa0\x80";                      // a surrogate
  EXPECT_FALSE(crm::domain::is_storable(r));
  crm::domain::make_storable(r);
  EXPECT_TRUE(crm::domain::is_storable(r));
  EXPECT_TRUE(r.sanitized);
  EXPECT_EQ(r.user_agent, "ua\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(r.request_id, "r\xEF\xBF\xBD"
                          "d");
  ASSERT_EQ(r.fields.size(), 2u);
  EXPECT_EQ(r.fields[0], "\xEF\xBF\xBD");
  EXPECT_EQ(r.fields[1], "ok\xEF\xBF\xBD(");
  for (const auto* s : {&r.actor_ref, &r.query, &r.role, &r.client_ip}) EXPECT_TRUE(is_text(*s));
}

TEST(AuditStorable, LeavesTextAloneAndCutsAtACharacterBoundary) {
  auto r = sample();
  r.user_agent = "café ☕";
  EXPECT_TRUE(crm::domain::is_storable(r)); // stored as it is, not copied
  crm::domain::make_storable(r);
  EXPECT_FALSE(r.sanitized);
  EXPECT_EQ(r.user_agent, "café ☕");
  r.user_agent = std::string(crm::domain::audit_text_max - 1, 'a') + "é"; // é straddles the cut
  EXPECT_FALSE(crm::domain::is_storable(r));
  r.user_agent = "short";
  r.fields.assign(crm::domain::audit_fields_max + 5, "f");
  EXPECT_FALSE(crm::domain::is_storable(r));
  r.user_agent = std::string(crm::domain::audit_text_max - 1, 'a') + "é";
  crm::domain::make_storable(r);
  EXPECT_TRUE(crm::domain::is_storable(r));
  EXPECT_EQ(r.user_agent, std::string(crm::domain::audit_text_max - 1, 'a'));
  EXPECT_EQ(r.fields.size(), crm::domain::audit_fields_max);
  EXPECT_FALSE(r.sanitized); // cut, not replaced
}

TEST(AuditStorable, QuarantineLeavesOnlyPrintableAscii) {
  auto r = sample();
  r.user_agent = "poison-é\\\n";
  crm::domain::quarantine(r);
  EXPECT_TRUE(r.sanitized);
  EXPECT_EQ(r.user_agent, "poison-\\xc3\\xa9\\x5c\\x0a");
}

TEST(AuditHash, CoversTheSanitizedFlagOnlyWhenSet) {
  auto r = sample();
  auto plain = audit_hash(audit_genesis, 1, r);
  r.sanitized = true;
  EXPECT_NE(audit_hash(audit_genesis, 1, r), plain);
}
