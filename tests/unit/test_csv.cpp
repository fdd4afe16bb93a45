#include "domain/csv.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {
std::string field(std::string_view v) {
  std::string out;
  append_csv_field(out, v);
  return out;
}
} // namespace

TEST(csv, quotes_fields_with_separators_and_doubles_quotes) {
  EXPECT_EQ(field("plain"), "plain");
  EXPECT_EQ(field("a,b"), "\"a,b\"");
  EXPECT_EQ(field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(field("two\nlines"), "\"two\nlines\"");
}

TEST(csv, escapes_every_cell_a_spreadsheet_would_run_as_a_formula) {
  EXPECT_EQ(field("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
  EXPECT_EQ(field("+HYPERLINK(\"http://x\")"), "\"'+HYPERLINK(\"\"http://x\"\")\"");
  EXPECT_EQ(field("-2+3+cmd|' /C calc'!A0"), "'-2+3+cmd|' /C calc'!A0");
  EXPECT_EQ(field("@SUM(A1)"), "'@SUM(A1)");
  EXPECT_EQ(field("\t=1"), "'\t=1");
  EXPECT_EQ(field("\r=1"), "\"'\r=1\"");
  EXPECT_EQ(field("=1,2"), "\"'=1,2\"");
  EXPECT_EQ(field("+"), "'+");
}

TEST(csv, leaves_plain_numbers_such_as_phones_and_amounts_alone) {
  EXPECT_EQ(field("+5511999990000"), "+5511999990000");
  EXPECT_EQ(field("-12.50"), "-12.50");
  EXPECT_EQ(field("a=b"), "a=b");
}

TEST(csv, an_escaped_cell_imports_back_as_it_was) {
  for (std::string v :
       {"=1+1", "+HYPERLINK(x)", "-x", "@me", "+5511999990000", "'quoted'", "'=already", "plain"}) {
    auto rows = parse_csv(field(v) + "\n");
    ASSERT_TRUE(rows && rows->size() == 1 && (*rows)[0].size() == 1) << v;
    EXPECT_EQ(unescape_csv_formula((*rows)[0][0]), v == "'=already" ? "=already" : v) << v;
  }
}
