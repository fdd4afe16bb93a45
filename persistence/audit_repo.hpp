// The audit trail's storage (docs/compliance.md "Audit trail", migrations 010, 013).
//
// - Changes: `append_audit_sql` / `insert_audit` add rows to audit_pending inside the change's
//   own transaction, so a change is never stored without its audit row, nor the row without it.
// - Reads and security events: `audit_writer` buffers them in memory and appends them, with the
//   pending changes it claims, to the tenants' hash chains (COPY), one transaction every
//   `flush_interval`: one row of audit_blocks per tenant per transaction (up to 1024 events,
//   each with its own hash), read back one event per row through the audit_log view
//   (migration 013). What a crash can lose is what it buffered: at most one interval of reads
//   (plus the transaction in flight). A round claims the pending change rows of the tenants
//   whose reads it writes; every `compact_interval` (and at once for a `flush`), every tenant's.
//   When it cannot keep up or Postgres is down its buffer fills and `record` refuses, and the HTTP
//   layer answers 503 instead of an unaudited read.
#pragma once
#include "domain/audit.hpp"
#include "domain/latency.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace pqxx {
class transaction_base;
}

namespace crm::domain {
class secret_keys;
}

namespace crm::persistence {

class pg_conn;

// The signatures of a chain's head and of a pruning anchor (migration 016): keyed hashes of
// "<seq>:<hash>" under the configured keys, bound to the tenant.
std::string sign_audit_head(const domain::secret_keys& keys, std::int64_t tenant, std::int64_t seq,
                            std::string_view hash, bool anchor = false);
bool audit_head_signed(const domain::secret_keys& keys, std::int64_t tenant, std::int64_t seq,
                       std::string_view hash, std::string_view signature, bool anchor = false);
// Signs every head and anchor stored (migration 016, in its own transaction).
void sign_audit_heads(pqxx::transaction_base& tx, const domain::secret_keys& keys);
class sql_text;

// Inside a change's transaction (group-commit text, or a transaction of its own).
void append_audit_sql(sql_text& out, const std::vector<domain::audit_record>& rows);
void insert_audit(pqxx::transaction_base& tx, const std::vector<domain::audit_record>& rows);

// In a transaction of its own (operator commands).
void record_audit(pg_conn& c, const std::vector<domain::audit_record>& rows);

struct audit_writer_options {
  std::chrono::milliseconds flush_interval{100};
  std::size_t capacity = 65536; // rows buffered before `record` refuses
  std::size_t max_rows_per_transaction = 20000;
  double retention_days = 2192; // 6 years
  // How often every tenant's change rows waiting in audit_pending (already durable) are claimed
  // into the chains; a round with reads claims those of its own tenants each time. Claiming
  // every tenant's at every round made several nodes' writers lock each other's chains' heads
  // (benchmarks/RESULTS.md "Cluster: the audit writers' claims").
  std::chrono::milliseconds compact_interval{1000};
  // Signs each head it writes and checks the one it extends (nothing: unsigned, tests only).
  const domain::secret_keys* keys = nullptr;
};

class audit_writer {
public:
  audit_writer(std::string database_url, audit_writer_options o);
  ~audit_writer();
  audit_writer(const audit_writer&) = delete;
  audit_writer& operator=(const audit_writer&) = delete;

  // Queues a row; false (and counted) when the buffer is full.
  bool record(domain::audit_record r);
  // Runs `done(true)` on the writer's thread once every row recorded before the call, and every
  // pending change committed before it, is in audit_log; `done(false)` when that write failed.
  void flush(std::function<void(bool)> done);
  // Writes what it holds (one last try) and stops.
  void stop();

