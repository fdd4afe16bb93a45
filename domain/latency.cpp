#include "domain/latency.hpp"

#include <algorithm>
#include <cstdio>

namespace crm::domain {

void latency_histogram::observe(std::chrono::steady_clock::duration d) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  const double seconds = static_cast<double>(us) / 1e6;
  const auto b = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
  counts[static_cast<std::size_t>(b)].fetch_add(1, std::memory_order_relaxed);
  micros.fetch_add(static_cast<std::uint64_t>(us < 0 ? 0 : us), std::memory_order_relaxed);
}

void latency_histogram::write(std::string& out, std::string_view name,
                              std::string_view help) const {
  const std::string n(name);
  out += "# HELP " + n + " " + std::string(help) + "\n# TYPE " + n + " histogram\n";
  std::uint64_t cum = 0;
  char num[32];
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    cum += counts[i].load(std::memory_order_relaxed);
    std::snprintf(num, sizeof num, "%g", bounds[i]);
    out += n + "_bucket{le=\"" + num + "\"} " + std::to_string(cum) + "\n";
  }
  cum += counts[bounds.size()].load(std::memory_order_relaxed);
  out += n + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  std::snprintf(num, sizeof num, "%.6f",
                static_cast<double>(micros.load(std::memory_order_relaxed)) / 1e6);
  out += n + "_sum " + num + "\n" + n + "_count " + std::to_string(cum) + "\n";
}

} // namespace crm::domain
