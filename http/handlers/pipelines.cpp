// Pipeline and stage endpoints (contract §8, docs/pipeline.md): CRUD, the board and the
// forecast summary. Managers and admins write; every role reads.
#include "http/api.hpp"

#include "actors/deals.hpp"
#include "domain/deal.hpp"
#include "http/deal_input.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

#include <charconv>

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

// The board's query (GET /pipelines/{id}/board): cards a stage, and how many to skip.
namespace board_rules {
constexpr int per_stage_default = 20;
constexpr int per_stage_max = 100;
constexpr int offset_max = 1'000'000'000;
} // namespace board_rules

std::optional<std::int32_t> query_date(const request& req, std::string_view name,
                                       std::vector<issue>& issues) {
  auto v = req.query_value(name);
  if (!v) return std::nullopt;
  auto d = domain::parse_date(*v);
  if (!d)
    issues.push_back({{std::string("query"), std::string(name)},
                      "Input should be a valid date (YYYY-MM-DD)",
                      "value_error"});
  return d;
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_pipelines(s.rt, ex->who.tenant_id, *page, *per_page, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_pipeline(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void create(services& s, const exchange_ptr& ex) {
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto in = read_pipeline(*body, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::create_pipeline(s.rt, ex->who.tenant_id, std::move(in),
                          created_reply(ex, "/api/v1/pipelines/"));
}

void update(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto p = read_pipeline_patch(*body, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::update_pipeline(s.rt, ex->who.tenant_id, *id, std::move(p), json_reply(ex));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_pipeline(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

void add_stage(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto p = read_stage(*body, true, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  domain::stage st;
  st.name = p.name.value_or("");
  st.kind = p.kind.value_or(domain::stage_kind::open);
  st.probability = p.probability.value_or(st.kind == domain::stage_kind::won ? 100 : 0);
  actors::add_stage(s.rt, ex->who.tenant_id, *id, std::move(st), p.position,
                    created_reply(ex, "/api/v1/pipelines/" + std::to_string(*id) + "/stages/"));
}

void get_stage(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto sid = id_param(ex, "stage_id");
  if (!sid) return;
  actors::get_stage(s.rt, ex->who.tenant_id, *id, *sid, json_reply(ex));
}

void update_stage(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto sid = id_param(ex, "stage_id");
  if (!sid) return;
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto p = read_stage(*body, false, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::update_stage(s.rt, ex->who.tenant_id, *id, *sid, std::move(p), json_reply(ex));
}

void remove_stage(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto sid = id_param(ex, "stage_id");
  if (!sid) return;
  std::vector<issue> issues;
  auto move_to = query_id(ex->req, "move_to", issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::delete_stage(s.rt, ex->who.tenant_id, *id, *sid, move_to, who_of(ex),
                       no_content_reply(ex));
}

void board(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  std::vector<issue> issues;
  actors::board_query q;
  q.per_stage = query_int(ex->req, "per_stage", board_rules::per_stage_default, 1,
                          board_rules::per_stage_max, issues)
                    .value_or(board_rules::per_stage_default);
  q.offset = query_int(ex->req, "offset", 0, 0, board_rules::offset_max, issues).value_or(0);
  q.stage_id = query_id(ex->req, "stage_id", issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::pipeline_board(s.rt, ex->who.tenant_id, *id, q, json_reply(ex));
}

void summary(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  std::vector<issue> issues;
  actors::summary_query q;
  q.owner_id = query_id(ex->req, "owner_id", issues);
  q.close_after = query_date(ex->req, "expected_close_after", issues);
  q.close_before = query_date(ex->req, "expected_close_before", issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::pipeline_summary(s.rt, ex->who.tenant_id, *id, q, json_reply(ex));
}

void define_pipeline_schemas(router& r) {
  using namespace schema;
  namespace rules = pipeline_rules;
  auto probability = [] {
    auto p = integer();
    p["minimum"] = 0;
    p["maximum"] = rules::probability_max;
    return p;
  };
  auto position = [] {
    auto p = integer();
    p["minimum"] = 0;
    p["maximum"] = rules::position_max;
    return p;
  };
  auto stage_name = text({.min = 1, .max = rules::stage_name_max});
  define(r, "Stage",
         object({{"id", id()},
                 {"pipeline_id", id()},
                 {"name", text({})},
                 {"position", integer()},
                 {"probability", probability()},
                 {"kind", one_of(rules::kinds)}}));
  define(r, "Pipeline",
         object({{"id", id()},
                 {"name", text({})},
                 {"is_default", boolean()},
                 {"stages", array_of(ref("Stage"))},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "PipelinePage", page_of("Pipeline"));
  auto stages = array_of(object({{"name", stage_name},
                                 {"probability", probability(), false},
                                 {"kind", one_of(rules::kinds), false}}));
  stages["minItems"] = rules::stages_min;
  stages["maxItems"] = rules::stages_max;
  define(r, "PipelineCreate",
         object({{"name", text({.min = 1, .max = rules::name_max})},
                 {"is_default", boolean(), false},
                 {"stages", stages, false}}));
  define(r, "PipelineUpdate",
         object({{"name", text({.min = 1, .max = rules::name_max}), false},
                 {"is_default", boolean(), false}}));
  // The board and the forecast: money as decimal strings (deal_rules), summed per currency.
  auto sums = [] {
    auto money = text_matching(deal_rules::money_pattern);
    money["description"] = "a decimal string with 2 decimals, such as \"1500.00\"";
    return object_t{{"type", "object"},
                    {"additionalProperties", money},
                    {"description", "by currency (ISO 4217 code)"}};
  };
  define(r, "PipelineBoard",
         object({{"pipeline_id", id()},
                 {"stages", array_of(object({{"stage", ref("Stage")},
                                             {"count", integer()},
                                             {"sums", sums()},
                                             {"deals", array_of(ref("DealCard"))},
                                             {"has_more", boolean()}}))}}));
  define(
      r, "PipelineSummary",
      object({{"pipeline_id", id()},
              {"stages", array_of(object({{"stage_id", id()},
                                          {"name", text({})},
                                          {"kind", one_of(rules::kinds)},
                                          {"probability", probability()},
                                          {"count", integer()},
                                          {"sums", sums()},
                                          {"weighted", sums()}}))},
              {"totals", object({{"count", integer()}, {"sums", sums()}, {"weighted", sums()}})}}));
  define(r, "StageCreate",
         object({{"name", stage_name},
                 {"probability", probability(), false},
                 {"kind", one_of(rules::kinds), false},
                 {"position", position(), false}}));
  define(r, "StageUpdate",
         object({{"name", stage_name, false},
                 {"probability", probability(), false},
                 {"kind", one_of(rules::kinds), false},
                 {"position", position(), false}}));
}

std::vector<query_param> board_query() {
  using namespace schema;
  auto per_stage = integer(1, board_rules::per_stage_max);
  per_stage["default"] = board_rules::per_stage_default;
  auto offset = integer(0, board_rules::offset_max);
  offset["default"] = 0;
  return {query("per_stage", per_stage, "cards a stage"),
          query("offset", offset, "cards skipped in each stage (board order)"),
          query("stage_id", id(), "only this stage")};
}

} // namespace

void add_pipeline_routes(router& r, services& s) {
  using domain::permission;
  constexpr auto read = permission::read_records;
  constexpr auto manage = permission::manage_automation;
  const char* tag = "pipelines";
  define_pipeline_schemas(r);
  r.add(
      {verb::get, "/api/v1/pipelines", access::bearer, read, bind(s, list), "List pipelines", tag},
      route_doc("", "PipelinePage").with_query(schema::paging()));
  r.add({verb::post, "/api/v1/pipelines", access::bearer, manage, bind(s, create),
         "Create a pipeline (default stages when none are given)", tag, 201},
        route_doc("PipelineCreate", "Pipeline")
            .with_example(R"({"name": "Dental implants", "stages": [
 {"name": "Consultation booked", "probability": 20, "kind": "open"},
 {"name": "Treatment plan sent", "probability": 60, "kind": "open"},
 {"name": "Accepted", "probability": 100, "kind": "won"},
 {"name": "Declined", "probability": 0, "kind": "lost"}]})"));
  r.add({verb::get, "/api/v1/pipelines/{id}", access::bearer, read, bind(s, get),
         "Get a pipeline with its stages", tag},
        {"", "Pipeline"});
  r.add({verb::put, "/api/v1/pipelines/{id}", access::bearer, manage, bind(s, update),
         "Rename a pipeline or make it the default", tag},
        {"PipelineUpdate", "Pipeline"});
  r.add({verb::patch, "/api/v1/pipelines/{id}", access::bearer, manage, bind(s, update),
         "Update a pipeline (same as PUT)", tag},
        {"PipelineUpdate", "Pipeline"});
  r.add({verb::del, "/api/v1/pipelines/{id}", access::bearer, manage, bind(s, remove),
         "Delete a pipeline that holds no deals (not the default)", tag, 204},
        route_doc().fails_with({409})); // the default, or one holding deals
  r.add({verb::post, "/api/v1/pipelines/{id}/stages", access::bearer, manage, bind(s, add_stage),
         "Add a stage", tag, 201},
        {"StageCreate", "Stage"});
  r.add({verb::get, "/api/v1/pipelines/{id}/stages/{stage_id}", access::bearer, read,
         bind(s, get_stage), "Get a stage", tag},
        {"", "Stage"});
  r.add({verb::put, "/api/v1/pipelines/{id}/stages/{stage_id}", access::bearer, manage,
         bind(s, update_stage), "Rename, reorder or re-weight a stage", tag},
        {"StageUpdate", "Stage"});
  r.add({verb::patch, "/api/v1/pipelines/{id}/stages/{stage_id}", access::bearer, manage,
         bind(s, update_stage), "Update a stage (same as PUT)", tag},
        {"StageUpdate", "Stage"});
  r.add({verb::del, "/api/v1/pipelines/{id}/stages/{stage_id}", access::bearer, manage,
         bind(s, remove_stage), "Delete a stage (?move_to=<stage_id> when it holds deals)", tag,
         204},
        // 409: it holds deals and no move_to was given, or the pipeline would lose its only
        // won, lost or open stage.
        route_doc().fails_with({409}).with_query({schema::query(
            "move_to", schema::id(), "the stage of the same pipeline its deals go to")}));
  r.add({verb::get, "/api/v1/pipelines/{id}/board", access::bearer, read, bind(s, board),
         "The board: per stage count, sums per currency and deals in board order", tag},
        route_doc("", "PipelineBoard").with_query(board_query()));
  r.add({verb::get, "/api/v1/pipelines/{id}/summary", access::bearer, read, bind(s, summary),
         "Forecast: per stage count, sums and probability-weighted sums", tag},
        route_doc("", "PipelineSummary")
            .with_query({schema::query("owner_id", schema::id(), "only the deals of this owner"),
                         schema::query("expected_close_after", schema::date(),
                                       "only deals expected to close on or after this day"),
                         schema::query("expected_close_before", schema::date(),
                                       "only deals expected to close on or before this day")}));
}

} // namespace crm::http
