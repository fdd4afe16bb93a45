// Unit tests for domain/clock: the RFC 3339 text every timestamp in the API is written and
// filtered in (contract §1, list filters `created_after` and friends).
#include "domain/clock.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

constexpr std::int64_t contract_example = 1'795'256'130'123'456; // 2026-11-21T10:15:30.123456Z

} // namespace

TEST(clock, formats_epoch_with_six_fraction_digits_and_z) {
  EXPECT_EQ(format_rfc3339(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(format_rfc3339(1), "1970-01-01T00:00:00.000001Z");
}

TEST(clock, formats_contract_example) {
  EXPECT_EQ(format_rfc3339(contract_example), "2026-11-21T10:15:30.123456Z");
}

TEST(clock, formats_instants_before_1970) {
  EXPECT_EQ(format_rfc3339(-1), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(format_rfc3339(-14'182'940'000'000), "1969-07-20T20:17:40.000000Z");
  EXPECT_EQ(format_rfc3339(-62'135'596'800'000'000), "0001-01-01T00:00:00.000000Z");
}

TEST(clock, formats_leap_days) {
  EXPECT_EQ(format_rfc3339(951'782'400'000'000), "2000-02-29T00:00:00.000000Z");
  EXPECT_EQ(format_rfc3339(1'709'251'199'000'000), "2024-02-29T23:59:59.000000Z");
}

TEST(clock, formats_extreme_values_without_overflow) {
  EXPECT_FALSE(format_rfc3339(INT64_MIN).empty());
  EXPECT_FALSE(format_rfc3339(INT64_MAX).empty());
  EXPECT_EQ(format_rfc3339(253'402'300'799'999'999), "9999-12-31T23:59:59.999999Z");
}

TEST(clock, parses_contract_example) {
  EXPECT_EQ(parse_rfc3339("2026-11-21T10:15:30.123456Z"), contract_example);
}

TEST(clock, round_trips_format_and_parse) {
  for (const std::int64_t t :
       {std::int64_t{0}, std::int64_t{-1}, contract_example, std::int64_t{951'782'400'000'000},
        std::int64_t{253'402'300'799'999'999}, std::int64_t{-62'135'596'800'000'000}}) {
    EXPECT_EQ(parse_rfc3339(format_rfc3339(t)), t) << format_rfc3339(t);
  }
  // One step every ~37 days with an odd fraction, 1900..2100, covers every month and leap rule.
  for (std::int64_t t = -2'208'988'800'000'000; t < 4'102'444'800'000'000; t += 3'214'567'891'234) {
    ASSERT_EQ(parse_rfc3339(format_rfc3339(t)), t) << format_rfc3339(t);
  }
}

TEST(clock, applies_numeric_offsets) {
  EXPECT_EQ(parse_rfc3339("2026-11-21T12:15:30.123456+02:00"), contract_example);
  EXPECT_EQ(parse_rfc3339("2026-11-21T05:45:30.123456-04:30"), contract_example);
  EXPECT_EQ(parse_rfc3339("2026-11-21T10:15:30.123456+00:00"), contract_example);
  EXPECT_EQ(parse_rfc3339("2026-11-21T10:15:30.123456-00:00"), contract_example);
  // An offset can move the instant across a day, month and year boundary.
  EXPECT_EQ(parse_rfc3339("2027-01-01T01:00:00+02:00"), parse_rfc3339("2026-12-31T23:00:00Z"));
}

TEST(clock, accepts_lower_case_and_space_separator) {
  EXPECT_EQ(parse_rfc3339("2026-11-21t10:15:30.123456z"), contract_example);
  EXPECT_EQ(parse_rfc3339("2026-11-21 10:15:30.123456Z"), contract_example);
}

TEST(clock, parses_date_alone_as_midnight_utc) {
  EXPECT_EQ(parse_rfc3339("2026-11-21"), 1'795'219'200'000'000);
  EXPECT_EQ(parse_rfc3339("1970-01-01"), 0);
}

TEST(clock, parses_short_fractions_as_fractions_of_a_second) {
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:00.5Z"), 500'000);
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:00.000001Z"), 1);
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:01Z"), 1'000'000);
}

TEST(clock, truncates_fractions_longer_than_microseconds) {
  EXPECT_EQ(parse_rfc3339("2026-11-21T10:15:30.1234567Z"), contract_example);
  EXPECT_EQ(parse_rfc3339("2026-11-21T10:15:30.123456999999999Z"), contract_example);
}

TEST(clock, accepts_leap_days_only_in_leap_years) {
  EXPECT_EQ(parse_rfc3339("2000-02-29T00:00:00Z"), 951'782'400'000'000);
  EXPECT_TRUE(parse_rfc3339("2024-02-29"));
  EXPECT_FALSE(parse_rfc3339("2023-02-29"));
  EXPECT_FALSE(parse_rfc3339("1900-02-29")); // divisible by 100, not by 400
  EXPECT_FALSE(parse_rfc3339("2100-02-29"));
}

TEST(clock, rejects_impossible_dates_and_times) {
  for (const char* text :
       {"2026-02-30", "2026-02-30T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z",
        "2026-00-10T00:00:00Z", "2026-01-00T00:00:00Z", "2026-01-32T00:00:00Z",
        "2026-11-21T24:00:00Z", "2026-11-21T10:60:00Z", "2026-11-21T10:15:60Z",
        "2026-11-21T10:15:30+24:00", "2026-11-21T10:15:30+02:60"}) {
    EXPECT_FALSE(parse_rfc3339(text)) << text;
  }
}

TEST(clock, rejects_text_that_is_not_rfc3339) {
  for (const char* text : {"",
                           "2026",
                           "2026-11",
                           "2026-1-21",
                           "26-11-21",
                           "2026/11/21",
                           "2026-11-21T",
                           "2026-11-21T10:15",
                           "2026-11-21T10:15:30",
                           "2026-11-21T10:15:30.Z",
                           "2026-11-21T10:15:30.123456",
                           "2026-11-21T10:15:30Zjunk",
                           "2026-11-21T10:15:30+02",
                           "2026-11-21T10:15:30+0200",
                           "2026-11-21T10:15:30 +02:00",
                           " 2026-11-21T10:15:30Z",
                           "2026-11-21T10:15:30Z ",
                           "2026-11-21X10:15:30Z",
                           "2026-11-21T1a:15:30Z",
                           "+2026-11-21T10:15:30Z",
                           "2026-11-21junk",
                           "1732184130"}) {
    EXPECT_FALSE(parse_rfc3339(text)) << text;
  }
  EXPECT_FALSE(parse_rfc3339(std::string_view("2026-11-21\0", 11)));
}

TEST(clock, now_is_recent_and_consistent_with_now_seconds) {
  const std::int64_t micros = now_micros();
  EXPECT_GT(micros, 1'700'000'000'000'000); // after 2023-11
  const std::int64_t seconds = now_seconds();
  EXPECT_GE(seconds, micros / 1'000'000);
  EXPECT_LE(seconds, micros / 1'000'000 + 60);
}
