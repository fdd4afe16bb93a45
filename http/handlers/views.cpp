// Saved views (contract §11, docs/design.md "Views"): a named contact search for one user, or
// shared with the tenant by a manager; run for a page of contacts, or counted.
#include "http/api.hpp"

#include "actors/contacts.hpp"
#include "actors/views.hpp"
#include "domain/contact_search.hpp"
#include "domain/json_parse.hpp"
#include "domain/saved_view.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

namespace crm::http {
namespace {

using domain::failure;

constexpr text_rule name_rule{.min = 1, .max = domain::view_rules::name_max, .trim = true};

domain::requester editor(const exchange_ptr& ex) {
  return {ex->who.acting_user(), ex->who.role};
}

// The search a view keeps (its filter_groups and sort), checked as POST /contacts/search checks
// a body (paging belongs to each run): its JSON text, or nothing with the issues at body.filter.
std::optional<std::string> read_filter(const boost::json::value* v,
                                       std::vector<domain::issue>& issues) {
  if (!v || !v->is_object()) {
    issues.push_back({{std::string("body"), std::string("filter")},
                      "Input should be a valid dictionary: {\"filter_groups\", \"sort\"}",
                      "dict_type"});
    return std::nullopt;
  }
  auto& o = v->as_object();
  std::vector<domain::issue> found;
  for (auto key : {"page", "per_page"})
    if (o.contains(key))
      found.push_back({{std::string("body"), std::string(key)},
                       "a view keeps no page: each run asks for its own",
                       "extra_forbidden"});
  domain::parse_contact_search(*v, found);
  for (auto& i : found) {
    // Located inside the view's filter.
    i.loc.insert(i.loc.begin() + 1, std::string("filter"));
    issues.push_back(std::move(i));
  }
  if (!found.empty()) return std::nullopt;
  return boost::json::serialize(o);
}

void create(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  domain::saved_view v;
  if (auto name = body.text("name", true, name_rule)) v.name = *name;
  bool shared = body.boolean("shared", false).value_or(false);
  std::optional<std::string> filter;
  if (body.valid_json()) filter = read_filter(body.raw("filter"), body.issues());
  if (!body.finish()) return ex->fail(body.failure());
  v.filter = *filter;
  actors::create_view(s.rt, ex->who.tenant_id, std::move(v), shared, editor(ex),
                      created_reply(ex, "/api/v1/views/"));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_views(s.rt, ex->who.tenant_id, editor(ex), *page, *per_page, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_view(
      s.rt, ex->who.tenant_id, *id, editor(ex),
      actors::callback<domain::saved_view>([ex](domain::outcome<domain::saved_view> v) {
        if (!v) return ex->fail(v.error());
        ex->json(200, boost::json::serialize(domain::view_to_json(*v)));
      }));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  domain::view_patch p;
  p.name = body.text("name", false, name_rule);
  if (body.valid_json() && body.has("filter"))
    p.filter = read_filter(body.raw("filter"), body.issues());
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_view(s.rt, ex->who.tenant_id, *id, std::move(p), editor(ex), json_reply(ex));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_view(s.rt, ex->who.tenant_id, *id, editor(ex), no_content_reply(ex));
}

// Runs `then(search)` with the view's search, or answers why not.
template <class Then>
void with_search(services& s, const exchange_ptr& ex, std::int64_t id, Then then) {
  actors::get_view(
      s.rt, ex->who.tenant_id, id, editor(ex),
      actors::callback<domain::saved_view>(
          [ex, then = std::move(then)](domain::outcome<domain::saved_view> v) mutable {
            if (!v) return ex->fail(v.error());
            std::vector<domain::issue> issues;
            boost::json::error_code ec;
            auto search = domain::parse_contact_search(domain::parse_json(v->filter, ec), issues);
            if (ec || !search)
              return ex->fail(
                  failure::of(domain::errc::conflict, "the view's filter can no longer be read"));
            then(std::move(*search));
          }));
}

void contacts(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  with_search(s, ex, *id,
              [&s, ex, page = *page, per_page = *per_page](domain::contact_search search) {
                search.page = page;
                search.per_page = per_page;
                actors::search_contacts(s.rt, ex->who.tenant_id, std::move(search), json_reply(ex));
              });
}

void count(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  with_search(s, ex, *id, [&s, ex](domain::contact_search search) {
    actors::count_contacts(s.rt, ex->who.tenant_id, std::move(search),
                           actors::callback<std::int64_t>([ex](domain::outcome<std::int64_t> n) {
                             if (!n) return ex->fail(n.error());
                             boost::json::object o;
                             o["count"] = *n;
                             ex->json(200, boost::json::serialize(o));
                           }));
  });
}

constexpr const char* create_example = R"({
  "name": "Diabetic patients without a follow-up",
  "shared": true,
  "filter": {"filter_groups": [{"filters": [
    {"field": "tag", "op": "eq", "value": "diabetes"},
    {"field": "tag", "op": "neq", "value": "follow-up"}]}],
    "sort": {"field": "last_name"}}
})";

void define_view_schemas(router& r) {
  using namespace schema;
  auto shared = boolean();
  shared["default"] = false;
  shared["description"] = "shared with the tenant (a manager's or an admin's to make); else yours";
  auto filter = ref("ContactSearch");
  define(r, "ViewCreate",
         object({{"name", text(name_rule)}, {"shared", shared, false}, {"filter", filter}}));
  define(r, "ViewUpdate", object({{"name", text(name_rule), false}, {"filter", filter, false}}));
  define(r, "View",
         object({{"id", id()},
                 {"name", text({})},
                 {"shared", boolean()},
                 {"owner_id", nullable(id())},
                 {"filter", any_object()},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "ViewPage", page_of("View"));
  define(r, "ViewCount", object({{"count", integer()}}));
}

} // namespace

void add_view_routes(router& r, services& s) {
  using domain::permission;
  define_view_schemas(r);
  r.add({verb::post, "/api/v1/views", access::bearer, permission::read_records, bind(s, create),
         "Save a contact search as a view (yours, or shared with the tenant)", "views", 201},
        route_doc("ViewCreate", "View").with_example(create_example).fails_with({409}));
  r.add({verb::get, "/api/v1/views", access::bearer, permission::read_records, bind(s, list),
         "The tenant's shared views, then yours, each by name", "views"},
        route_doc("", "ViewPage").with_query(schema::paging()));
  r.add({verb::get, "/api/v1/views/{id}", access::bearer, permission::read_records, bind(s, get),
         "One view", "views"},
        {"", "View"});
  r.add({verb::patch, "/api/v1/views/{id}", access::bearer, permission::read_records,
         bind(s, update), "Rename a view or change its search (a shared one: a manager)", "views"},
        route_doc("ViewUpdate", "View").fails_with({409}));
  r.add({verb::del, "/api/v1/views/{id}", access::bearer, permission::read_records, bind(s, remove),
         "Delete a view (a shared one: a manager)", "views", 204});
  r.add({verb::get, "/api/v1/views/{id}/contacts", access::bearer, permission::read_records,
         bind(s, contacts), "The contacts the view finds, a page at a time", "views"},
        route_doc("", "ContactPage").with_query(schema::paging()).fails_with({409}));
  r.add({verb::get, "/api/v1/views/{id}/count", access::bearer, permission::read_records,
         bind(s, count), "How many contacts the view finds", "views"},
        route_doc("", "ViewCount").fails_with({409}));
}

} // namespace crm::http
