// HTTP request counts and latency histograms per route template, method and status, in the
// Prometheus text format. Recording is lock-free: one slot of atomics per route.
#pragma once
#include "http/message.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace crm::http {

class router;

class http_metrics {
public:
  static constexpr std::array<double, 14> buckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  static constexpr std::array<int, 20> statuses = {200, 201, 202, 204, 400, 401, 403, 404, 405, 408,
                                                   409, 413, 415, 422, 429, 431, 500, 502, 503, 0};

  http_metrics();
  ~http_metrics();
  // One slot per route of `r` (call once per router, before serving).
  void add_routes(const router& r);

  // `route_id`: the index returned by `slot_of`; unmatched requests use `unmatched`.
  std::size_t slot_of(const router& r, std::size_t route_index) const;
  std::size_t unmatched(verb method) const;
  void record(std::size_t slot, int status, double seconds);

  void write(std::string& out) const;

  // Open client connections, and those refused at the --max-connections cap.
  std::atomic<std::int64_t> connections{0};
  std::atomic<std::uint64_t> connections_refused{0};

private:
  struct slot;
  std::vector<std::unique_ptr<slot>> slots_;
  std::vector<std::pair<const router*, std::size_t>> offsets_;
};

} // namespace crm::http
