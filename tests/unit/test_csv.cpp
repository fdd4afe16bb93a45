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

TEST(csv, parses_quoted_fields_line_ends_and_skips_empty_lines) {
  auto rows = parse_csv("a,\"b,\"\"c\"\"\"\r\n\n\"\"\n\"two\nlines\",\nlast");
  using rows_t = std::vector<std::vector<std::string>>;
  ASSERT_TRUE(rows);
  EXPECT_EQ(*rows, (rows_t{{"a", "b,\"c\""}, {"two\nlines", ""}, {"last"}}));
  EXPECT_FALSE(parse_csv("a,b\"c\n"));   // a quote inside an unquoted field
  EXPECT_FALSE(parse_csv("\"a\"b,c\n")); // text after a closing quote
  EXPECT_FALSE(parse_csv("a\n\"open"));  // never closed
}

// The import reads a file of any size one row at a time: the reader gives the rows parse_csv
// gives, checking without storing agrees with reading, and a fault is found where it is.
TEST(csv, a_reader_gives_parse_csvs_rows_one_at_a_time) {
  std::string text;
  for (int i = 0; i < 500; ++i)
    text += std::to_string(i) + ",\"x" + std::string(static_cast<std::size_t>(i % 7), '"') +
            std::string(static_cast<std::size_t>(i % 7), '"') + "\"" + (i % 3 ? "\r\n" : "\n") +
            (i % 50 ? "" : "\n");
  auto all = parse_csv(text);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 500u);
  csv_reader reader(text), checker(text);
  std::vector<std::string> row;
  std::size_t n = 0;
  while (reader.next(&row) == csv_reader::result::row) {
    ASSERT_LT(n, all->size());
    EXPECT_EQ(row, (*all)[n]) << n;
    EXPECT_EQ(checker.next(nullptr), csv_reader::result::row) << n;
    EXPECT_EQ(checker.offset(), reader.offset()) << n;
    ++n;
  }
  EXPECT_EQ(n, 500u);
  EXPECT_EQ(reader.next(&row), csv_reader::result::end);
  EXPECT_EQ(checker.next(nullptr), csv_reader::result::end);

  csv_reader broken("a,b\nc,\"d\"e\nf\n");
  EXPECT_EQ(broken.next(nullptr), csv_reader::result::row);
  EXPECT_EQ(broken.next(nullptr), csv_reader::result::malformed);
  EXPECT_EQ(broken.offset(), 9u); // the e after "d"
}