  std::uint64_t recorded() const { return recorded_.load(std::memory_order_relaxed); }
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  std::uint64_t written() const { return written_.load(std::memory_order_relaxed); }
  std::uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  // Rows chained with texts repaired (make_storable); rows PostgreSQL refused for their content
  // and that were chained escaped (quarantine); rows refused even then, and dropped.
  std::uint64_t sanitized() const { return sanitized_.load(std::memory_order_relaxed); }
  std::uint64_t quarantined() const { return quarantined_.load(std::memory_order_relaxed); }
  std::uint64_t unstorable() const { return unstorable_.load(std::memory_order_relaxed); }
  // Heads found not signed by the configured keys when the writer went to extend them.
  std::uint64_t unverified_heads() const {
    return unverified_heads_.load(std::memory_order_relaxed);
  }
  std::size_t buffered();
  // The writer's transactions that committed, from their first statement to COMMIT.
  const domain::latency_histogram& flush_latency() const { return flush_latency_; }

private:
  void loop();
  bool write_once();

  std::string url_;
  audit_writer_options opts_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<domain::audit_record> buffer_;
  std::vector<std::function<void(bool)>> waiters_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> recorded_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> failures_{0};
  std::atomic<std::uint64_t> sanitized_{0};
  std::atomic<std::uint64_t> quarantined_{0};
  std::atomic<std::uint64_t> unstorable_{0};
  std::atomic<std::uint64_t> unverified_heads_{0};
  domain::latency_histogram flush_latency_;
  // Isolating a row PostgreSQL refused for its content (writer thread only): rounds take at most
  // take_limit_ rows (0: no limit), halved at each refusal, until one row is refused alone; then
  // a strict_ round escapes it (quarantine) and the limit goes.
  std::size_t take_limit_ = 0;
  int rounds_at_limit_ = 0;
  bool strict_ = false;
  std::thread thread_;
};

// Monthly partitions of audit_log: creates the ones from last month to two months ahead, and
// drops those entirely older than `retention_days`, oldest first, recording in audit_pruned
// where each tenant's kept chain starts. Returns the names created and dropped.
struct audit_partitions {
  std::vector<std::string> created;
  std::vector<std::string> dropped;
};
// `keys` sign the anchors; each tenant whose rows a drop removed gets a "prune" row in its
// chain (staged in audit_pending in the same transaction).
audit_partitions maintain_audit_partitions(pg_conn& c, double retention_days,
                                           const domain::secret_keys* keys);

// GET /audit-log: newest first, filtered; `before_seq` is the cursor.
struct audit_filter {
  std::int64_t tenant_id = 0;
  std::optional<std::int64_t> user_id;
  std::optional<std::string> resource;
  std::optional<std::int64_t> resource_id;
  std::optional<std::string> action;
  std::optional<std::string> outcome;
  std::optional<std::int64_t> from;  // at >= (micros)
  std::optional<std::int64_t> until; // at < (micros)
  std::optional<std::int64_t> before_seq;
  std::optional<std::int64_t> after_seq; // exports walk oldest first
  int limit = 50;
  bool oldest_first = false;
};

struct audit_row {
  std::int64_t seq = 0;
  domain::audit_record record;
  std::string hash; // hex
  // False for a block the audit_log view could not parse (migration 015): then the row stands
  // for the whole block, `record.action` is "unreadable" and `record.query` says why.
  bool readable = true;
};

std::vector<audit_row> query_audit(pg_conn& c, const audit_filter& f);
// One row as the JSON object of GET /audit-log (and of the NDJSON export).
void append_audit_json(std::string& out, const audit_row& r);
// The CSV header line and one row.
const char* audit_csv_header();
void append_audit_csv(std::string& out, const audit_row& r);

// `carecrm audit verify`: walks the tenant's chain from where retention left it.
struct audit_verification {
  bool ok = true;
  std::int64_t rows = 0;
  std::int64_t first_seq = 0;
  std::int64_t last_seq = 0;
  std::int64_t pruned_through = 0;
  std::optional<std::int64_t> broken_seq; // the first row that does not hold
  std::string reason;
};
// Also checks the head's and the anchor's signatures with `keys`.
audit_verification verify_audit_chain(pg_conn& c, std::int64_t tenant,
                                      const domain::secret_keys& keys);

// What the writer chains when a head it extends is not signed by the configured keys.
inline constexpr std::string_view audit_head_unverified = "head_unverified";

} // namespace crm::persistence
