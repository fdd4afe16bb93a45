// Custom-field endpoints (contract §6): list, create, get, update, soft and hard delete.
// Everyone reads; only admins change definitions.
#include "http/api.hpp"

#include "actors/fields.hpp"
#include "domain/clock.hpp"
#include "http/contact_input.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"

#include <boost/json.hpp>

#include <array>
#include <set>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

// The rules of a custom-field definition (contract §6), for the readers below and the schemas
// (add_field_routes). The names are those domain::parse_field_entity and parse_field_type read.
namespace field_rules {
constexpr std::array<std::string_view, 3> entities{"contact", "company", "deal"};
constexpr std::array<std::string_view, 12> types{"text",    "textarea", "number",   "integer",
                                                 "boolean", "date",     "datetime", "email",
                                                 "phone",   "url",      "select",   "multiselect"};
// domain::valid_field_name
constexpr std::string_view name_pattern = "^[a-z][a-z0-9_]{0,62}$";
constexpr text_rule label{.min = 1, .max = 100, .trim = true};
constexpr std::size_t option_max = 100; // bytes of an option
} // namespace field_rules

std::string encode_field(const domain::custom_field& f) {
  json::object o;
  o["field_id"] = f.id;
  o["entity"] = domain::to_string(f.entity);
  o["name"] = f.name;
  o["label"] = f.label;
  o["field_type"] = domain::to_string(f.type);
  if (domain::has_options(f.type)) {
    json::array a;
    for (auto& x : f.options) a.emplace_back(x);
    o["options"] = std::move(a);
  } else {
    o["options"] = nullptr;
  }
  o["required"] = f.required;
  o["is_active"] = f.is_active;
  o["sensitive"] = f.sensitive;
  o["created_at"] = domain::format_rfc3339(f.created_at);
  o["updated_at"] = domain::format_rfc3339(f.updated_at);
  return json::serialize(o);
}

std::optional<domain::field_entity> entity_of(const exchange_ptr& ex, std::vector<issue>& issues) {
  auto name = ex->param("entity");
  auto& known = field_rules::entities;
  std::optional<domain::field_entity> e;
  if (std::find(known.begin(), known.end(), name) != known.end())
    e = domain::parse_field_entity(name);
  if (!e) issues.push_back({{"path", "entity"}, enum_message(known), "enum"});
  return e;
}

// A field_type of field_rules::types; nothing (with its issue) when sent and not one of them.
std::optional<domain::field_type> read_type(body_reader& body, bool required) {
  auto t = body.one_of("field_type", required, field_rules::types);
  if (!t) return std::nullopt;
  auto type = domain::parse_field_type(*t);
  if (!type) body.add({"body", "field_type"}, enum_message(field_rules::types), "enum");
  return type;
}

std::optional<std::vector<std::string>> read_options(body_reader& body) {
  auto v = body.raw("options");
  if (!v || v->is_null()) return std::nullopt;
  auto bad = [&](std::string msg) {
    body.add({"body", "options"}, std::move(msg), "value_error");
    return std::nullopt;
  };
  auto a = v->if_array();
  if (!a || a->empty()) return bad("options must be a non-empty list of strings");
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& x : *a) {
    auto s = x.if_string();
    if (!s || s->empty() || s->size() > field_rules::option_max)
      return bad("each option must be a string of 1-" + std::to_string(field_rules::option_max) +
                 " characters");
    std::string t(s->data(), s->size());
    if (!seen.insert(t).second) return bad("options must be distinct");
    out.push_back(std::move(t));
  }
  return out;
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto entity = entity_of(ex, issues);
  auto inactive = query_bool(ex->req, "include_inactive", false, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_fields(s.rt, ex->who.tenant_id, *entity, *inactive,
                      actors::callback<std::vector<domain::custom_field>>(
                          [ex](domain::outcome<std::vector<domain::custom_field>> r) {
                            if (!r) return ex->fail(r.error());
                            std::string out = "[";
                            for (std::size_t i = 0; i < r->size(); ++i)
                              out += (i ? "," : "") + encode_field((*r)[i]);
                            ex->json(200, out + "]");
                          }));
}

