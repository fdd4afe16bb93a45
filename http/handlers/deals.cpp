// Deal endpoints (contract §8, docs/pipeline.md): CRUD, moves, history, the list with filters
// and sorting, a contact's deals, bulk create and CSV export. Agents and up write, managers
// and admins delete, every role reads.
#include "http/api.hpp"

#include "actors/deals.hpp"
#include "domain/deal.hpp"
#include "http/deal_input.hpp"
#include "http/import_stream.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

actors::callback<domain::deal> deal_reply(const exchange_ptr& ex) {
  return actors::callback<domain::deal>([ex](domain::outcome<domain::deal> r) {
    if (!r) return ex->fail(r.error());
    ex->json(200, domain::encode_deal(*r));
  });
}

void create(services& s, const exchange_ptr& ex) {
  auto body = object_body(ex);
  if (!body) return;
  auto f = read_deal(*body, true, false, {std::string("body")});
  actors::create_deal(
      s.rt, ex->who.tenant_id, std::move(f), who_of(ex), idempotency_of(ex),
      actors::callback<actors::stored_response>([ex](domain::outcome<actors::stored_response> r) {
        reply_stored(ex, std::move(r), "/api/v1/deals/");
      }));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_deal(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto body = object_body(ex);
  if (!body) return;
  auto f = read_deal(*body, false, false, {std::string("body")});
  actors::update_deal(s.rt, ex->who.tenant_id, *id, std::move(f), who_of(ex), deal_reply(ex));
}

void move(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto body = object_body(ex);
  if (!body) return;
  auto f = read_deal(*body, false, true, {std::string("body")});
  actors::update_deal(s.rt, ex->who.tenant_id, *id, std::move(f), who_of(ex), deal_reply(ex));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_deal(s.rt, ex->who.tenant_id, *id, who_of(ex), no_content_reply(ex));
}

void history(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  std::vector<issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::deal_history(s.rt, ex->who.tenant_id, *id, *page, *per_page, json_reply(ex));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto p = read_deal_query(ex->req, issues);
  if (!p) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_deals(s.rt, ex->who.tenant_id, std::move(p->query), p->page, p->per_page,
                     json_reply(ex));
}

void contact_deals(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  std::vector<issue> issues;
  auto p = read_deal_query(ex->req, issues);
  if (!p) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_contact_deals(s.rt, ex->who.tenant_id, *id, std::move(p->query), p->page,
                             p->per_page, json_reply(ex));
}

void bulk(services& s, const exchange_ptr& ex) {
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto it = body->find("deals");
  for (auto& kv : *body)
    if (kv.key() != "deals")
      issues.push_back(
          {{"body", std::string(kv.key())}, "Extra inputs are not permitted", "extra_forbidden"});
  if (it == body->end())
    issues.push_back({{"body", "deals"}, "Field required", "missing"});
  else if (!it->value().is_array())
    issues.push_back({{"body", "deals"}, "Input should be a valid list", "value_error"});
  else if (it->value().as_array().empty())
    issues.push_back({{"body", "deals"}, "List should have at least 1 item", "too_short"});
  else if (it->value().as_array().size() > deal_rules::bulk_max)
    issues.push_back({{"body", "deals"},
                      "List should have at most " + std::to_string(deal_rules::bulk_max) + " items",
                      "too_long"});
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  auto& items = it->value().as_array();
  std::vector<actors::deal_fields> fields;
  fields.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    loc_path prefix{std::string("body"), std::string("deals"), static_cast<std::int64_t>(i)};
    if (auto o = items[i].if_object()) {
      fields.push_back(read_deal(*o, true, false, prefix));
    } else {
      actors::deal_fields f;
      f.loc = prefix;
      f.issues.push_back({prefix, "Input should be a valid dictionary", "value_error"});
      fields.push_back(std::move(f));
    }
  }
  actors::bulk_create_deals(
      s.rt, ex->who.tenant_id, std::move(fields), who_of(ex), idempotency_of(ex),
      actors::callback<actors::stored_response>([ex](domain::outcome<actors::stored_response> r) {
        reply_stored(ex, std::move(r), "");
      }));
}

void import(services& s, const exchange_ptr& ex) {
  import_csv(s, ex, importable_deal_column, "title",
             [&s, tenant = ex->who.tenant_id, who = who_of(ex)](
                 const std::vector<std::string>& header, std::vector<std::vector<std::string>> rows,
                 std::int64_t first, actors::idempotency key,
                 actors::callback<actors::stored_response> reply) {
               std::vector<actors::deal_fields> fields;
               fields.reserve(rows.size());
               for (std::size_t i = 0; i < rows.size(); ++i) {
                 loc_path prefix{std::string("body"), std::string("rows"),
                                 first + static_cast<std::int64_t>(i)};
                 fields.push_back(read_deal_row(header, rows[i], prefix));
               }
               actors::bulk_create_deals(s.rt, tenant, std::move(fields), who, std::move(key),
                                         std::move(reply), first);
             });
}

