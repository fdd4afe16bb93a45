// domain::send_window: at most N sends of a channel in flight, the rest in arrival order.
#include "domain/send_window.hpp"

#include <gtest/gtest.h>

using crm::domain::send_window;

TEST(send_window, admits_up_to_the_limit_per_channel_and_queues_the_rest_in_order) {
  send_window w(2);
  EXPECT_TRUE(w.admit(1, 10));
  EXPECT_TRUE(w.admit(1, 11));
  EXPECT_FALSE(w.admit(1, 12));
  EXPECT_FALSE(w.admit(1, 13));
  EXPECT_TRUE(w.admit(2, 20)); // another channel has its own lane
  EXPECT_EQ(w.in_flight(1), 2u);
  EXPECT_EQ(w.waiting(1), 2u);
  // Each finished send lets the oldest waiting one go, in its place.
  EXPECT_EQ(w.finish(1), 12);
  EXPECT_EQ(w.in_flight(1), 2u);
  EXPECT_EQ(w.finish(1), 13);
  EXPECT_EQ(w.finish(1), std::nullopt);
  EXPECT_EQ(w.in_flight(1), 1u);
  EXPECT_EQ(w.finish(1), std::nullopt);
  EXPECT_EQ(w.in_flight(1), 0u);
  EXPECT_TRUE(w.admit(1, 14));
  EXPECT_EQ(w.in_flight(2), 1u);
}

TEST(send_window, a_finish_without_a_send_and_a_clear_leave_nothing_behind) {
  send_window w(0); // at least one
  EXPECT_EQ(w.limit(), 1u);
  EXPECT_EQ(w.finish(7), std::nullopt);
  EXPECT_TRUE(w.admit(7, 1));
  EXPECT_FALSE(w.admit(7, 2));
  w.clear();
  EXPECT_EQ(w.in_flight(7), 0u);
  EXPECT_EQ(w.waiting(7), 0u);
  EXPECT_TRUE(w.admit(7, 3));
}
