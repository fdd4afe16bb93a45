// Reading pipeline, stage and deal bodies and the deal list query into typed commands
// (docs/pipeline.md): every syntax rule, each failing field reported with its loc. What needs
// the tenant's state (stages of a pipeline, custom-field definitions, references) the deals
// actor checks.
#pragma once
#include "actors/deals.hpp"
#include "http/exchange.hpp"
#include "http/message.hpp"

#include <boost/json/fwd.hpp>

#include <array>
#include <optional>
#include <string_view>
#include <vector>

namespace crm::http {

using loc_path = std::vector<domain::loc_part>;

// The rules of pipelines and stages (docs/pipeline.md), shared by the readers below and the
// OpenAPI schemas (add_pipeline_routes).
namespace pipeline_rules {
inline constexpr std::size_t name_max = 100;
inline constexpr std::size_t stage_name_max = 100;
inline constexpr std::size_t stages_min = 3;
inline constexpr std::size_t stages_max = 50;
inline constexpr std::int64_t probability_max = 100;
inline constexpr std::int64_t position_max = 1000;
inline constexpr std::array<std::string_view, 3> kinds{"open", "won", "lost"};
} // namespace pipeline_rules

// A deal create (`creating`: title required) or update; `move`: only stage_id, position,
// lost_reason. Issues go to `f.issues`, located under `prefix`.
actors::deal_fields read_deal(const boost::json::object& o, bool creating, bool move,
                              const loc_path& prefix);

actors::pipeline_input read_pipeline(const boost::json::object& o,
                                     std::vector<domain::issue>& issues);
actors::pipeline_patch read_pipeline_patch(const boost::json::object& o,
                                           std::vector<domain::issue>& issues);
// A new stage (`creating`: name required) or a stage patch.
actors::stage_patch read_stage(const boost::json::object& o, bool creating,
                               std::vector<domain::issue>& issues);

// The user acting on deals in this request (recorded in their history).
actors::deal_actor_ref who_of(const exchange_ptr& ex);

// A positive integer query parameter (422 int_parsing at ["query", name]); nothing if absent.
std::optional<std::int64_t> query_id(const request& req, std::string_view name,
                                     std::vector<domain::issue>& issues);

struct deal_list_params {
  domain::deal_query query;
  int page = 1;
  int per_page = 20;
};
std::optional<deal_list_params> read_deal_query(const request& req,
                                                std::vector<domain::issue>& issues);

} // namespace crm::http
