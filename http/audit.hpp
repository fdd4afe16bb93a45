// What the HTTP layer audits (docs/compliance.md "Audit trail"). Every API route has an audit
// rule, kept in one table (audit.cpp), that says what the route touches and how it is audited:
//
// - read / list: a read of health data, recorded through the batched writer when its answer is
//   ready (a list also records its query and the ids it returned). When the row cannot be
//   queued (the writer is behind or Postgres is down) a successful answer becomes 503, unless
//   reads are configured best_effort (the row is then dropped and counted) or off.
// - change_in_tx: a change the owning actor audits in the change's own transaction; here only
//   an attempt that failed or was refused is recorded.
// - change: a change recorded here after it was answered (configuration, users, and the
//   health-data changes not yet audited inside their transaction): the names of the body's
//   fields, never their values.
// - security: sign-in, refresh and sign-out, whatever the outcome.
// - none: only a refusal (403) is recorded.
#pragma once
#include "domain/audit.hpp"
#include "http/audit_rule.hpp"
#include "http/exchange.hpp"

#include <atomic>
#include <cstdint>

namespace crm::persistence {
class audit_writer;
}

namespace crm::http {

class router;

// Gives every route of `r` its rule (routes absent from the table get `none`).
void classify_audit(router& r);

class auditor {
public:
  enum class read_policy : std::uint8_t { required, best_effort, off };
  auditor(persistence::audit_writer& writer, read_policy reads);

  // Called with the answer about to be sent; may turn it into a 503 (see above).
  void on_response(exchange& ex, response& r);

  persistence::audit_writer& writer() { return writer_; }
  // Queues a row made outside the route rules (an operator's drill); false when it could not be.
  bool record(domain::audit_record row);
  // carecrm_audit_* in the Prometheus text format: rows queued, written, refused (buffer full),
  // dropped (best_effort), buffered now, failed writer transactions.
  void write_metrics(std::string& out);
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

private:
  persistence::audit_writer& writer_;
  read_policy reads_;
  std::atomic<std::uint64_t> dropped_{0};
};

// The who and where of a request, for the actors that audit its changes.
domain::audit_context_ptr audit_context_of(const exchange& ex, bool signed_in);

} // namespace crm::http
