// SQL for a tenant's sales pipeline (docs/pipeline.md): loading pipelines, stages and deals,
// the deal batches of the group committer (deals, their history rows, events, idempotency
// keys), and the pipeline changes that run alone (stage edits, deletes with moved deals).
// Blocking: call only on a pg_pool thread.
#pragma once
#include "domain/deal.hpp"
#include "persistence/contact_repo.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/tx_batch.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crm::persistence {

struct deals_snapshot {
  std::vector<domain::pipeline> pipelines;
  std::vector<domain::deal> deals;
  std::vector<idempotency_record> keys; // younger than 24 h, prefixed "deals:"
  std::string currency;                 // the tenant's default
  bool event_listeners = true;
};

// Loads everything of the tenant; gives it its default pipeline first if it has none.
deals_snapshot load_deals(pg_conn& c, std::int64_t tenant_id);

std::vector<std::int64_t> reserve_deal_ids(pg_conn& c, int n);

// One row of a deal's history (kind: created, stage_changed, amount_changed).
struct deal_history_row {
  std::int64_t deal_id = 0;
  std::string kind;
  std::optional<std::int64_t> from_stage_id, to_stage_id;
  std::optional<std::int64_t> from_amount, to_amount; // cents
  std::string currency;
  std::optional<std::int64_t> user_id;
  std::optional<std::int64_t> workflow_run_id;
  std::int64_t at = 0;
};

// A batch of deal changes, applied in this order: deletes, upserts (in validation order; a
// deal written twice starts a new statement), history, events, keys. A deal whose contact or
// company was deleted meanwhile is written without it (the deals actor is told of the delete).
struct deal_batch final : tx_batch {
  std::int64_t tenant_id = 0;
  std::vector<std::int64_t> deletes;
  std::vector<domain::deal> upserts;
  std::vector<std::size_t> group_starts;
  std::vector<deal_history_row> history;
  std::vector<outbox_event> events;
  std::vector<idempotency_record> keys;

  bool empty() const {
    return deletes.empty() && upserts.empty() && history.empty() && events.empty() && keys.empty();
  }
  std::int64_t tenant() const override { return tenant_id; }
  void append_sql(sql_text& out) const override;
};

// A change of pipelines that runs as its own transaction (nothing of the tenant's deals is
// staged or in flight meanwhile): pipelines saved whole (stages with id 0 are created and get
// their ids), pipelines and stages deleted, and the deal changes it causes.
struct pipeline_change {
  std::int64_t tenant_id = 0;
  std::vector<domain::pipeline> saves;
  std::vector<std::int64_t> deleted_pipelines;
  std::vector<std::int64_t> deleted_stages;
  deal_batch deals; // written before the stages are deleted
};
// Commits; returns the saved pipelines with every stage id filled in.
std::vector<domain::pipeline> commit_pipeline_change(pg_conn& c, const pipeline_change& ch);

// History of a deal, oldest first, as the page shape.
std::string deal_history_page(pg_conn& c, std::int64_t tenant_id, std::int64_t deal_id, int page,
                              int per_page);

// Which of the given ids are contacts, companies and active users of the tenant.
struct deal_refs {
  std::vector<std::int64_t> contacts, companies, users;
};
deal_refs existing_refs(pg_conn& c, std::int64_t tenant_id, const deal_refs& wanted);

enum class pipeline_record : std::uint8_t { deal, pipeline, stage };
std::optional<std::int64_t> tenant_of(pg_conn& c, pipeline_record kind, std::int64_t id);

} // namespace crm::persistence
