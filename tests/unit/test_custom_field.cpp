// Custom-field rules: names, type widening, value validation per type, CSV cell conversion and
// typed equality for list filters.
#include "domain/custom_field.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

field_definitions defs_with(std::vector<custom_field> fs) {
  field_definitions d;
  d.version = 1;
  d.fields = std::move(fs);
  return d;
}

custom_field def(std::string name, field_type t, bool required = false, bool active = true,
                 std::vector<std::string> options = {}) {
  custom_field f;
  f.name = std::move(name);
  f.type = t;
  f.required = required;
  f.is_active = active;
  f.options = std::move(options);
  return f;
}

std::vector<std::string> failing_keys(const field_definitions& d, std::string_view written,
                                      bool creating = false) {
  std::vector<std::string> keys;
  for (auto& i : check_custom_values(d, field_entity::contact, written, written, creating,
                                     {std::string("body")}))
    keys.push_back(std::get<std::string>(i.loc.back()) + ":" + i.type);
  return keys;
}

} // namespace

TEST(custom_field, names_follow_the_contract_pattern) {
  EXPECT_TRUE(valid_field_name("blood_type"));
  EXPECT_TRUE(valid_field_name("a"));
  EXPECT_TRUE(valid_field_name("a" + std::string(62, '9')));
  EXPECT_FALSE(valid_field_name("a" + std::string(63, '9')));
  EXPECT_FALSE(valid_field_name(""));
  EXPECT_FALSE(valid_field_name("1abc"));
  EXPECT_FALSE(valid_field_name("Blood"));
  EXPECT_FALSE(valid_field_name("blood-type"));
  EXPECT_FALSE(valid_field_name("_x"));
}

TEST(custom_field, only_widening_type_changes_are_safe) {
  EXPECT_TRUE(widening(field_type::text, field_type::textarea));
  EXPECT_TRUE(widening(field_type::integer, field_type::number));
  EXPECT_TRUE(widening(field_type::textarea, field_type::text));
  EXPECT_FALSE(widening(field_type::number, field_type::integer));
  EXPECT_FALSE(widening(field_type::select, field_type::multiselect));
  EXPECT_FALSE(widening(field_type::text, field_type::number));
}

TEST(custom_field, validates_each_type) {
  auto d = defs_with(
      {def("t", field_type::text), def("n", field_type::number), def("i", field_type::integer),
       def("b", field_type::boolean), def("d", field_type::date), def("dt", field_type::datetime),
       def("e", field_type::email), def("p", field_type::phone), def("u", field_type::url),
       def("s", field_type::select, false, true, {"A", "B"}),
       def("m", field_type::multiselect, false, true, {"x", "y"})});
  EXPECT_TRUE(failing_keys(d, R"({"t":"hi","n":1.5,"i":3,"b":false,"d":"2024-02-29",
    "dt":"2024-02-29T10:00:00Z","e":"a@b.co","p":"+4930123","u":"https://x.org/a",
    "s":"A","m":["x","y"],"free":{"any":1}})")
                  .empty());
  EXPECT_EQ(
      failing_keys(d, R"({"t":1,"n":"1","i":1.5,"b":1,"d":"2023-02-29","dt":"2024-02-29",
    "e":"nope","p":"030","u":"ftp://x","s":"C","m":["x","x"]})"),
      (std::vector<std::string>{"t:value_error", "n:value_error", "i:value_error", "b:value_error",
                                "d:value_error", "dt:value_error", "e:value_error", "p:value_error",
                                "u:value_error", "s:value_error", "m:value_error"}));
}

TEST(custom_field, inactive_fields_refuse_writes_and_required_fields_need_a_value_on_create) {
  auto d =
      defs_with({def("gone", field_type::text, false, false), def("need", field_type::text, true)});
  EXPECT_EQ(failing_keys(d, R"({"gone":"x","need":"y"})"),
            (std::vector<std::string>{"gone:value_error"}));
  EXPECT_EQ(failing_keys(d, R"({})", true), (std::vector<std::string>{"need:missing"}));
  EXPECT_EQ(failing_keys(d, R"({"need":null})", true), (std::vector<std::string>{"need:missing"}));
  EXPECT_TRUE(failing_keys(d, R"({"need":"ok"})", true).empty());
  EXPECT_TRUE(failing_keys(d, R"({})", false).empty()); // updates may leave it as it is
}

TEST(custom_field, converts_csv_cells_by_type) {
  EXPECT_EQ(cell_to_json(field_type::integer, "42"), "42");
  EXPECT_FALSE(cell_to_json(field_type::integer, "4.2"));
  EXPECT_EQ(cell_to_json(field_type::boolean, "1"), "true");
  EXPECT_EQ(cell_to_json(field_type::boolean, "false"), "false");
  EXPECT_FALSE(cell_to_json(field_type::boolean, "yes"));
  EXPECT_EQ(cell_to_json(field_type::text, "O+"), "\"O+\"");
  EXPECT_EQ(cell_to_json(field_type::multiselect, "a; b"), R"(["a","b"])");
}

