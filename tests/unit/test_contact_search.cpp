// The contact search's rules without an actor (domain/contact_search.hpp): the body's 422s, the
// operators each kind of field takes, the custom fields checked against the definitions, and the
// predicate (groups OR-ed, filters AND-ed).
#include "domain/contact_search.hpp"

#include "issue_text.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

using namespace crm::domain;
using crm::testing::described;

namespace {

boost::json::value js(std::string_view text) {
  return boost::json::parse(text);
}

std::vector<std::string> search_issues(std::string_view body) {
  std::vector<issue> issues;
  auto s = parse_contact_search(js(body), issues);
  EXPECT_EQ(s.has_value(), issues.empty());
  return described(issues);
}

contact_search parsed(std::string_view body, const field_definitions& defs = {}) {
  std::vector<issue> issues;
  auto s = parse_contact_search(js(body), issues);
  EXPECT_TRUE(s) << (issues.empty() ? "" : described(issues)[0]);
  auto more = check_custom_filters(*s, defs);
  EXPECT_TRUE(more.empty()) << (more.empty() ? "" : described(more)[0]);
  return *s;
}

contact person(std::int64_t id, std::string first, std::vector<std::string> tags = {},
               std::string custom = "{}") {
  contact c;
  c.id = id;
  c.first_name = std::move(first);
  c.tags = std::move(tags);
  c.custom_fields = std::move(custom);
  c.created_at = id * 1'000'000;
  return c;
}

field_definitions definitions() {
  field_definitions d;
  auto add = [&](std::string name, field_type t, bool sensitive = false) {
    custom_field f;
    f.id = static_cast<std::int64_t>(d.fields.size() + 1);
    f.name = std::move(name);
    f.type = t;
    f.sensitive = sensitive;
    if (t == field_type::select) f.options = {"gold", "silver"};
    d.fields.push_back(f);
  };
  add("plan", field_type::select);
  add("age", field_type::integer);
  add("hiv_status", field_type::text, true);
  add("due", field_type::date);
  return d;
}

} // namespace

TEST(contact_search, groups_are_or_ed_and_filters_and_ed) {
  auto s = parsed(R"({"filter_groups": [
      {"filters": [{"field": "first_name", "op": "eq", "value": "ANA"},
                   {"field": "tag", "op": "eq", "value": "vip"}]},
      {"filters": [{"field": "id", "op": "gte", "value": 3}]}]})");
  auto match = search_predicate(s);
  EXPECT_TRUE(match(person(1, "Ana", {"VIP"})));  // the first group, in any case
  EXPECT_FALSE(match(person(2, "Ana", {"new"}))); // half the first group
  EXPECT_TRUE(match(person(3, "Bia")));           // the second group
  EXPECT_TRUE(match(person(2, "ana", {"x", "vip"})));
  EXPECT_TRUE(search_predicate(parsed("{}"))(person(1, "Anyone"))); // no group: everyone
}

TEST(contact_search, operators_on_absent_values_and_lists) {
  auto c = person(5, "Ana");
  c.email = "Ana@Clinic.io";
  auto holds = [&](std::string_view filter) {
    return search_predicate(parsed(std::string(R"({"filter_groups": [{"filters": [)") +
                                   std::string(filter) + "]}]}"))(c);
  };
  EXPECT_TRUE(holds(R"({"field": "email", "op": "contains", "value": "@clinic"})"));
  EXPECT_TRUE(holds(R"({"field": "email", "op": "in", "value": ["x@y.z", "ana@clinic.io"]})"));
  EXPECT_FALSE(holds(R"({"field": "email", "op": "not_in", "value": ["ana@clinic.io"]})"));
  // An absent value is not equal to anything: neq and not_in hold, lt and gt do not.
  EXPECT_TRUE(holds(R"({"field": "phone", "op": "neq", "value": "+5511999999999"})"));
  EXPECT_TRUE(holds(R"({"field": "owner_id", "op": "not_exists"})"));
  EXPECT_FALSE(holds(R"({"field": "company_id", "op": "lt", "value": 10})"));
  EXPECT_TRUE(holds(R"({"field": "status", "op": "eq", "value": "active"})"));
  EXPECT_TRUE(holds(R"({"field": "created_at", "op": "lt", "value": "1970-01-01T00:00:06Z"})"));
  EXPECT_FALSE(holds(R"({"field": "created_at", "op": "gt", "value": "1970-01-01T00:00:06Z"})"));
  EXPECT_TRUE(holds(R"({"field": "tag", "op": "not_exists"})"));
}

