// Custom-field endpoints (contract §6): list, create, get, update, soft and hard delete.
// Everyone reads; only admins change definitions.
#include "http/api.hpp"

#include "actors/fields.hpp"
#include "domain/clock.hpp"
#include "http/json.hpp"

#include <boost/json.hpp>

#include <set>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

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
  auto e = domain::parse_field_entity(ex->param("entity"));
  if (!e)
    issues.push_back(
        {{"path", "entity"}, "Input should be 'contact', 'company' or 'deal'", "enum"});
  return e;
}

constexpr const char* type_names =
    "'text', 'textarea', 'number', 'integer', 'boolean', 'date', 'datetime', 'email', 'phone', "
    "'url', 'select' or 'multiselect'";

std::optional<std::vector<std::string>> read_options(body_reader& body) {
  auto v = body.raw("options");
  if (!v || v->is_null()) return std::nullopt;
  auto bad = [&](const char* msg) {
    body.add({"body", "options"}, msg, "value_error");
    return std::nullopt;
  };
  auto a = v->if_array();
  if (!a || a->empty()) return bad("options must be a non-empty list of strings");
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto& x : *a) {
    auto s = x.if_string();
    if (!s || s->empty() || s->size() > 100)
      return bad("each option must be a string of 1-100 characters");
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
    body.add({"body", "name"}, "String should match pattern '^[a-z][a-z0-9_]{0,62}$'",
             "value_error");
    name.reset();
  }
  auto label = body.text("label", false, {.min = 1, .max = 100, .trim = true});
  auto type_text = body.text("field_type", true);
  std::optional<domain::field_type> type;
  if (type_text) {
    type = domain::parse_field_type(*type_text);
    if (!type)
      body.add({"body", "field_type"}, std::string("Input should be ") + type_names, "enum");
  }
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
  p.label = body.text("label", false, {.min = 1, .max = 100, .trim = true});
  if (auto t = body.text("field_type", false)) {
    p.type = domain::parse_field_type(*t);
    if (!p.type)
      body.add({"body", "field_type"}, std::string("Input should be ") + type_names, "enum");
  }
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

} // namespace

void add_field_routes(router& r, services& s) {
  using domain::permission;
  r.add({verb::get, "/api/v1/fields/{entity}/custom", access::bearer, permission::read_records,
         bind(s, list), "List custom fields of an entity (include_inactive)", "fields"});
  r.add({verb::post, "/api/v1/fields/{entity}/custom", access::bearer, permission::administer,
         bind(s, create), "Define a custom field", "fields", 201});
  r.add({verb::get, "/api/v1/fields/{entity}/custom/{field_id}", access::bearer,
         permission::read_records, bind(s, get), "Get a custom field", "fields"});
  r.add({verb::put, "/api/v1/fields/{entity}/custom/{field_id}", access::bearer,
         permission::administer, bind(s, update), "Update a custom field", "fields"});
  r.add({verb::del, "/api/v1/fields/{entity}/custom/{field_id}", access::bearer,
         permission::administer, bind(s, remove),
         "Delete a custom field: soft (is_active=false, values kept) or hard_delete=true",
         "fields"});
}

} // namespace crm::http