TEST(custom_field, filter_equality_follows_the_stored_type) {
  EXPECT_TRUE(value_equals(R"({"n":7})", "n", "7"));
  EXPECT_TRUE(value_equals(R"({"n":7})", "n", "7.0"));
  EXPECT_FALSE(value_equals(R"({"n":7})", "n", "70"));
  EXPECT_TRUE(value_equals(R"({"b":true})", "b", "true"));
  EXPECT_TRUE(value_equals(R"({"b":true})", "b", "1"));
  EXPECT_FALSE(value_equals(R"({"b":true})", "b", "0"));
  EXPECT_TRUE(value_equals(R"({"s":"Gold"})", "s", "Gold"));
  EXPECT_FALSE(value_equals(R"({"s":"Gold"})", "s", "gold"));
  EXPECT_FALSE(value_equals(R"({"s":"Gold"})", "other", "Gold"));
}

// The fields actor's rules, planned from the store without an actor (domain::field_definitions).
namespace {

field_definitions store_of_two() {
  auto a = def("insurer", field_type::select, false, true, {"a", "b"});
  a.id = 1;
  a.updated_at = 100;
  auto b = def("insurer", field_type::text);
  b.id = 2;
  b.entity = field_entity::deal;
  return defs_with({a, b});
}

errc code_of(const outcome<custom_field>& r) {
  return r ? errc::internal : r.error().code;
}

} // namespace

TEST(field_store, a_name_taken_for_the_entity_is_a_conflict_even_when_inactive) {
  auto s = store_of_two();
  s.fields[0].is_active = false;
  EXPECT_EQ(code_of(s.plan_create(def("insurer", field_type::text), 9, 5)), errc::conflict);
  auto other = def("insurer", field_type::text);
  other.entity = field_entity::company;
  auto ok = s.plan_create(other, 9, 5);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->tenant_id, 9);
  EXPECT_EQ(ok->created_at, 5);
}

TEST(field_store, a_field_of_another_entity_is_not_found) {
  auto s = store_of_two();
  EXPECT_TRUE(s.get(field_entity::contact, 1));
  EXPECT_EQ(code_of(s.get(field_entity::contact, 2)), errc::not_found);
  EXPECT_EQ(code_of(s.get(field_entity::contact, 3)), errc::not_found);
}

TEST(field_store, an_update_keeps_names_sensitivity_narrow_types_and_options) {
  auto s = store_of_two();
  field_patch rename;
  rename.name = "payer";
  EXPECT_EQ(code_of(s.plan_update(field_entity::contact, 1, rename, 200)), errc::conflict);
  field_patch seal;
  seal.sensitive = true;
  EXPECT_EQ(code_of(s.plan_update(field_entity::contact, 1, seal, 200)), errc::conflict);
  field_patch narrow;
  narrow.type = field_type::integer;
  EXPECT_EQ(code_of(s.plan_update(field_entity::contact, 1, narrow, 200)), errc::conflict);
  field_patch drop;
  drop.options = std::vector<std::string>{"a"};
  EXPECT_EQ(code_of(s.plan_update(field_entity::contact, 1, drop, 200)), errc::conflict);
  field_patch add;
  add.options = std::vector<std::string>{"a", "b", "c"};
  add.label = "Insurer";
  auto ok = s.plan_update(field_entity::contact, 1, add, 50);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->options.size(), 3u);
  EXPECT_EQ(ok->label, "Insurer");
  EXPECT_EQ(ok->updated_at, 101);            // never earlier than the stored one
  EXPECT_EQ(s.fields[0].options.size(), 2u); // planning changes nothing
}

TEST(field_store, syntax_issues_are_422_whatever_the_id_and_options_need_a_select) {
  auto s = store_of_two();
  field_patch bad;
  bad.issues.push_back({{"body", "label"}, "too long", "value_error"});
  EXPECT_EQ(code_of(s.plan_update(field_entity::contact, 99, bad, 1)), errc::validation);
  field_patch text_options;
  text_options.type = field_type::text;
  text_options.options = std::vector<std::string>{"a", "b"};
  EXPECT_EQ(code_of(s.plan_update(field_entity::contact, 1, text_options, 1)), errc::validation);
}

TEST(field_store, committed_changes_raise_the_version_and_never_lower_it) {
  auto s = store_of_two();
  auto f = *s.plan_deactivate(field_entity::contact, 1, 300);
  EXPECT_FALSE(f.is_active);
  s.put(f, 7, "");
  EXPECT_EQ(s.version, 7);
  EXPECT_FALSE(s.by_id(1)->is_active);
  s.erase(2, 5);
  EXPECT_EQ(s.version, 7);
  EXPECT_EQ(s.by_id(2), nullptr);
  EXPECT_TRUE(s.of(field_entity::contact, false).empty());
  EXPECT_EQ(s.of(field_entity::contact, true).size(), 1u);
}
