// Pipelines, stages and deals of a tenant (contract §8, docs/pipeline.md), owned by the
// tenant's deals actor: the only writer, answering reads from memory. Deal writes are
// validated against the state as it will be once every write before them has committed,
// committed in groups through the shared group committer (with their history rows and events),
// applied to memory after COMMIT and only then answered. Pipeline and stage changes run alone.
#pragma once
#include "actors/callback.hpp"
#include "actors/contacts.hpp"
#include "domain/deal.hpp"

#include <optional>
#include <string>
#include <vector>

namespace crm::actors {

class runtime;

// Who makes a change: recorded in the deal's history; `chain_depth` as for contacts.
struct deal_actor_ref {
  std::optional<std::int64_t> user_id;
  std::optional<std::int64_t> workflow_run_id;
  int chain_depth = 0;
};

// Fields of a create, an update or a move, already checked for syntax by the HTTP layer. For
// optional fields the outer optional says "sent", the inner one "not null".
struct deal_fields {
  std::optional<std::string> title;
  std::optional<std::optional<std::int64_t>> amount; // cents
  std::optional<std::string> currency;
  std::optional<std::optional<std::int64_t>> contact_id;
  std::optional<std::optional<std::int64_t>> company_id;
  std::optional<std::optional<std::int64_t>> owner_id;
  std::optional<std::int64_t> pipeline_id;
  std::optional<std::int64_t> stage_id;
  std::optional<std::optional<std::int32_t>> expected_close;
  std::optional<domain::stage_kind> status;
  std::optional<std::optional<std::string>> lost_reason;
  std::optional<std::string> custom_fields; // JSON object text (merged on update)
  std::optional<std::int64_t> position;     // moves: index in the target stage's board order
  std::vector<domain::issue> issues;        // syntax issues found by the HTTP layer
  std::vector<domain::loc_part> loc = {std::string("body")}; // where issues are reported
};

struct pipeline_input {
  std::string name;
  bool is_default = false;
  std::vector<domain::stage> stages; // empty: the default stages
};
struct pipeline_patch {
  std::optional<std::string> name;
  std::optional<bool> is_default;
};
struct stage_patch {
  std::optional<std::string> name;
  std::optional<int> probability;
  std::optional<domain::stage_kind> kind;
  std::optional<int> position;
};

struct board_query {
  int per_stage = 20;
  std::int64_t offset = 0;
  std::optional<std::int64_t> stage_id;
};
struct summary_query {
  std::optional<std::int64_t> owner_id;
  std::optional<std::int32_t> close_after, close_before;
};

// Pipelines and stages (JSON replies).
void list_pipelines(runtime& rt, std::int64_t tenant, int page, int per_page,
                    callback<std::string> reply);
void get_pipeline(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void create_pipeline(runtime& rt, std::int64_t tenant, pipeline_input in,
                     callback<std::string> reply);
void update_pipeline(runtime& rt, std::int64_t tenant, std::int64_t id, pipeline_patch p,
                     callback<std::string> reply);
void delete_pipeline(runtime& rt, std::int64_t tenant, std::int64_t id,
                     callback<domain::done> reply);
// The stage as JSON; `position` absent: after the last open stage.
void add_stage(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, domain::stage s,
               std::optional<int> position, callback<std::string> reply);
void get_stage(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, std::int64_t stage_id,
               callback<std::string> reply);
void update_stage(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, std::int64_t stage_id,
                  stage_patch p, callback<std::string> reply);
void delete_stage(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, std::int64_t stage_id,
                  std::optional<std::int64_t> move_to, deal_actor_ref who,
                  callback<domain::done> reply);
void pipeline_board(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, board_query q,
                    callback<std::string> reply);
void pipeline_summary(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, summary_query q,
                      callback<std::string> reply);

// Deals. Creates answer the deal's JSON (201) as a replayable response.
void create_deal(runtime& rt, std::int64_t tenant, deal_fields f, deal_actor_ref who,
                 idempotency key, callback<stored_response> reply);
// `first`: the index of the first item (a large import's later part): results and issue
// locations count from it.
void bulk_create_deals(runtime& rt, std::int64_t tenant, std::vector<deal_fields> items,
                       deal_actor_ref who, idempotency key, callback<stored_response> reply,
                       std::int64_t first = 0);
void get_deal(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
// Updates and moves (a move is an update of stage_id, with an optional position).
void update_deal(runtime& rt, std::int64_t tenant, std::int64_t id, deal_fields f,
                 deal_actor_ref who, callback<domain::deal> reply);
void delete_deal(runtime& rt, std::int64_t tenant, std::int64_t id, deal_actor_ref who,
                 callback<domain::done> reply);
void list_deals(runtime& rt, std::int64_t tenant, domain::deal_query q, int page, int per_page,
                callback<std::string> reply);
// GET /contacts/{id}/deals: 404 / 403 when the contact is not the tenant's.
void list_contact_deals(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                        domain::deal_query q, int page, int per_page, callback<std::string> reply);
void export_deals(runtime& rt, std::int64_t tenant, domain::deal_query q,
                  callback<std::string> reply);
void deal_history(runtime& rt, std::int64_t tenant, std::int64_t id, int page, int per_page,
                  callback<std::string> reply);

// Told by the contacts actor after a contact or company delete committed (Postgres already
// nulled the references): the deals actor nulls them in memory and writes deal.updated events.
void contact_deleted(runtime& rt, std::int64_t tenant, std::int64_t contact_id);
// A contact merged into another (contract §11): its deals are the survivor's now.
void contact_merged(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t into);
void company_deleted(runtime& rt, std::int64_t tenant, std::int64_t company_id);

} // namespace crm::actors
