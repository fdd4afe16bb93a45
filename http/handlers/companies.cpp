// Company endpoints (contract §5): CRUD and a paginated list with search, sort and filters.
#include "http/api.hpp"

#include "actors/contacts.hpp"
#include "http/contact_input.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

actors::callback<domain::company> company_reply(const exchange_ptr& ex, int status) {
  return actors::callback<domain::company>([ex, status](domain::outcome<domain::company> r) {
    if (!r) return ex->fail(r.error());
    response res;
    res.status = status;
    res.body = domain::encode_company(*r);
    if (status == 201)
      res.headers.emplace_back("Location", "/api/v1/companies/" + std::to_string(r->id));
    ex->respond(std::move(res));
  });
}

void create(services& s, const exchange_ptr& ex) {
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto f = read_company(*body, true, issues);
  f.issues = std::move(issues);
  actors::create_company(s.rt, ex->who.tenant_id, std::move(f), company_reply(ex, 201));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_company(s.rt, ex->who.tenant_id, *id, company_reply(ex, 200));
}

void update(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto f = read_company(*body, false, issues);
  f.issues = std::move(issues);
  actors::update_company(s.rt, ex->who.tenant_id, *id, std::move(f), company_reply(ex, 200));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_company(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  actors::company_query q;
  for (auto& [k, v] : ex->req.query) {
    if (k == "search")
      q.search = v;
    else if (k == "industry")
      q.industry = v;
    else if (k == "sort_by") {
      auto& fields = company_rules::sort_fields;
      if (std::find(fields.begin(), fields.end(), v) != fields.end())
        q.sort = v;
      else
        issues.push_back({{"query", "sort_by"}, enum_message(fields), "enum"});
    } else if (k == "sort_order") {
      auto& orders = list_rules::sort_orders;
      if (std::find(orders.begin(), orders.end(), v) != orders.end())
        q.descending = v == "desc";
      else
        issues.push_back({{"query", "sort_order"}, enum_message(orders), "enum"});
    }
  }
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  q.offset = static_cast<std::int64_t>(*page - 1) * *per_page;
  q.limit = *per_page;
  actors::list_companies(
      s.rt, ex->who.tenant_id, std::move(q),
      actors::callback<actors::company_list>(
          [ex, page = *page, per_page = *per_page](domain::outcome<actors::company_list> r) {
            if (!r) return ex->fail(r.error());
            ex->json(200, domain::encode_company_page(r->items, r->total, page, per_page));
          }));
}

std::vector<query_param> company_list_query() {
  using namespace schema;
  auto params = paged({query("search", text({}), "part of the name or domain (any case)"),
                       query("industry", text({}), "exactly this industry")});
  for (auto& p : sorting(company_rules::sort_fields)) params.push_back(std::move(p));
  return params;
}

} // namespace

void add_company_routes(router& r, services& s) {
  using domain::permission;
  {
    using namespace schema;
    namespace rules = company_rules;
    auto input = [&](bool creating) {
      return object({{"name", text({.min = 1, .max = rules::name_max}), creating},
                     {"domain", nullable(text({.max = rules::domain_max})), false},
                     {"phone", nullable(text_matching(contact_rules::phone_pattern)), false},
                     {"industry", nullable(text({.max = rules::industry_max})), false},
                     {"address", nullable(text({.max = rules::address_max})), false},
                     {"custom_fields", object_t{{"type", "object"}}, false}});
    };
    define(r, "CompanyCreate", input(true));
    define(r, "CompanyUpdate", input(false));
    define(r, "Company",
           object({{"id", id()},
                   {"name", text({})},
                   {"domain", nullable(text({}))},
                   {"phone", nullable(text({}))},
                   {"industry", nullable(text({}))},
                   {"address", nullable(text({}))},
                   {"custom_fields", object_t{{"type", "object"}}},
                   {"created_at", timestamp()},
                   {"updated_at", timestamp()}}));
    define(r, "CompanyPage", page_of("Company"));
  }
  r.add({verb::get, "/api/v1/companies", access::bearer, permission::read_records, bind(s, list),
         "List companies", "companies"},
        route_doc("", "CompanyPage").with_query(company_list_query()));
  r.add({verb::post, "/api/v1/companies", access::bearer, permission::write_records,
         bind(s, create), "Create a company", "companies", 201},
        {"CompanyCreate", "Company"});
  r.add({verb::get, "/api/v1/companies/{id}", access::bearer, permission::read_records,
         bind(s, get), "Get a company", "companies"},
        {"", "Company"});
  r.add({verb::put, "/api/v1/companies/{id}", access::bearer, permission::write_records,
         bind(s, update), "Update a company", "companies"},
        {"CompanyUpdate", "Company"});
  r.add({verb::patch, "/api/v1/companies/{id}", access::bearer, permission::write_records,
         bind(s, update), "Update a company (same as PUT)", "companies"},
        {"CompanyUpdate", "Company"});
  r.add({verb::del, "/api/v1/companies/{id}", access::bearer, permission::delete_records,
         bind(s, remove), "Delete a company (its contacts keep no company)", "companies", 204});
}

} // namespace crm::http