void export_csv(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto p = read_deal_query(ex->req, issues);
  if (!p) return ex->fail(failure::invalid(std::move(issues)));
  actors::export_deals(s.rt, ex->who.tenant_id, std::move(p->query),
                       actors::callback<std::string>([ex](domain::outcome<std::string> r) {
                         if (!r) return ex->fail(r.error());
                         response res;
                         res.content_type = "text/csv; charset=utf-8";
                         res.headers.emplace_back("Content-Disposition",
                                                  "attachment; filename=\"deals.csv\"");
                         res.body = std::move(*r);
                         ex->respond(std::move(res));
                       }));
}

// The kinds of a deal's history rows (deal_history.kind, written by the deals actor).
constexpr std::array<std::string_view, 3> history_kinds{"created", "stage_changed",
                                                        "amount_changed"};

void define_deal_schemas(router& r) {
  using namespace schema;
  namespace rules = deal_rules;
  auto money = [] {
    auto m = text_matching(rules::money_pattern);
    m["description"] = "a decimal string with 2 decimals, such as \"1500.00\"";
    return m;
  };
  auto amount = [] {
    auto a = text_matching(rules::amount_pattern);
    a["description"] = "a decimal string of up to 13 digits and 2 decimals, such as \"1500.00\"";
    return a;
  };
  auto currency = [] {
    auto c = text_matching(rules::currency_pattern);
    c["description"] = "an active ISO 4217 code in upper case, such as \"BRL\" (default: the "
                       "tenant's currency)";
    return c;
  };
  auto custom_fields = [] {
    auto c = any_object();
    c["description"] = "values by custom-field key (GET /fields/deal/custom), at most " +
                       std::to_string(rules::custom_fields_max / 1024) +
                       " KiB of JSON; merged key by key on update (null removes a key)";
    return c;
  };
  auto status = one_of(pipeline_rules::kinds);
  // The fields a client sends: a create needs the title; null clears the optional ones (and is
  // ignored for pipeline_id, status and custom_fields).
  auto input = [&](bool creating) {
    return object({{"title", text({.min = 1, .max = rules::title_max}), creating},
                   {"amount", nullable(amount()), false},
                   {"currency", currency(), false},
                   {"contact_id", nullable(id()), false},
                   {"company_id", nullable(id()), false},
                   {"owner_id", nullable(id()), false},
                   {"pipeline_id", nullable(id()), false},
                   {"stage_id", id(), false},
                   {"expected_close_date", nullable(date()), false},
                   {"status", nullable(status), false},
                   {"lost_reason", nullable(text({.max = rules::lost_reason_max})), false},
                   {"custom_fields", nullable(custom_fields()), false}});
  };
  define(r, "DealCreate", input(true));
  define(r, "DealUpdate", input(false));
  auto position = integer(0, rules::position_max);
  position["description"] = "the index in the target stage's board order (default: last)";
  define(r, "DealMove",
         object({{"stage_id", id()},
                 {"position", nullable(position), false},
                 {"lost_reason", nullable(text({.max = rules::lost_reason_max})), false}}));
  // The board's card of a deal (GET /pipelines/{id}/board); a deal is its card and the rest.
  auto card = object({{"id", id()},
                      {"title", text({})},
                      {"amount", nullable(money())},
                      {"currency", text({})},
                      {"contact_id", nullable(id())},
                      {"company_id", nullable(id())},
                      {"owner_id", nullable(id())},
                      {"expected_close_date", nullable(date())},
                      {"status", status}});
  define(r, "DealCard", card);
  auto deal = card;
  auto& props = deal["properties"].as_object();
  props["pipeline_id"] = id();
  props["stage_id"] = id();
  props["lost_reason"] = nullable(text({}));
  props["custom_fields"] = any_object();
  props["created_at"] = timestamp();
  props["updated_at"] = timestamp();
  props["closed_at"] = nullable(timestamp());
  auto& required = deal["required"].as_array();
  for (auto k : {"pipeline_id", "stage_id", "lost_reason", "custom_fields", "created_at",
                 "updated_at", "closed_at"})
    required.emplace_back(k);
  define(r, "Deal", deal);
  define(r, "DealPage", page_of("Deal"));
  define(r, "DealHistoryEntry",
         object({{"id", id()},
                 {"deal_id", id()},
                 {"kind", one_of(history_kinds)},
                 {"from_stage_id", nullable(id())},
                 {"to_stage_id", nullable(id())},
                 {"from_amount", nullable(money())},
                 {"to_amount", nullable(money())},
                 {"currency", text({})},
                 {"user_id", nullable(id())},
                 {"workflow_run_id", nullable(id())},
                 {"at", timestamp()}}));
  define(r, "DealHistoryPage", page_of("DealHistoryEntry"));
  auto deals = array_of(ref("DealCreate"));
  deals["minItems"] = 1;
  deals["maxItems"] = rules::bulk_max;
  define(r, "DealBulkCreate", object({{"deals", deals}}));
  define(r, "DealBulkResults", bulk_results(rules::bulk_max));
}

