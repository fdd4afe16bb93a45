#include "domain/latency.hpp"

#include <gtest/gtest.h>

using namespace std::chrono_literals;

// The histogram the group committer and the audit writer time their transactions with: each
// observation lands in the first bucket whose bound it does not exceed, and the text is
// Prometheus's cumulative form.
TEST(latency, observations_are_counted_cumulatively_in_the_text_format) {
  crm::domain::latency_histogram h;
  h.observe(300us); // ≤ 0.5 ms
  h.observe(1ms);   // ≤ 1 ms (a bound is inclusive)
  h.observe(40ms);  // ≤ 50 ms
  h.observe(3s);    // above every bound
  std::string out;
  h.write(out, "carecrm_x_seconds", "X.");
  EXPECT_NE(out.find("# TYPE carecrm_x_seconds histogram\n"), std::string::npos) << out;
  EXPECT_NE(out.find("carecrm_x_seconds_bucket{le=\"0.0005\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("carecrm_x_seconds_bucket{le=\"0.001\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("carecrm_x_seconds_bucket{le=\"0.025\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("carecrm_x_seconds_bucket{le=\"0.05\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("carecrm_x_seconds_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("carecrm_x_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("carecrm_x_seconds_sum 3.041300\n"), std::string::npos) << out;
  EXPECT_NE(out.find("carecrm_x_seconds_count 4\n"), std::string::npos) << out;
}
