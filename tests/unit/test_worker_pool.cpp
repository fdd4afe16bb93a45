#include "net/worker_pool.hpp"

#include <gtest/gtest.h>

#include <future>
#include <stdexcept>

using crm::net::worker_pool;

TEST(worker_pool, a_job_that_throws_is_logged_and_the_worker_goes_on) {
  worker_pool pool(1, 8);
  std::promise<int> later;
  ASSERT_TRUE(pool.try_submit([] { throw std::runtime_error("boom"); }));
  ASSERT_TRUE(pool.try_submit([] { throw 42; })); // not even a std::exception
  ASSERT_TRUE(pool.try_submit([&later] { later.set_value(7); }));
  auto f = later.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(f.get(), 7);
}
