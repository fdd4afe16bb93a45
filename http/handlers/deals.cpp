// Deal endpoints (contract §8, docs/pipeline.md): CRUD, moves, history, the list with filters
// and sorting, a contact's deals, bulk create and CSV export. Agents and up write, managers
// and admins delete, every role reads.
#include "http/api.hpp"

#include "actors/deals.hpp"
#include "domain/deal.hpp"
#include "http/deal_input.hpp"
#include "http/json.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

constexpr std::size_t max_bulk = 1000;

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
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
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
  else if (it->value().as_array().size() > max_bulk)
    issues.push_back({{"body", "deals"}, "List should have at most 1000 items", "too_long"});
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

} // namespace

void add_deal_routes(router& r, services& s) {
  using domain::permission;
  constexpr auto read = permission::read_records;
  constexpr auto write = permission::write_records;
  const char* tag = "deals";
  r.add({verb::get, "/api/v1/deals", access::bearer, read, bind(s, list),
         "List deals (filters, search, sorting)", tag});
  r.add({verb::post, "/api/v1/deals", access::bearer, write, bind(s, create),
         "Create a deal (Idempotency-Key supported)", tag, 201});
  r.add({verb::post, "/api/v1/deals/bulk", access::bearer, write, bind(s, bulk),
         "Create up to 1000 deals, each on its own", tag});
  r.add({verb::get, "/api/v1/deals/export", access::bearer, read, bind(s, export_csv),
         "Export the matching deals as CSV", tag});
  r.add({verb::get, "/api/v1/deals/{id}", access::bearer, read, bind(s, get), "Get a deal", tag});
  r.add({verb::put, "/api/v1/deals/{id}", access::bearer, write, bind(s, update),
         "Update a deal (a stage_id change is a move)", tag});
  r.add({verb::patch, "/api/v1/deals/{id}", access::bearer, write, bind(s, update),
         "Update a deal (same as PUT)", tag});
  r.add({verb::del, "/api/v1/deals/{id}", access::bearer, permission::delete_records,
         bind(s, remove), "Delete a deal", tag, 204});
  r.add({verb::post, "/api/v1/deals/{id}/move", access::bearer, write, bind(s, move),
         "Move a deal to a stage (and a board position)", tag});
  r.add({verb::get, "/api/v1/deals/{id}/history", access::bearer, read, bind(s, history),
         "Stage and amount changes of a deal, oldest first", tag});
  r.add({verb::get, "/api/v1/contacts/{id}/deals", access::bearer, read, bind(s, contact_deals),
         "The deals of a contact", tag});
}

} // namespace crm::http
