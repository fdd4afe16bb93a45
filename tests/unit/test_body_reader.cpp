// Request body validation: every failing field reported once, with loc and type.
#include "http/json.hpp"

#include <gtest/gtest.h>

#include <set>

using crm::http::body_reader;

namespace {
std::set<std::pair<std::string, std::string>> issues_of(body_reader& b) {
  std::set<std::pair<std::string, std::string>> out;
  for (auto& i : b.issues()) {
    std::string loc;
    for (auto& p : i.loc)
      loc += "/" + (std::holds_alternative<std::string>(p)
                        ? std::get<std::string>(p)
                        : std::to_string(std::get<std::int64_t>(p)));
    out.emplace(loc, i.type);
  }
  return out;
}
} // namespace

TEST(body_reader, reports_malformed_json_at_body) {
  body_reader b("{not json");
  EXPECT_FALSE(b.valid_json());
  EXPECT_FALSE(b.finish());
  EXPECT_EQ(issues_of(b),
            (std::set<std::pair<std::string, std::string>>{{"/body", "json_invalid"}}));
}

TEST(body_reader, reports_the_place_of_a_nul_character_in_a_key_or_a_value) {
  using set = std::set<std::pair<std::string, std::string>>;
  body_reader value(R"({"a": {"b": [1, "x\u0000"]}})");
  EXPECT_FALSE(value.finish());
  EXPECT_EQ(issues_of(value), (set{{"/body/a/b/1", "value_error"}}));
  body_reader key(R"({"k\u0000": 1})");
  EXPECT_FALSE(key.finish());
  EXPECT_EQ(issues_of(key), (set{{std::string("/body/k\0", 8), "value_error"}}));
  // An escaped backslash followed by "u0000" is text, not U+0000.
  body_reader text(R"({"a": "\\u0000"})");
  EXPECT_TRUE(text.valid_json());
  EXPECT_TRUE(text.issues().empty());
}

TEST(body_reader, reports_a_non_object_body) {
  body_reader b("[1,2]");
  EXPECT_FALSE(b.finish());
  EXPECT_EQ(issues_of(b).count({"/body", "json_invalid"}), 1u);
}

TEST(body_reader, collects_every_failing_field_in_one_pass) {
  body_reader b(R"({"name": 5, "flag": "yes", "n": "x", "extra": 1, "id": 3})");
  b.text("name", true);
  b.text("missing", true);
  b.boolean("flag", false);
  b.integer("n", false);
  EXPECT_FALSE(b.finish());
  EXPECT_EQ(issues_of(b), (std::set<std::pair<std::string, std::string>>{
                              {"/body/name", "string_type"},
                              {"/body/missing", "missing"},
                              {"/body/flag", "bool_parsing"},
                              {"/body/n", "int_parsing"},
                              {"/body/extra", "extra_forbidden"},
                              {"/body/id", "extra_forbidden"},
                          }));
}

TEST(body_reader, enforces_lengths_in_code_points_after_trimming) {
  body_reader b(R"({"a": "  ", "b": "ééé", "c": "abcd"})");
  b.text("a", true, {.min = 1, .max = 0, .trim = true});
  EXPECT_FALSE(b.text("b", true, {.min = 0, .max = 3}).has_value() == false);
  b.text("c", true, {.min = 0, .max = 3});
  EXPECT_FALSE(b.finish());
  EXPECT_EQ(issues_of(b), (std::set<std::pair<std::string, std::string>>{
                              {"/body/a", "string_too_short"}, {"/body/c", "string_too_long"}}));
}

TEST(body_reader, rejects_values_outside_an_enumeration) {
  body_reader b(R"({"role": "root"})");
  EXPECT_FALSE(b.one_of("role", true, {"viewer", "admin"}).has_value());
  ASSERT_EQ(b.issues().size(), 1u);
  EXPECT_EQ(b.issues()[0].type, "enum");
  EXPECT_EQ(b.issues()[0].msg, "Input should be 'viewer' or 'admin'");
}

TEST(body_reader, accepts_a_valid_body) {
  body_reader b(R"({"email": "a@b.co", "active": true, "n": 3})");
  EXPECT_EQ(b.text("email", true), "a@b.co");
  EXPECT_EQ(b.boolean("active", true), true);
  EXPECT_EQ(b.integer("n", true), 3);
  EXPECT_TRUE(b.finish());
}

TEST(body_reader, a_double_out_of_the_integer_range_is_int_parsing_not_undefined) {
  body_reader b(R"({"a": 1e300, "b": -1e19, "c": 9.3e18, "d": 5.0, "e": 5.5, "f": 1e18})");
  for (auto k : {"a", "b", "c", "e"}) EXPECT_FALSE(b.integer(k, true).has_value()) << k;
  EXPECT_EQ(b.integer("d", true), 5);
  EXPECT_EQ(b.integer("f", true), 1000000000000000000);
  EXPECT_FALSE(b.finish());
  EXPECT_EQ(issues_of(b), (std::set<std::pair<std::string, std::string>>{
                              {"/body/a", "int_parsing"},
                              {"/body/b", "int_parsing"},
                              {"/body/c", "int_parsing"},
                              {"/body/e", "int_parsing"},
                          }));
}
