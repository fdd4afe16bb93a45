// The records of the automation area (docs/automation.md) as plain values: workflows, their
// runs, outbound webhook subscriptions and their deliveries. Times are microseconds since the
// Unix epoch (UTC); 0 means "not set".
#pragma once
#include "domain/workflow.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crm::domain {

struct workflow {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  std::optional<std::string> description;
  trigger_type trigger = trigger_type::manual;
  boost::json::object trigger_config;
  std::vector<condition> conditions;
  std::vector<action> actions;
  bool is_active = true;
  std::optional<std::string> webhook_secret; // write-only
  std::int64_t next_run_at = 0;              // active schedule workflows only
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

enum class run_status : std::uint8_t { queued, running, waiting, succeeded, failed };
// Their names, in the order of the enum (the runs list's ?status=, the OpenAPI document).
inline constexpr std::array<std::string_view, 5> run_statuses{"queued", "running", "waiting",
                                                              "succeeded", "failed"};
std::string_view to_string(run_status s);
std::optional<run_status> parse_run_status(std::string_view s);
inline bool finished(run_status s) {
  return s == run_status::succeeded || s == run_status::failed;
}

// Chains of workflows stop here: a run that would start at this depth fails at once.
constexpr int max_chain_depth = 5;

struct workflow_run {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::int64_t workflow_id = 0;
  run_status status = run_status::queued;
  std::string trigger;        // the trigger type's name
  boost::json::value payload; // the trigger payload
  int depth = 0;              // chain depth
  bool conditions_met = true;
  boost::json::array actions; // the workflow's actions when the run was created
  int next_step = 0;          // the first action not yet finished
  boost::json::array steps;   // one object per started action
  std::optional<std::string> error;
  std::int64_t resume_at = 0; // waiting: when the delay ends
  std::int64_t created_at = 0;
  std::int64_t started_at = 0;
  std::int64_t finished_at = 0;
  std::int64_t updated_at = 0;
};

struct webhook_subscription {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string url;
  std::vector<std::string> events; // event names or "*"
  std::optional<std::string> description;
  std::string secret; // write-only
  bool is_active = true;
  std::optional<std::string> disabled_reason;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;

  bool wants(std::string_view event) const {
    for (auto& e : events)
      if (e == "*" || e == event) return true;
    return false;
  }
};

// The statuses of a delivery (the deliveries list's ?status=, the OpenAPI document).
inline constexpr std::array<std::string_view, 3> delivery_statuses{"pending", "succeeded",
                                                                   "failed"};

// A delivery as an attempt needs it.
struct webhook_delivery {
  std::int64_t id = 0;
  std::int64_t subscription_id = 0;
  std::string event;
  std::string payload; // JSON text of the event's data
  int attempts = 0;    // made so far
  std::int64_t retry_from = 0;
  std::int64_t created_at = 0;
};

// What one attempt found, and what follows from it.
struct delivery_attempt {
  std::int64_t delivery_id = 0;
  std::int64_t subscription_id = 0;
  int attempt = 0;     // 1-based
  std::int64_t at = 0; // when it started
  std::int64_t duration_ms = 0;
  int status_code = 0; // 0: no response
  std::string error;   // empty on success
  bool delivered = false;
  bool gone = false;                // 410: disable the subscription
  std::int64_t next_attempt_at = 0; // 0: no more attempts (delivered or given up)
};

// A `webhook` workflow without a secret gets one drawn (generate_webhook_secret, in
// workflow.hpp), returned so the answer that saved it can show it once; nothing otherwise.
std::optional<std::string> ensure_webhook_secret(workflow& w);

// Response shapes (docs/automation.md). Secrets are never rendered: only `has_secret`.
boost::json::object workflow_to_json(const workflow& w, std::string_view public_url);
boost::json::object run_to_json(const workflow_run& r);
boost::json::object subscription_to_json(const webhook_subscription& s);

} // namespace crm::domain
