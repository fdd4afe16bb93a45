#include "http/metrics.hpp"

#include "http/router.hpp"

#include <cstdio>

namespace crm::http {

struct http_metrics::slot {
  std::string method;
  std::string route;
  std::array<std::atomic<std::uint64_t>, statuses.size()> by_status{};
  std::array<std::atomic<std::uint64_t>, buckets.size() + 1> hist{};
  std::atomic<std::uint64_t> micros{0};
};

http_metrics::http_metrics() {
  for (std::size_t m = 0; m < verb_count; ++m) {
    auto s = std::make_unique<slot>();
    s->method = to_string(static_cast<verb>(m));
    s->route = "unmatched";
    slots_.push_back(std::move(s));
  }
}

http_metrics::~http_metrics() = default;

void http_metrics::add_routes(const router& r) {
  offsets_.emplace_back(&r, slots_.size());
  for (auto& rt : r.routes()) {
    auto s = std::make_unique<slot>();
    s->method = to_string(rt->method);
    s->route = rt->path;
    slots_.push_back(std::move(s));
  }
}

std::size_t http_metrics::slot_of(const router& r, std::size_t route_index) const {
  for (auto& [rp, off] : offsets_)
    if (rp == &r) return off + route_index;
  return 0;
}

std::size_t http_metrics::unmatched(verb method) const {
  return static_cast<std::size_t>(method);
}

void http_metrics::record(std::size_t index, int status, double seconds) {
  if (index >= slots_.size()) return;
  auto& s = *slots_[index];
  std::size_t si = statuses.size() - 1;
  for (std::size_t i = 0; i + 1 < statuses.size(); ++i)
    if (statuses[i] == status) {
      si = i;
      break;
    }
  s.by_status[si].fetch_add(1, std::memory_order_relaxed);
  std::size_t b = 0;
  while (b < buckets.size() && seconds > buckets[b]) ++b;
  s.hist[b].fetch_add(1, std::memory_order_relaxed);
  s.micros.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

void http_metrics::write(std::string& out) const {
  out += "# HELP carecrm_http_connections Open client connections.\n"
         "# TYPE carecrm_http_connections gauge\ncarecrm_http_connections " +
         std::to_string(connections.load(std::memory_order_relaxed)) +
         "\n# HELP carecrm_http_connections_refused_total Connections closed at once because "
         "--max-connections were open.\n# TYPE carecrm_http_connections_refused_total "
         "counter\ncarecrm_http_connections_refused_total " +
         std::to_string(connections_refused.load(std::memory_order_relaxed)) + "\n";
  out +=
      "# HELP carecrm_http_requests_total HTTP requests, per route template, method and status.\n"
      "# TYPE carecrm_http_requests_total counter\n";
  for (auto& s : slots_) {
    for (std::size_t i = 0; i < statuses.size(); ++i) {
      auto n = s->by_status[i].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out += "carecrm_http_requests_total{method=\"" + s->method + "\",route=\"" + s->route +
             "\",status=\"" + (statuses[i] ? std::to_string(statuses[i]) : "other") + "\"} " +
             std::to_string(n) + "\n";
    }
  }
  out += "# HELP carecrm_http_request_duration_seconds Time from request read to response "
         "written.\n# TYPE carecrm_http_request_duration_seconds histogram\n";
  char num[32];
  for (auto& s : slots_) {
    std::uint64_t total = 0;
    for (auto& h : s->hist) total += h.load(std::memory_order_relaxed);
    if (total == 0) continue;
    auto labels = "method=\"" + s->method + "\",route=\"" + s->route + "\"";
    std::uint64_t cum = 0;
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      cum += s->hist[b].load(std::memory_order_relaxed);
      std::snprintf(num, sizeof num, "%g", buckets[b]);
      out += "carecrm_http_request_duration_seconds_bucket{" + labels + ",le=\"" + num + "\"} " +
             std::to_string(cum) + "\n";
    }
    out += "carecrm_http_request_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
           std::to_string(total) + "\n";
    std::snprintf(num, sizeof num, "%.6f", static_cast<double>(s->micros.load()) / 1e6);
    out += "carecrm_http_request_duration_seconds_sum{" + labels + "} " + num + "\n";
    out += "carecrm_http_request_duration_seconds_count{" + labels + "} " + std::to_string(total) +
           "\n";
  }
}

} // namespace crm::http
