// Reading pipeline, stage and deal bodies and the deal list query into typed commands
// (docs/pipeline.md): every syntax rule, each failing field reported with its loc. What needs
// the tenant's state (stages of a pipeline, custom-field definitions, references) the deals
// actor checks.
#pragma once
#include "actors/deals.hpp"
#include "http/contact_input.hpp"
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

// The rules of a deal's fields and of the deal list (docs/pipeline.md), shared by the readers
// below and the OpenAPI schemas (add_deal_routes).
namespace deal_rules {
inline constexpr std::size_t title_max = 200;
inline constexpr std::size_t lost_reason_max = 500;
inline constexpr std::size_t custom_fields_max = 16 * 1024; // bytes of the custom_fields JSON
// A move's index in the target stage's board order.
inline constexpr std::int64_t position_max = 1'000'000'000;
// domain::parse_amount: up to 13 digits and 2 decimals, cents end to end.
inline constexpr std::string_view amount_pattern = "^[0-9]{1,13}(\\.[0-9]{1,2})?$";
// How answers render money (domain::format_cents): sums are as exact as amounts.
inline constexpr std::string_view money_pattern = "^-?[0-9]+\\.[0-9]{2}$";
// The form of a currency; domain::is_currency also wants an active ISO 4217 code.
inline constexpr std::string_view currency_pattern = "^[A-Z]{3}$";
// The list's ?sort_by= (domain::parse_deal_sort reads them).
inline constexpr std::array<std::string_view, 14> sort_fields{"id",
                                                              "title",
                                                              "amount",
                                                              "currency",
                                                              "status",
                                                              "pipeline_id",
                                                              "stage_id",
                                                              "owner_id",
                                                              "contact_id",
                                                              "company_id",
                                                              "expected_close_date",
                                                              "created_at",
                                                              "updated_at",
                                                              "closed_at"};
// Bulk create: deals a request.
inline constexpr std::size_t bulk_max = 1000;
} // namespace deal_rules

// A deal create (`creating`: title required) or update; `move`: only stage_id, position,
// lost_reason. Issues go to `f.issues`, located under `prefix`.
actors::deal_fields read_deal(const boost::json::object& o, bool creating, bool move,
                              const loc_path& prefix);

// The deal import (POST /deals/import, docs/pipeline.md "Import"): every column of
// GET /deals/export imports (id, created_at, updated_at and closed_at are the server's and
// ignored; custom_fields is the export's JSON object); a row is read as POST /deals reads a
// body, its issues under `prefix`.
bool importable_deal_column(std::string_view name);
actors::deal_fields read_deal_row(const std::vector<std::string>& header,
                                  const std::vector<std::string>& cells, const loc_path& prefix);

actors::pipeline_input read_pipeline(const boost::json::object& o,
                                     std::vector<domain::issue>& issues);
actors::pipeline_patch read_pipeline_patch(const boost::json::object& o,
                                           std::vector<domain::issue>& issues);
// A new stage (`creating`: name required) or a stage patch.
actors::stage_patch read_stage(const boost::json::object& o, bool creating,
                               std::vector<domain::issue>& issues);

// The user acting on deals in this request (recorded in their history).
actors::deal_actor_ref who_of(const exchange_ptr& ex);

struct deal_list_params {
  domain::deal_query query;
  int page = 1;
  int per_page = 20;
};
std::optional<deal_list_params> read_deal_query(const request& req,
                                                std::vector<domain::issue>& issues);

} // namespace crm::http