TEST(contact_search, custom_fields_are_typed_by_their_definition) {
  auto defs = definitions();
  auto gold = person(1, "A", {}, R"({"plan":"gold","age":70,"due":"2026-12-01"})");
  auto none = person(2, "B");
  auto search = [&](std::string_view filter) {
    return search_predicate(parsed(
        std::string(R"({"filter_groups": [{"filters": [)") + std::string(filter) + "]}]}", defs));
  };
  auto older = search(R"({"field": "cf.age", "op": "gte", "value": 65})");
  EXPECT_TRUE(older(gold));
  EXPECT_FALSE(older(none));
  EXPECT_TRUE(search(R"({"field": "cf.plan", "op": "in", "value": ["gold"]})")(gold));
  EXPECT_TRUE(search(R"({"field": "cf.plan", "op": "not_exists"})")(none));
  EXPECT_TRUE(search(R"({"field": "cf.due", "op": "lt", "value": "2027-01-01"})")(gold));
  // An unknown or sensitive field, a value the field cannot hold, an op its type does not take.
  auto refused = [&](std::string_view filter) {
    std::vector<issue> issues;
    auto s = parse_contact_search(
        js(std::string(R"({"filter_groups": [{"filters": [)") + std::string(filter) + "]}]}"),
        issues);
    if (!s) return described(issues);
    return described(check_custom_filters(*s, defs));
  };
  using strings = std::vector<std::string>;
  auto at = [](const char* m) { return "body/filter_groups/0/filters/0/" + std::string(m); };
  EXPECT_EQ(refused(R"({"field": "cf.nope", "op": "eq", "value": 1})"),
            strings{at("field:value_error")});
  EXPECT_EQ(refused(R"({"field": "cf.hiv_status", "op": "eq", "value": "x"})"),
            strings{at("field:value_error")});
  EXPECT_EQ(refused(R"({"field": "cf.plan", "op": "eq", "value": "bronze"})"),
            strings{at("value:value_error")});
  EXPECT_EQ(refused(R"({"field": "cf.age", "op": "contains", "value": 1})"),
            strings{at("op:value_error")});
  EXPECT_EQ(refused(R"({"field": "cf.age", "op": "eq", "value": "old"})"),
            strings{at("value:value_error")});
}

TEST(contact_search, a_body_that_breaks_a_rule_is_located) {
  using strings = std::vector<std::string>;
  auto at = [](const char* m) { return "body/filter_groups/0/filters/0/" + std::string(m); };
  EXPECT_EQ(search_issues(R"({"filter_groups": [{"filters": [{"field": "shoe", "op": "eq",
      "value": 1}]}]})"),
            strings{at("field:value_error")});
  EXPECT_EQ(search_issues(R"({"filter_groups": [{"filters": [{"field": "status", "op": "like",
      "value": "x"}]}]})"),
            strings{at("op:enum")});
  EXPECT_EQ(search_issues(R"({"filter_groups": [{"filters": [{"field": "status", "op": "gt",
      "value": "active"}]}]})"),
            strings{at("op:value_error")});
  EXPECT_EQ(search_issues(R"({"filter_groups": [{"filters": [{"field": "status", "op": "eq",
      "value": "gone"}]}]})"),
            strings{at("value:value_error")});
  EXPECT_EQ(search_issues(R"({"filter_groups": [{"filters": [{"field": "tag", "op": "in",
      "value": []}]}]})"),
            strings{at("value:value_error")});
  EXPECT_EQ(search_issues(R"({"filter_groups": [{"filters": [{"field": "tag", "op": "exists",
      "value": "x"}]}]})"),
            strings{at("value:value_error")});
  EXPECT_EQ(search_issues(R"({"filter_groups": [{"filters": []}]})"),
            strings{"body/filter_groups/0/filters:value_error"});
  EXPECT_EQ(search_issues(R"({"filters": [], "per_page": 0, "sort": {"field": "shoe"}})"),
            (strings{"body/filters:extra_forbidden", "body/sort:value_error",
                     "body/per_page:value_error"}));
  EXPECT_EQ(search_issues("[]"), strings{"body:dict_type"});
}