// The list's filters and sorting (read_deal_query); the export takes them without paging.
std::vector<query_param> deal_filters() {
  using namespace schema;
  namespace rules = deal_rules;
  std::vector<query_param> params{
      query("pipeline_id", id(), "in this pipeline"),
      query("stage_id", id(), "in this stage"),
      query("owner_id", id(), "owned by this user"),
      query("contact_id", id(), "of this contact"),
      query("company_id", id(), "of this company"),
      query("status", one_of(pipeline_rules::kinds), "open, won or lost"),
      query("currency", text_matching(rules::currency_pattern), "in this currency (ISO 4217)"),
      query("amount_min", text_matching(rules::amount_pattern),
            "an amount at least this (decimal string); deals without amount are left out"),
      query("amount_max", text_matching(rules::amount_pattern),
            "an amount at most this (decimal string); deals without amount are left out"),
      query("expected_close_after", date(), "expected to close on or after this day"),
      query("expected_close_before", date(), "expected to close on or before this day"),
      query("search", text({}), "part of the title (any case)"),
      custom_field_filter()};
  for (auto& p : sorting(rules::sort_fields, "the order (nulls last ascending, first descending)"))
    params.push_back(std::move(p));
  return params;
}

} // namespace

void add_deal_routes(router& r, services& s) {
  using domain::permission;
  constexpr auto read = permission::read_records;
  constexpr auto write = permission::write_records;
  const char* tag = "deals";
  define_deal_schemas(r);
  r.add({verb::get, "/api/v1/deals", access::bearer, read, bind(s, list),
         "List deals (filters, search, sorting)", tag},
        route_doc("", "DealPage").with_query(schema::paged(deal_filters())));
  r.add({verb::post, "/api/v1/deals", access::bearer, write, bind(s, create),
         "Create a deal (Idempotency-Key supported)", tag, 201},
        route_doc("DealCreate", "Deal")
            .with_headers({schema::idempotency_key()})
            .with_example(R"({"title": "Orthodontic treatment plan", "amount": "4800.00",
 "currency": "BRL", "contact_id": 1, "expected_close_date": "2025-09-30",
 "custom_fields": {"referral": "Dr. Lima"}})"));
  r.add({verb::post, "/api/v1/deals/bulk", access::bearer, write, bind(s, bulk),
         "Create up to " + std::to_string(deal_rules::bulk_max) + " deals, each on its own", tag},
        route_doc("DealBulkCreate", "DealBulkResults").with_headers({schema::idempotency_key()}));
  r.add(import_route({verb::post, "/api/v1/deals/import", access::bearer, write, bind(s, import),
                      "Import up to " + std::to_string(import_rows_max) +
                          " deals from CSV (text/csv), committed 1,000 rows at a time and "
                          "answered as they commit: the columns of GET /deals/export, title "
                          "required (id, created_at, updated_at and closed_at ignored; "
                          "custom_fields as a JSON object)",
                      tag}),
        route_doc("", "ImportResults")
            .with_media("text/csv", "application/json")
            .with_headers({schema::idempotency_key()}));
  r.add({verb::get, "/api/v1/deals/export", access::bearer, read, bind(s, export_csv),
         "Export the matching deals as CSV", tag},
        route_doc().with_query(deal_filters()).with_media("application/json", "text/csv"));
  r.add({verb::get, "/api/v1/deals/{id}", access::bearer, read, bind(s, get), "Get a deal", tag},
        {"", "Deal"});
  r.add({verb::put, "/api/v1/deals/{id}", access::bearer, write, bind(s, update),
         "Update a deal (a stage_id change is a move)", tag},
        {"DealUpdate", "Deal"});
  r.add({verb::patch, "/api/v1/deals/{id}", access::bearer, write, bind(s, update),
         "Update a deal (same as PUT)", tag},
        {"DealUpdate", "Deal"});
  r.add({verb::del, "/api/v1/deals/{id}", access::bearer, permission::delete_records,
         bind(s, remove), "Delete a deal", tag, 204});
  r.add({verb::post, "/api/v1/deals/{id}/move", access::bearer, write, bind(s, move),
         "Move a deal to a stage (and a board position)", tag},
        {"DealMove", "Deal"});
  r.add({verb::get, "/api/v1/deals/{id}/history", access::bearer, read, bind(s, history),
         "Stage and amount changes of a deal, oldest first", tag},
        route_doc("", "DealHistoryPage").with_query(schema::paging()));
  r.add({verb::get, "/api/v1/contacts/{id}/deals", access::bearer, read, bind(s, contact_deals),
         "The deals of a contact", tag},
        route_doc("", "DealPage").with_query(schema::paged(deal_filters())));
}

} // namespace crm::http
