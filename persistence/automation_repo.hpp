// SQL of the automation area (docs/automation.md): workflows, runs, webhook subscriptions and
// deliveries, and taking events from the outbox. Blocking: call only on a pg_pool thread.
#pragma once
#include "domain/automation.hpp"
#include "domain/failure.hpp"
#include "persistence/pg_pool.hpp"

#include <optional>
#include <string>
#include <vector>

namespace crm::persistence {

struct automation_snapshot {
  std::vector<domain::workflow> workflows;
  std::vector<domain::webhook_subscription> subscriptions;
  std::vector<domain::workflow_run> open_runs; // queued, running, waiting; oldest first
};
automation_snapshot load_automation(pg_conn& c, std::int64_t tenant_id);

// Inserts (id 0) or updates; returns the stored row. An update writes next_run_at only with
// `write_schedule` (a re-plan): otherwise the stored one, moved by firings, stays.
domain::workflow save_workflow(pg_conn& c, domain::workflow w, bool write_schedule = true);
void delete_workflow(pg_conn& c, std::int64_t tenant_id, std::int64_t id);
std::optional<std::int64_t> tenant_of_workflow(pg_conn& c, std::int64_t id);
std::optional<std::int64_t> tenant_of_run(pg_conn& c, std::int64_t id);
std::optional<std::int64_t> tenant_of_subscription(pg_conn& c, std::int64_t id);

// Who listens to record events: the active workflows with a record-event trigger and the
// active subscriptions, as the workflow actor knows them when it takes a batch.
struct event_consumers {
  std::vector<domain::workflow> workflows;
  std::vector<domain::webhook_subscription> subscriptions;
};
struct dispatch_result {
  std::vector<domain::workflow_run> runs; // inserted, queued (or failed at the depth limit)
  std::size_t events = 0;
  std::size_t deliveries = 0;
};
// In one transaction: takes (marks dispatched) up to `limit` of the tenant's oldest outbox rows and
// inserts the runs and deliveries they cause.
dispatch_result dispatch_outbox(pg_conn& c, std::int64_t tenant_id, const event_consumers& to,
                                std::size_t limit);

// Inserts a run (its id is set). For a schedule run, also moves the workflow's next_run_at to
// `schedule_next_run_at` (0: none) in the same transaction.
domain::workflow_run insert_run(pg_conn& c, domain::workflow_run r,
                                std::optional<std::int64_t> schedule_next_run_at = std::nullopt);
// Writes the run's progress (status, steps, next step, error, times).
void save_run(pg_conn& c, const domain::workflow_run& r);
// The runs' progress in one transaction (one commit for the steps that ended meanwhile).
void save_runs(pg_conn& c, const std::vector<domain::workflow_run>& runs);
// A page of a workflow's runs (newest first) in the contract's page shape.
std::string runs_page_json(pg_conn& c, std::int64_t tenant_id, std::int64_t workflow_id,
                           std::optional<domain::run_status> status, int page, int per_page);
// One run of the tenant, or nothing.
std::optional<std::string> run_json(pg_conn& c, std::int64_t tenant_id, std::int64_t run_id);

domain::webhook_subscription save_subscription(pg_conn& c, domain::webhook_subscription s);
void delete_subscription(pg_conn& c, std::int64_t tenant_id, std::int64_t id);
// Pending deliveries due now, oldest due first, except those in `busy`.
std::vector<domain::webhook_delivery> due_deliveries(pg_conn& c, std::int64_t tenant_id,
                                                     const std::vector<std::int64_t>& busy,
                                                     std::size_t limit);
// When the next pending delivery is due (0: none).
std::int64_t next_delivery_due(pg_conn& c, std::int64_t tenant_id);
// Records attempts in one transaction (one commit for many deliveries); a 410 also disables the
// subscription and fails its pending deliveries.
void record_attempts(pg_conn& c, std::int64_t tenant_id,
                     const std::vector<domain::delivery_attempt>& attempts);
std::string deliveries_page_json(pg_conn& c, std::int64_t tenant_id, std::int64_t subscription_id,
                                 std::optional<std::string> status, int page, int per_page);
// Makes a delivery of the subscription pending again now, with a fresh retry window, when the
// subscription is active.
enum class redelivery : std::uint8_t { pending, not_found, inactive };
redelivery redeliver(pg_conn& c, std::int64_t tenant_id, std::int64_t subscription_id,
                     std::int64_t delivery_id, bool subscription_active);

// Tenants with automation work due: outbox rows, queued or running runs, waiting runs whose
// delay is over, pending deliveries due, schedules due.
std::vector<std::int64_t> tenants_with_due_work(pg_conn& c);

// Deletes outbox rows dispatched more than `keep_seconds` ago; returns how many.
std::int64_t prune_outbox(pg_conn& c, double keep_seconds);

} // namespace crm::persistence
