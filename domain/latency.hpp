// A latency histogram for the Prometheus text format (carecrm_*_seconds): counts per bucket,
// lock-free, so that a background writer (the group committer, the audit writer) can observe
// every transaction it commits at the cost of two relaxed atomic adds.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace crm::domain {

struct latency_histogram {
  static constexpr std::array<double, 11> bounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                 0.05,   0.1,   0.25,   0.5,   1};
  std::array<std::atomic<std::uint64_t>, bounds.size() + 1> counts{}; // the last: above all
  std::atomic<std::uint64_t> micros{0};

  void observe(std::chrono::steady_clock::duration d);
  // `# HELP`, `# TYPE` and the cumulative `_bucket`, `_sum` and `_count` lines of `name`.
  void write(std::string& out, std::string_view name, std::string_view help) const;
};

} // namespace crm::domain
