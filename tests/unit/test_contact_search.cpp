// The contact search's rules without an actor (domain/contact_search.hpp): the body's 422s, the
// operators each kind of field takes, the custom fields checked against the definitions, and the
// predicate (groups OR-ed, filters AND-ed).
#include "domain/contact_search.hpp"

#include "domain/validation.hpp"
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

// ---- the value index -----------------------------------------------------------------------

namespace {

// The ids a query lists, page by page through the whole answer, and its total.
std::pair<std::vector<std::int64_t>, std::int64_t> listed(const contact_store& store,
                                                          contact_query q) {
  std::vector<std::int64_t> ids;
  q.limit = 7;
  std::int64_t total = -1;
  for (q.offset = 0;; q.offset += q.limit) {
    auto page = store.list(q);
    total = page.total;
    for (auto* c : page.items) ids.push_back(c->id);
    if (page.items.empty()) break;
  }
  return {ids, total};
}

} // namespace

TEST(contact_search_index, answers_what_the_predicate_answers_while_contacts_change) {
  const std::array<contact_status, 4> statuses{contact_status::active, contact_status::inactive,
                                               contact_status::qualified,
                                               contact_status::unqualified};
  const std::array<std::string_view, 4> tags{"vip", "VIP", "lab", "cardio"};
  contact_store store;
  std::uint32_t seed = 7;
  auto next = [&](std::uint32_t n) {
    seed = seed * 1103515245U + 12345U;
    return (seed >> 16) % n;
  };
  auto random_contact = [&](std::int64_t id) {
    auto c = person(id, "P" + std::to_string(id));
    c.status = statuses[next(4)];
    if (auto s = next(3); s > 0) c.source = s == 1 ? contact_source::referral : contact_source::ads;
    if (next(2) == 1) c.owner_id = 1 + static_cast<std::int64_t>(next(3));
    if (next(2) == 1) c.company_id = 4 + static_cast<std::int64_t>(next(3));
    for (std::size_t i = next(3); i > 0; --i) {
      std::string t(tags[next(4)]);
      if (std::none_of(c.tags.begin(), c.tags.end(),
                       [&](const std::string& x) { return ascii_lower(x) == ascii_lower(t); }))
        c.tags.push_back(t);
    }
    // A rare tag (a few contacts each, far apart): the index keeps those as lists.
    if (next(7) == 0) c.tags.push_back("rare-" + std::to_string(next(30)));
    c.updated_at = static_cast<std::int64_t>(next(1000));
    return c;
  };
  for (std::int64_t id = 1; id <= 400; ++id) store.upsert(random_contact(id));
  const char* bodies[] = {
      R"({"filter_groups":[{"filters":[{"field":"status","op":"eq","value":"active"},
          {"field":"tag","op":"eq","value":"vip"}]},{"filters":[{"field":"source","op":"eq",
          "value":"referral"},{"field":"tag","op":"eq","value":"lab"}]}]})",
      R"({"filter_groups":[{"filters":[{"field":"status","op":"neq","value":"active"},
          {"field":"source","op":"not_exists"}]}]})",
      R"({"filter_groups":[{"filters":[{"field":"tag","op":"not_in","value":["vip","lab"]},
          {"field":"owner_id","op":"in","value":[1,3]}]}]})",
      R"({"filter_groups":[{"filters":[{"field":"tag","op":"exists"},
          {"field":"owner_id","op":"not_exists"}]},{"filters":[{"field":"status","op":"in",
          "value":["qualified","unqualified"]},{"field":"source","op":"neq","value":"ads"}]}]})",
      R"({"filter_groups":[{"filters":[{"field":"tag","op":"not_exists"},
          {"field":"owner_id","op":"exists"},{"field":"source","op":"exists"}]}]})",
      R"({"filter_groups":[{"filters":[{"field":"company_id","op":"in","value":[4,6]},
          {"field":"tag","op":"neq","value":"cardio"}]},{"filters":[{"field":"company_id",
          "op":"not_exists"}]}]})",
      R"({"filter_groups":[{"filters":[{"field":"tag","op":"in","value":["rare-7","rare-14"]}]},
          {"filters":[{"field":"tag","op":"eq","value":"RARE-21"},
          {"field":"status","op":"neq","value":"inactive"}]}]})",
      R"({"filter_groups":[{"filters":[{"field":"owner_id","op":"neq","value":2},
          {"field":"status","op":"exists"}]}],"sort":{"field":"updated_at","order":"desc"}})",
  };
  auto compare = [&](const char* body) {
    auto s = parsed(body);
    auto plan = search_value_plan(s);
    ASSERT_TRUE(plan) << body;
    contact_query by_index, by_predicate;
    by_index.extra = by_predicate.extra = search_predicate(s);
    by_index.plan = plan;
    by_index.sort = by_predicate.sort = s.sort;
    by_index.descending = by_predicate.descending = s.descending;
    auto a = listed(store, by_index);
    auto b = listed(store, by_predicate);
    EXPECT_EQ(a, b) << body;
    EXPECT_GT(b.second, 0) << body;
  };
  // The list's own filters (status, source, owner, company, tags) go through the index too.
  auto compare_list = [&](contact_query q) {
    std::vector<std::int64_t> want;
    for (std::int64_t id = 1; id <= 450; ++id)
      if (auto* c = store.find(id); c && matches(*c, q)) want.push_back(id);
    auto got = listed(store, q);
    EXPECT_EQ(got.first, want);
    EXPECT_EQ(got.second, static_cast<std::int64_t>(want.size()));
  };
  auto lists = [&] {
    for (auto status : statuses)
      for (std::string tag : {"vip", "Lab"}) {
        contact_query q;
        q.status = status;
        q.tags = {tag};
        compare_list(q);
        q.owner_id = 2;
        q.company_id = 5;
        compare_list(q);
      }
    contact_query by_source;
    by_source.source = contact_source::ads;
    compare_list(by_source);
    contact_query rare;
    rare.tags = {"rare-14"};
    compare_list(rare);
  };
  for (auto* body : bodies) compare(body);
  lists();
  // Replaced, removed and reused slots keep the index in step.
  for (std::int64_t id = 1; id <= 400; id += 3) store.upsert(random_contact(id));
  for (std::int64_t id = 2; id <= 400; id += 5) store.erase(id);
  for (std::int64_t id = 401; id <= 450; ++id) store.upsert(random_contact(id));
  for (auto* body : bodies) compare(body);
  lists();
}

TEST(contact_search_index, leaves_what_it_cannot_answer_to_the_predicate) {
  for (const char* body :
       {R"({"filter_groups":[{"filters":[{"field":"first_name","op":"eq","value":"Ana"}]}]})",
        R"({"filter_groups":[{"filters":[{"field":"tag","op":"contains","value":"vi"}]}]})",
        R"({"filter_groups":[{"filters":[{"field":"owner_id","op":"gt","value":1}]}]})",
        R"({"filter_groups":[{"filters":[{"field":"status","op":"eq","value":"active"}]},
               {"filters":[{"field":"created_at","op":"gt","value":"2026-01-01T00:00:00Z"}]}]})",
        R"({"filter_groups":[]})"})
    EXPECT_FALSE(search_value_plan(parsed(body))) << body;
}
