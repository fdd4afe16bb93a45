#include "persistence/log_limiter.hpp"

#include <gtest/gtest.h>

namespace {

using crm::log_limiter;
using std::chrono::seconds;

TEST(log_limiter, writes_a_cause_once_a_period_and_counts_what_it_held_back) {
  log_limiter limit(seconds(10));
  auto t0 = log_limiter::clock::time_point{} + seconds(1000);
  std::uint64_t held = 99;
  EXPECT_TRUE(limit.admit("10.0.0.2:4000", held, t0)); // the first at once
  EXPECT_EQ(held, 0u);
  for (int i = 1; i <= 125; ++i)
    EXPECT_FALSE(limit.admit("10.0.0.2:4000", held, t0 + seconds(i % 10)));
  // Another cause is not held back by the first.
  EXPECT_TRUE(limit.admit("10.0.0.3:4000", held, t0 + seconds(1)));
  EXPECT_EQ(held, 0u);
  // A period later: written, with the number held back since the last line.
  EXPECT_TRUE(limit.admit("10.0.0.2:4000", held, t0 + seconds(10)));
  EXPECT_EQ(held, 125u);
  // Over: every occurrence counted, and the next one is a first again.
  EXPECT_EQ(limit.clear("10.0.0.2:4000"), 127u);
  EXPECT_EQ(limit.clear("10.0.0.2:4000"), 0u);
  EXPECT_TRUE(limit.admit("10.0.0.2:4000", held, t0 + seconds(11)));
  EXPECT_EQ(held, 0u);
}

} // namespace
