// Per actor type: messages handled, mailbox depth and processing time, exported by /metrics.
#pragma once
#include "domain/latency.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

namespace crm::actors {

struct actor_meter {
  explicit actor_meter(std::string n) : name(std::move(n)) {}
  std::string name;
  std::atomic<std::uint64_t> messages{0};
  std::atomic<std::uint64_t> nanos{0};
  std::atomic<std::int64_t> mailbox{0}; // sum over the live instances
  std::atomic<std::int64_t> instances{0};
  std::atomic<std::uint64_t> restarts{0}; // failures the supervisor recovered from
};

// Group commit: the batches of record actors, the writes they carried, and the transactions
// that carried them (one transaction may carry the batches of several tenants).
struct commit_meter {
  domain::latency_histogram latency; // carecrm_group_commit_seconds
  std::atomic<std::uint64_t> transactions{0};
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> failures{0};
};
commit_meter& group_commits();

// Automation and messaging outcomes: what an operator watches to see that deliveries and runs
// go through (docs/automation.md, docs/channels.md).
struct automation_meter {
  std::atomic<std::uint64_t> runs_succeeded{0};
  std::atomic<std::uint64_t> runs_failed{0};
  std::atomic<std::uint64_t> deliveries_delivered{0}; // attempts answered 2xx
  std::atomic<std::uint64_t> deliveries_failed{0};    // attempts that will be retried or gave up
  std::atomic<std::uint64_t> deliveries_given_up{0};  // deliveries failed for good
  std::atomic<std::uint64_t> messages_received{0};    // inbound channel messages stored
  std::atomic<std::uint64_t> messages_sent{0};
  std::atomic<std::uint64_t> messages_failed{0}; // outbound messages failed for good
};
automation_meter& automation_counts();

// AI agents (docs/ai.md): decisions by provider and intent, hand-offs by reason, provider calls
// by outcome and their latency. Indexes follow domain::ai_provider, domain::ai::intent and
// domain::ai::handoff_reason.
struct ai_meter {
  static constexpr std::size_t providers = 2, intents = 9, reasons = 7;
  std::atomic<std::uint64_t> replies[providers][intents]{};
  std::atomic<std::uint64_t> handoffs[reasons]{};
  std::atomic<std::uint64_t> calls_ok[providers]{};
  std::atomic<std::uint64_t> calls_failed[providers]{};
  std::atomic<std::uint64_t> latency_micros[providers]{};
  std::atomic<std::uint64_t> latency_count[providers]{};
};
ai_meter& ai_counts();

// The shared inbox (docs/channels.md "Response times"), by channel type (domain::channel_type):
// conversations opened, and histograms of the time from a conversation's opening to its first
// response and to its resolution. Per team or assignee they are GET /reports/conversations's
// (as labels their ids would grow without bound).
struct inbox_meter {
  static constexpr std::size_t types = 5;
  static constexpr std::array<double, 12> bounds{30,   60,   120,   300,   600,   1800,
                                                 3600, 7200, 14400, 28800, 86400, 259200};
  struct histogram {
    std::atomic<std::uint64_t> buckets[bounds.size() + 1]{}; // the last: above every bound
    std::atomic<std::uint64_t> micros{0};
    void observe(std::int64_t micros);
  };
  std::atomic<std::uint64_t> opened[types]{};
  histogram first_response[types];
  histogram resolution[types];
};
inbox_meter& inbox_counts();

// Process-wide: metrics describe the process, whatever the number of actor systems.
actor_meter& meter(const std::string& actor_type);

// Appends the Prometheus text lines of every actor type.
void write_actor_metrics(std::string& out);

// A failure a tenant supervisor recovered from (GET /console/data "incidents"): when, whose
// child, and why, as CAF rendered the exit reason.
struct incident {
  std::int64_t at = 0; // Unix microseconds
  std::int64_t tenant_id = 0;
  std::string child;
  std::string reason;
};
inline constexpr std::size_t incidents_kept = 50;
void note_incident(incident i);
// The last `incidents_kept`, oldest first.
std::deque<incident> recent_incidents();

} // namespace crm::actors
