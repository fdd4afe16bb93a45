#include "domain/rate_limit.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

TEST(rate_limit, a_burst_of_the_quota_then_refusals_with_retry_after) {
  rate_limiter l({"user", 60, 60}); // one a second, bursts of 60
  for (int i = 0; i < 60; ++i) {
    auto d = l.take("u1", 100.0);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.remaining, 59 - i);
  }
  auto refused = l.take("u1", 100.0);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.remaining, 0);
  EXPECT_EQ(refused.retry_after, 1);
  EXPECT_EQ(refused.reset, 60);
  EXPECT_TRUE(l.take("u2", 100.0).allowed) << "keys have buckets of their own";
  EXPECT_FALSE(l.take("u1", 100.5).allowed);
  auto later = l.take("u1", 101.0); // one second refilled one request
  EXPECT_TRUE(later.allowed);
  EXPECT_EQ(later.remaining, 0);
}

TEST(rate_limit, refills_continuously_up_to_the_quota) {
  rate_limiter l({"tenant", 10, 10});
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(l.take("t", 0).allowed);
  EXPECT_FALSE(l.take("t", 0).allowed);
  auto d = l.take("t", 1000); // long idle: full again, never more than the quota
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 9);
  EXPECT_EQ(d.reset, 1);
}

TEST(rate_limit, a_clock_going_backwards_grants_nothing) {
  rate_limiter l({"user", 2, 60});
  EXPECT_TRUE(l.take("u", 50).allowed);
  EXPECT_TRUE(l.take("u", 50).allowed);
  EXPECT_FALSE(l.take("u", 10).allowed);
  EXPECT_FALSE(l.take("u", 50).allowed);
}

TEST(rate_limit, a_zero_quota_is_off) {
  rate_limiter l({"login", 0, 60});
  EXPECT_FALSE(l.enabled());
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(l.take("ip", 0).allowed);
  EXPECT_EQ(l.keys(), 0U);
}

TEST(rate_limit, full_buckets_are_dropped_when_a_shard_grows) {
  rate_limiter l({"address", 5, 60});
  for (int i = 0; i < 100000; ++i) l.take("10.0." + std::to_string(i), i * 0.001);
  // Buckets refill in 12 s: only the last few seconds' keys can still be held.
  EXPECT_LT(l.keys(), 16U * 4096U);
  // A bucket in use is never dropped: the limit still holds for it.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(l.take("10.0.99999", 100.0).allowed);
  for (int i = 0; i < 100000; ++i) l.take("10.1." + std::to_string(i), 100.0);
  EXPECT_FALSE(l.take("10.0.99999", 100.0).allowed);
}
