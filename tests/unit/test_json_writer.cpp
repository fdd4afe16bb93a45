// The direct JSON writer of the hot response shapes must produce what a JSON parser reads back.
#include "domain/contact_json.hpp"
#include "domain/json_writer.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

using namespace crm::domain;

TEST(json_writer, escapes_quotes_backslashes_and_control_characters) {
  std::string out;
  append_json_string(out, std::string("a\"b\\c\n\t\x01 é", 11));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001 é\"");
  auto v = boost::json::parse(out);
  EXPECT_EQ(v.as_string(), std::string("a\"b\\c\n\t\x01 é", 11));
}

TEST(json_writer, writes_nested_objects_arrays_and_nulls_with_commas) {
  std::string out;
  json_writer w(out);
  w.begin_object();
  w.key("a").value(std::int64_t{1});
  w.key("b").begin_array().value("x").null().value(true).end_array();
  w.key("c").nullable(std::optional<std::string>{});
  w.key("d").raw(R"({"k":[1,2]})");
  w.end_object();
  EXPECT_EQ(out, R"({"a":1,"b":["x",null,true],"c":null,"d":{"k":[1,2]}})");
}

TEST(json_writer, contact_shapes_parse_back_with_every_field) {
  contact c;
  c.id = 7;
  c.first_name = "Ana \"Quote\"";
  c.email = "ana@x.io";
  c.company_id = 3;
  c.source = contact_source::referral;
  c.tags = {"vip", "new"};
  c.custom_fields = R"({"age":42})";
  company co;
  co.id = 3;
  co.name = "Clinic";
  auto full = boost::json::parse(encode_contact_full(c, &co)).as_object();
  EXPECT_EQ(full.size(), 13u);
  EXPECT_EQ(full.at("first_name").as_string(), "Ana \"Quote\"");
  EXPECT_TRUE(full.at("last_name").is_null());
  EXPECT_EQ(full.at("company").at("name").as_string(), "Clinic");
  EXPECT_EQ(full.at("source").as_string(), "referral");
  EXPECT_EQ(full.at("tags").as_array().size(), 2u);
  EXPECT_EQ(full.at("custom_fields").at("age").as_int64(), 42);
  auto page = boost::json::parse(encode_contact_page({&c, &c}, 41, 2, 20)).as_object();
  EXPECT_EQ(page.at("items").as_array().size(), 2u);
  EXPECT_EQ(page.at("items").as_array()[0].as_object().size(), 10u);
  EXPECT_EQ(page.at("pages").as_int64(), 3);
  auto created = boost::json::parse(encode_contact_created(c)).as_object();
  EXPECT_EQ(created.size(), 7u);
}
