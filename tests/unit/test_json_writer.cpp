// The direct JSON writer of the hot response shapes must produce what a JSON parser reads back.
#include "domain/contact_json.hpp"
#include "domain/json_writer.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <map>

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
  c.owner_id = 12;
  c.source = contact_source::referral;
  c.tags = {"vip", "new"};
  c.custom_fields = R"({"age":42})";
  company co;
  co.id = 3;
  co.name = "Clinic";
  auto full = boost::json::parse(encode_contact_full(c, &co)).as_object();
  EXPECT_EQ(full.size(), 14u);
  EXPECT_EQ(full.at("owner_id").as_int64(), 12);
  EXPECT_EQ(full.at("first_name").as_string(), "Ana \"Quote\"");
  EXPECT_TRUE(full.at("last_name").is_null());
  EXPECT_EQ(full.at("company").at("name").as_string(), "Clinic");
  EXPECT_EQ(full.at("source").as_string(), "referral");
  EXPECT_EQ(full.at("tags").as_array().size(), 2u);
  EXPECT_EQ(full.at("custom_fields").at("age").as_int64(), 42);
  auto page = boost::json::parse(encode_contact_page({&c, &c}, 41, 2, 20)).as_object();
  EXPECT_EQ(page.at("items").as_array().size(), 2u);
  EXPECT_EQ(page.at("items").as_array()[0].as_object().size(), 11u);
  EXPECT_EQ(page.at("pages").as_int64(), 3);
  auto created = boost::json::parse(encode_contact_created(c)).as_object();
  EXPECT_EQ(created.size(), 7u);
}

// The word-at-a-time scan against the byte-by-byte rule: every byte value at every offset of
// strings long enough to cross word boundaries, and random texts.
namespace {
std::string escaped_byte_by_byte(std::string_view s) {
  static const std::map<unsigned char, std::string_view> named = {
      {'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\r', "\\r"},
      {'\t', "\\t"}, {'\b', "\\b"},  {'\f', "\\f"}};
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (auto it = named.find(c); it != named.end())
      out += it->second;
    else if (c < 0x20)
      out += std::string("\\u00") + hex[c >> 4] + hex[c & 15];
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}
} // namespace

TEST(json_writer, escapes_every_byte_at_every_offset_as_the_byte_rule_does) {
  for (std::size_t len : {1u, 7u, 8u, 9u, 16u, 23u}) {
    for (std::size_t at = 0; at < len; ++at) {
      for (int b = 0; b < 256; ++b) {
        std::string s(len, 'a');
        s[at] = static_cast<char>(b);
        std::string out;
        append_json_string(out, s);
        ASSERT_EQ(out, escaped_byte_by_byte(s))
            << "length " << len << ", byte " << b << " at " << at;
      }
    }
  }
  std::uint64_t x = 88172645463325252ull; // xorshift: the same texts every run
  for (int round = 0; round < 2000; ++round) {
    std::string s;
    for (std::size_t i = 0, len = round % 41; i < len; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      s += static_cast<char>(x % 4 == 0 ? x % 0x30 : 0x20 + x % 0xe0); // a quarter low bytes
    }
    std::string out;
    append_json_string(out, s);
    ASSERT_EQ(out, escaped_byte_by_byte(s)) << "round " << round;
  }
}
