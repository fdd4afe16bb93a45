// Unit tests for domain/deal: money as exact cents (parsing, formatting, 128-bit sums, the
// half-up rounding of weighted sums), ISO 4217 codes, dates, the stage rules of a pipeline, the
// list order (nulls, direction, ties) and CSV cells (docs/pipeline.md).
#include "domain/deal.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace crm::domain;

TEST(deal_money, parses_decimal_strings_into_cents) {
  EXPECT_EQ(parse_amount("0"), 0);
  EXPECT_EQ(parse_amount("1500"), 150000);
  EXPECT_EQ(parse_amount("1500.5"), 150050);
  EXPECT_EQ(parse_amount("1500.05"), 150005);
  EXPECT_EQ(parse_amount("0.01"), 1);
  EXPECT_EQ(parse_amount("9999999999999.99"), 999999999999999);
}

TEST(deal_money, rejects_anything_but_plain_decimals) {
  for (const char* bad : {"", "-", "-5", "+5", "1e3", "12.345", "1.", ".5", "1,5", " 1", "1 ",
                          "0x10", "NaN", "inf", "10000000000000", "1.2.3", "١٢"})
    EXPECT_FALSE(parse_amount(bad).has_value()) << bad;
}

TEST(deal_money, formats_cents_with_two_decimals) {
  EXPECT_EQ(format_cents(0), "0.00");
  EXPECT_EQ(format_cents(5), "0.05");
  EXPECT_EQ(format_cents(150050), "1500.50");
  EXPECT_EQ(format_cents(-150), "-1.50");
}

TEST(deal_money, sums_of_maximal_amounts_stay_exact_beyond_64_bits) {
  money_sum total = 0;
  const std::int64_t max = *parse_amount("9999999999999.99");
  for (int i = 0; i < 100000; ++i) total += max;
  EXPECT_EQ(format_cents(total), "999999999999999000.00");
}

TEST(deal_money, weighted_sums_round_half_up_to_cents_once) {
  // 1510.05 × 25 % = 377.5125 → 377.51; 0.02 × 25 % = 0.005 → 0.01 (half up).
  EXPECT_EQ(format_cents(round_weighted(money_sum{151005} * 25)), "377.51");
  EXPECT_EQ(format_cents(round_weighted(money_sum{2} * 25)), "0.01");
  EXPECT_EQ(format_cents(round_weighted(money_sum{1} * 25)), "0.00");
  // Rounded once after summing: three deals of 0.01 at 50 % are 0.015 → 0.02, not 3 × 0.01.
  EXPECT_EQ(format_cents(round_weighted(money_sum{3} * 50)), "0.02");
}

TEST(deal_currency, knows_iso_4217_codes_from_iso_codes) {
  for (const char* code : {"USD", "EUR", "BRL", "GBP", "JPY", "CHF"})
    EXPECT_TRUE(is_currency(code));
  for (const char* code : {"usd", "XXY", "US", "USDD", "", "ABC"}) EXPECT_FALSE(is_currency(code));
}

TEST(deal_dates, round_trip_and_reject_impossible_dates) {
  auto d = parse_date("2026-12-31");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(format_date(*d), "2026-12-31");
  EXPECT_EQ(parse_date("1970-01-01"), 0);
  EXPECT_EQ(parse_date("1970-01-02"), 1);
  for (const char* bad :
       {"2026-02-30", "2026-13-01", "2026-1-01", "20261231", "2026-12-31T00:00", "", "0000-01-01"})
    EXPECT_FALSE(parse_date(bad).has_value()) << bad;
}

TEST(deal_stages, default_pipeline_has_the_six_stages_in_order) {
  auto s = default_stages();
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].name, "Lead");
  EXPECT_EQ(s[0].probability, 10);
  EXPECT_EQ(s[3].name, "Negotiation");
  EXPECT_EQ(s[3].probability, 75);
  EXPECT_EQ(s[4].kind, stage_kind::won);
  EXPECT_EQ(s[4].probability, 100);
  EXPECT_EQ(s[5].kind, stage_kind::lost);
  for (std::size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i].position, static_cast<int>(i));
  EXPECT_EQ(stage_rules_broken(s), "");
}

TEST(deal_stages, rules_need_an_open_stage_and_exactly_one_won_and_lost) {
  auto s = default_stages();
  auto no_open = s;
  std::erase_if(no_open, [](auto& x) { return x.kind == stage_kind::open; });
  EXPECT_NE(stage_rules_broken(no_open), "");
  auto two_won = s;
  two_won[0].kind = stage_kind::won;
  EXPECT_NE(stage_rules_broken(two_won), "");
  auto no_lost = s;
  no_lost.pop_back();
  EXPECT_NE(stage_rules_broken(no_lost), "");
  auto same_name = s;
  same_name[1].name = "lead";
  EXPECT_NE(stage_rules_broken(same_name), "");
}

namespace {
deal make(std::int64_t id, std::optional<std::int64_t> amount) {
  deal d;
  d.id = id;
  d.amount = amount;
  return d;
}
} // namespace

TEST(deal_list, nulls_sort_last_ascending_first_descending_ties_on_id) {
  std::vector<deal> ds = {make(1, 500), make(2, std::nullopt), make(3, 100), make(4, 500)};
  deal_query q;
  q.sort = deal_sort::amount;
  auto order = [&] {
    std::sort(ds.begin(), ds.end(), [&](auto& a, auto& b) { return deal_before(a, b, q); });
    std::vector<std::int64_t> ids;
    for (auto& d : ds) ids.push_back(d.id);
    return ids;
  };
  EXPECT_EQ(order(), (std::vector<std::int64_t>{3, 1, 4, 2}));
  q.descending = true;
  EXPECT_EQ(order(), (std::vector<std::int64_t>{2, 1, 4, 3}));
  q.sort = deal_sort::id;
  EXPECT_EQ(order(), (std::vector<std::int64_t>{4, 3, 2, 1}));
}

TEST(deal_list, filters_combine_and_amount_bounds_are_inclusive) {
  auto d = make(1, 1000);
  d.title = "Implant Plan";
  d.currency = "BRL";
  deal_query q;
  q.amount_min = 1000;
  q.amount_max = 1000;
  q.search = "plan";
  EXPECT_TRUE(deal_matches(d, q));
  q.currency = "USD";
  EXPECT_FALSE(deal_matches(d, q));
  q.currency.reset();
  q.amount_min = 1001;
  EXPECT_FALSE(deal_matches(d, q));
  q.amount_min.reset();
  EXPECT_FALSE(deal_matches(make(2, std::nullopt), q)) << "no amount never matches a bound";
}

TEST(deal_csv, escapes_formula_cells_and_quotes) {
  auto d = make(7, 100);
  d.title = "=HYPERLINK(\"x\")";
  d.currency = "USD";
  auto row = deal_csv_row(d);
  EXPECT_EQ(row.rfind("7,\"'=HYPERLINK(\"\"x\"\")\",1.00,USD,", 0), 0u) << row;
  d.title = "@cmd";
  EXPECT_NE(deal_csv_row(d).find(",'@cmd,"), std::string::npos);
  d.title = "plain";
  EXPECT_NE(deal_csv_row(d).find(",plain,"), std::string::npos);
}
