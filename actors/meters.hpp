// Per actor type: messages handled, mailbox depth and processing time, exported by /metrics.
#pragma once
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

// Group commit: transactions committed by record actors and the writes they carried.
struct commit_meter {
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> failures{0};
};
commit_meter& group_commits();

// Process-wide: metrics describe the process, whatever the number of actor systems.
actor_meter& meter(const std::string& actor_type);

// Appends the Prometheus text lines of every actor type.
void write_actor_metrics(std::string& out);

} // namespace crm::actors