actors::callback<domain::custom_field> field_reply(const exchange_ptr& ex, int status) {
  return actors::callback<domain::custom_field>(
      [ex, status](domain::outcome<domain::custom_field> r) {
        if (!r) return ex->fail(r.error());
        response res;
        res.status = status;
        res.body = encode_field(*r);
        if (status == 201)
          res.headers.emplace_back("Location", "/api/v1/fields/" +
                                                   std::string(domain::to_string(r->entity)) +
                                                   "/custom/" + std::to_string(r->id));
        ex->respond(std::move(res));
      });
}

void create(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto entity = entity_of(ex, path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto name = body.text("name", true);
  if (name && !domain::valid_field_name(*name)) {
    body.add({"body", "name"},
             "String should match pattern '" + std::string(field_rules::name_pattern) + "'",
             "value_error");
    name.reset();
  }
  auto label = body.text("label", false, field_rules::label);
  auto type = read_type(body, true);
  bool options_sent = body.has("options") && !body.is_null("options");
  auto options = read_options(body);
  auto required = body.boolean("required", false);
  auto active = body.boolean("is_active", false);
  auto sensitive = body.boolean("sensitive", false);
  if (sensitive.value_or(false) && entity && *entity != domain::field_entity::contact)
    body.add({"body", "sensitive"}, "only contact fields can be sensitive", "value_error");
  if (type) {
    if (domain::has_options(*type) && !options && !options_sent)
      body.add({"body", "options"}, "select and multiselect fields need options", "value_error");
    if (!domain::has_options(*type) && options_sent)
      body.add({"body", "options"}, "options are only allowed for select and multiselect",
               "value_error");
  }
  if (!body.finish()) return ex->fail(body.failure());
  domain::custom_field f;
  f.entity = *entity;
  f.name = *name;
  f.label = label.value_or(*name);
  f.type = *type;
  if (options) f.options = *options;
  f.required = required.value_or(false);
  f.is_active = active.value_or(true);
  f.sensitive = sensitive.value_or(false);
  actors::create_field(s.rt, ex->who.tenant_id, std::move(f), field_reply(ex, 201));
}

std::optional<std::int64_t> field_id(const exchange_ptr& ex, std::vector<issue>& issues) {
  return path_id(ex->param("field_id"), "field_id", issues);
}

void get(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto entity = entity_of(ex, issues);
  auto id = field_id(ex, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::get_field(s.rt, ex->who.tenant_id, *entity, *id, field_reply(ex, 200));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto entity = entity_of(ex, path_issues);
  auto id = field_id(ex, path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  actors::field_patch p;
  p.name = body.text("name", false);
  p.label = body.text("label", false, field_rules::label);
  p.type = read_type(body, false);
  p.options = read_options(body);
  p.required = body.boolean("required", false);
  p.is_active = body.boolean("is_active", false);
  p.sensitive = body.boolean("sensitive", false);
  body.finish();
  if (!body.valid_json() || !path_issues.empty()) return ex->fail(body.failure());
  p.issues = std::move(body.issues());
  actors::update_field(s.rt, ex->who.tenant_id, *entity, *id, std::move(p), field_reply(ex, 200));
}

void remove(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto entity = entity_of(ex, issues);
  auto id = field_id(ex, issues);
  auto hard = query_bool(ex->req, "hard_delete", false, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::delete_field(
      s.rt, ex->who.tenant_id, *entity, *id, *hard,
      actors::callback<domain::done>([ex, id = *id, hard = *hard](domain::outcome<domain::done> r) {
        if (!r) return ex->fail(r.error());
        json::object o{{"success", true}, {"field_id", id}, {"hard_delete", hard}};
        ex->json(200, json::serialize(o));
      }));
}

void define_field_schemas(router& r) {
  using namespace schema;
  namespace rules = field_rules;
  auto options = [] {
    auto o = array_of(text({.min = 1, .max = rules::option_max}));
    o["minItems"] = 1;
    o["uniqueItems"] = true;
    o["description"] = "select and multiselect only: distinct strings of 1 to " +
                       std::to_string(rules::option_max) + " bytes";
    return o;
  };
  auto sensitive = boolean();
  sensitive["description"] = "contact fields only, fixed at creation: values sealed at rest, "
                             "masked for roles below manager, every disclosure audited";
  auto input = [&](bool creating) {
    auto name = creating ? text_matching(rules::name_pattern) : text({});
    if (!creating) name["description"] = "a field's name cannot change: only the current one";
    return object({{"name", name, creating},
                   {"label", text(rules::label), false},
                   {"field_type", one_of(rules::types), creating},
                   {"options", nullable(options()), false},
                   {"required", boolean(), false},
                   {"is_active", boolean(), false},
                   {"sensitive", sensitive, false}});
  };
  define(r, "CustomFieldCreate", input(true));
  define(r, "CustomFieldUpdate", input(false));
  define(r, "CustomField",
         object({{"field_id", id()},
                 {"entity", one_of(rules::entities)},
                 {"name", text({})},
                 {"label", text({})},
                 {"field_type", one_of(rules::types)},
                 {"options", nullable(array_of(text({})))},
                 {"required", boolean()},
                 {"is_active", boolean()},
                 {"sensitive", boolean()},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "CustomFieldList", array_of(ref("CustomField")));
  auto success = boolean();
  success["const"] = true;
  define(r, "CustomFieldDeleted",
         object({{"success", success}, {"field_id", id()}, {"hard_delete", boolean()}}));
}

// The {entity} of every route: one of field_rules::entities.
route_doc field_doc(std::string request, std::string response) {
  route_doc d(std::move(request), std::move(response));
  d.with_path("entity", schema::text_of(schema::one_of(field_rules::entities)));
  return d;
}

schema::object_t false_by_default() {
  auto b = schema::boolean();
  b["default"] = false;
  return b;
}

} // namespace

void add_field_routes(router& r, services& s) {
  using domain::permission;
  define_field_schemas(r);
  r.add({verb::get, "/api/v1/fields/{entity}/custom", access::bearer, permission::read_records,
         bind(s, list), "List custom fields of an entity (include_inactive)", "fields"},
        field_doc("", "CustomFieldList")
            .with_query({schema::query("include_inactive", false_by_default(),
                                       "also the inactive fields (true/1 or false/0)")}));
  r.add({verb::post, "/api/v1/fields/{entity}/custom", access::bearer, permission::administer,
         bind(s, create), "Define a custom field", "fields", 201},
        field_doc("CustomFieldCreate", "CustomField"));
  r.add({verb::get, "/api/v1/fields/{entity}/custom/{field_id}", access::bearer,
         permission::read_records, bind(s, get), "Get a custom field", "fields"},
        field_doc("", "CustomField"));
  r.add({verb::put, "/api/v1/fields/{entity}/custom/{field_id}", access::bearer,
         permission::administer, bind(s, update), "Update a custom field", "fields"},
        field_doc("CustomFieldUpdate", "CustomField"));
  r.add({verb::del, "/api/v1/fields/{entity}/custom/{field_id}", access::bearer,
         permission::administer, bind(s, remove),
         "Delete a custom field: soft (is_active=false, values kept) or hard_delete=true",
         "fields"},
        field_doc("", "CustomFieldDeleted")
            .with_query({schema::query("hard_delete", false_by_default(),
                                       "erase the definition and the values records hold "
                                       "(true/1); else only deactivate it (false/0)")}));
}

} // namespace crm::http
