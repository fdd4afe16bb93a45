// Contact endpoints (spec "Contact endpoints", contract §4): CRUD, list, bulk create, CSV
// import and streamed CSV export, and the tag endpoints. The tenant comes from the token.
#include "http/api.hpp"

#include "actors/contacts.hpp"
#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/csv.hpp"
#include "domain/validation.hpp"
#include "http/contact_input.hpp"
#include "http/import_stream.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::errc;
using domain::failure;
using domain::issue;

constexpr std::size_t export_chunk = 500;

void create(services& s, const exchange_ptr& ex) {
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto f = read_contact(*body, true, {std::string("body")}, issues);
  f.issues = std::move(issues);
  actors::create_contact(
      s.rt, ex->who.tenant_id, std::move(f), idempotency_of(ex),
      actors::callback<actors::stored_response>([ex](domain::outcome<actors::stored_response> r) {
        reply_stored(ex, std::move(r), "/api/v1/contacts/");
      }));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_contact(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

std::vector<std::string> sent_fields(const json::object& o) {
  std::vector<std::string> out;
  for (auto& kv : o) out.emplace_back(kv.key());
  return out;
}

void update(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto f = read_contact(*body, false, {std::string("body")}, issues);
  f.issues = std::move(issues);
  actors::update_contact(s.rt, ex->who.tenant_id, *id, std::move(f),
                         actors::callback<domain::contact>(
                             [ex, fields = sent_fields(*body)](domain::outcome<domain::contact> r) {
                               if (!r) return ex->fail(r.error());
                               ex->json(200, domain::encode_contact_update(*r, fields));
                             }));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_contact(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto p = read_contact_query(ex->req, issues);
  if (!p) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_contacts(s.rt, ex->who.tenant_id, std::move(p->query), p->page, p->per_page,
                        json_reply(ex));
}

// POST /contacts/search (docs/design.md "Contact search").
void search(services& s, const exchange_ptr& ex) {
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto q = domain::parse_contact_search(boost::json::value(std::move(*body)), issues);
  if (!q) return ex->fail(failure::invalid(std::move(issues)));
  actors::search_contacts(s.rt, ex->who.tenant_id, std::move(*q), json_reply(ex));
}

void bulk(services& s, const exchange_ptr& ex) {
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto it = body->find("contacts");
  for (auto& kv : *body)
    if (kv.key() != "contacts")
      issues.push_back(
          {{"body", std::string(kv.key())}, "Extra inputs are not permitted", "extra_forbidden"});
  if (it == body->end()) {
    issues.push_back({{"body", "contacts"}, "Field required", "missing"});
  } else if (!it->value().is_array()) {
    issues.push_back({{"body", "contacts"}, "Input should be a valid list", "value_error"});
  } else if (it->value().as_array().size() > contact_rules::bulk_max) {
    issues.push_back(
        {{"body", "contacts"},
         "List should have at most " + std::to_string(contact_rules::bulk_max) + " items",
         "value_error"});
  }
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  auto& items = it->value().as_array();
  std::vector<actors::contact_fields> fields(items.size());
  std::vector<std::vector<issue>> errors(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    loc_path prefix{std::string("body"), std::string("contacts"), static_cast<std::int64_t>(i)};
    if (auto o = items[i].if_object()) {
      fields[i] = read_contact(*o, true, prefix, errors[i]);
    } else {
      errors[i].push_back({prefix, "Input should be a valid dictionary", "value_error"});
    }
  }
  actors::bulk_create_contacts(
      s.rt, ex->who.tenant_id, std::move(fields), std::move(errors), idempotency_of(ex), "contacts",
      actors::callback<actors::stored_response>([ex](domain::outcome<actors::stored_response> r) {
        reply_stored(ex, std::move(r), "");
      }));
}

constexpr std::array<std::string_view, 2> import_modes{"create", "upsert"};

void import(services& s, const exchange_ptr& ex) {
  auto mode = ex->req.query_value("mode").value_or("create");
  if (std::find(import_modes.begin(), import_modes.end(), mode) == import_modes.end())
    return ex->fail(
        failure::invalid({{{"query", "mode"}, "Input should be 'create' or 'upsert'", "enum"}}));
  bool upsert = mode == "upsert";
  import_csv(s, ex, importable_column, "first_name",
             [&s, tenant = ex->who.tenant_id,
              upsert](const std::vector<std::string>& header,
                      std::vector<std::vector<std::string>> rows, std::int64_t first,
                      actors::idempotency key, actors::callback<actors::stored_response> reply) {
               auto n = rows.size();
               std::vector<actors::contact_fields> fields(n);
               std::vector<std::vector<issue>> errors(n);
               for (std::size_t i = 0; i < n; ++i) {
                 loc_path prefix{std::string("body"), std::string("rows"),
                                 first + static_cast<std::int64_t>(i)};
                 fields[i] = read_contact_row(header, rows[i], prefix, errors[i]);
               }
               actors::bulk_create_contacts(s.rt, tenant, std::move(fields), std::move(errors),
                                            std::move(key), "rows", std::move(reply), upsert,
                                            first);
             });
}

std::string csv_row(const domain::contact& c) {
  std::string out;
  auto field = [&](std::string_view v, bool last = false) {
    domain::append_csv_field(out, v);
    out += last ? "\r\n" : ",";
  };
  field(std::to_string(c.id));
  field(c.first_name);
  field(c.last_name.value_or(""));
  field(c.email.value_or(""));
  field(c.phone.value_or(""));
  field(c.company_id ? std::to_string(*c.company_id) : "");
  field(domain::to_string(c.status));
  field(c.source ? domain::to_string(*c.source) : "");
  std::string tags;
  for (std::size_t i = 0; i < c.tags.size(); ++i) tags += (i ? ";" : "") + c.tags[i];
  field(tags);
  field(c.custom_fields);
  field(domain::format_rfc3339(c.created_at));
  field(domain::format_rfc3339(c.updated_at));
  field(c.owner_id ? std::to_string(*c.owner_id) : "", true);
  return out;
}

// Streams the matching contacts: the ids are taken once, then fetched in chunks, so neither
// side ever holds the whole file.
void export_csv(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto p = read_contact_query(ex->req, issues);
  if (!p) return ex->fail(failure::invalid(std::move(issues)));
  auto tenant = ex->who.tenant_id;
  actors::match_contacts(
      s.rt, tenant, std::move(p->query),
      actors::callback<std::vector<std::int64_t>>(
          [&s, ex, tenant,
           who = domain::current_audit_context()](domain::outcome<std::vector<std::int64_t>> ids) {
            if (!ids) return ex->fail(ids.error());
            struct cursor {
              std::vector<std::int64_t> ids;
              std::size_t next = 0;
              bool header_sent = false;
            };
            auto cur = std::make_shared<cursor>();
            cur->ids = std::move(*ids);
            response res;
            res.content_type = "text/csv; charset=utf-8";
            res.headers.emplace_back("Content-Disposition",
                                     "attachment; filename=\"contacts.csv\"");
            // Each chunk is fetched as the request's caller: sensitive values are opened (and
            // audited) only for the roles that may see them.
            res.stream = [&s, cur, tenant, who](chunk_sink sink) {
              domain::audit_scope scope(who);
              if (!cur->header_sent) {
                cur->header_sent = true;
                return sink(
                    std::string("id,first_name,last_name,email,phone,company_id,status,source,"
                                "tags,custom_fields,created_at,updated_at,owner_id\r\n"));
              }
              if (cur->next >= cur->ids.size()) return sink(stream_end::complete);
              auto end = std::min(cur->ids.size(), cur->next + export_chunk);
              std::vector<std::int64_t> slice(cur->ids.begin() +
                                                  static_cast<std::ptrdiff_t>(cur->next),
                                              cur->ids.begin() + static_cast<std::ptrdiff_t>(end));
              cur->next = end;
              actors::fetch_contacts(s.rt, tenant, std::move(slice),
                                     actors::callback<std::vector<domain::contact>>(
                                         [sink](domain::outcome<std::vector<domain::contact>> cs) {
                                           // The status is already sent: a failure breaks the body.
                                           if (!cs) return sink(stream_end::broken);
                                           std::string out;
                                           for (auto& c : *cs) out += csv_row(c);
                                           sink(std::move(out));
                                         }));
            };
            ex->respond(std::move(res));
          }));
}

void tags(services& s, const exchange_ptr& ex) {
  actors::list_tags(s.rt, ex->who.tenant_id,
                    actors::callback<std::vector<domain::tag_count>>(
                        [ex](domain::outcome<std::vector<domain::tag_count>> r) {
                          if (!r) return ex->fail(r.error());
                          ex->json(200, domain::encode_tags(*r));
                        }));
}

void add_tags(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  std::optional<std::vector<std::string>> list;
  for (auto& kv : *body)
    if (kv.key() != "tags")
      issues.push_back(
          {{"body", std::string(kv.key())}, "Extra inputs are not permitted", "extra_forbidden"});
  if (auto it = body->find("tags"); it == body->end())
    issues.push_back({{"body", "tags"}, "Field required", "missing"});
  else
    list = read_tags(it->value(), {std::string("body"), std::string("tags")}, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::add_tags(
      s.rt, ex->who.tenant_id, *id, std::move(*list),
      actors::callback<actors::contact_view>([ex](domain::outcome<actors::contact_view> r) {
        if (!r) return ex->fail(r.error());
        ex->json(200, domain::encode_contact_full(r->contact, r->company ? &*r->company : nullptr));
      }));
}

void remove_tag(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::remove_tag(s.rt, ex->who.tenant_id, *id, std::string(ex->param("tag")),
                     no_content_reply(ex));
}

void rename_tag(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto name =
      body.text("name", true, {.min = 1, .max = contact_rules::tag_rename_max, .trim = true});
  if (!body.finish()) return ex->fail(body.failure());
  actors::rename_tag(
      s.rt, ex->who.tenant_id, std::string(ex->param("name")), *name,
      actors::callback<domain::tag_count>([ex](domain::outcome<domain::tag_count> r) {
        if (!r) return ex->fail(r.error());
        ex->json(200, domain::encode_tag(*r));
      }));
}

} // namespace

namespace {

void define_contact_schemas(router& r) {
  using namespace schema;
  namespace rules = contact_rules;
  auto tags = [] {
    auto t = array_of(text({.min = 1, .max = rules::tag_max}));
    t["maxItems"] = rules::tags_max;
    return t;
  };
  auto custom_fields = [] {
    return object_t{{"type", "object"},
                    {"description", "values by custom-field key (GET /fields/contact/custom)"}};
  };
  auto owner = [] {
    auto o = nullable(id());
    o["description"] = "the user who owns the contact: an active user of the tenant";
    return o;
  };
  // The fields a client sends (all optional but first_name on create; null clears).
  auto input = [&](bool creating) {
    return object({{"first_name", text({.min = 1, .max = rules::first_name_max}), creating},
                   {"last_name", nullable(text({.max = rules::last_name_max})), false},
                   {"email", nullable(email(rules::email_max)), false},
                   {"phone", nullable(text_matching(rules::phone_pattern)), false},
                   {"company_id", nullable(id()), false},
                   {"owner_id", owner(), false},
                   {"status", one_of(rules::statuses), false},
                   {"source", nullable(one_of(rules::sources)), false},
                   {"tags", tags(), false},
                   {"custom_fields", custom_fields(), false}});
  };
  define(r, "ContactCreate", input(true));
  define(r, "ContactUpdate", input(false));
  define(r, "ContactCreated",
         object({{"id", id()},
                 {"first_name", text({})},
                 {"last_name", nullable(text({}))},
                 {"email", nullable(text({}))},
                 {"phone", nullable(text({}))},
                 {"status", one_of(rules::statuses)},
                 {"created_at", timestamp()}}));
  auto list_item = [&](bool full) {
    std::initializer_list<property> common = {{"id", id()},
                                              {"first_name", text({})},
                                              {"last_name", nullable(text({}))},
                                              {"email", nullable(text({}))},
                                              {"phone", nullable(text({}))},
                                              {"company_id", nullable(id())},
                                              {"owner_id", owner()},
                                              {"status", one_of(rules::statuses)},
                                              {"source", nullable(one_of(rules::sources))},
                                              {"created_at", timestamp()},
                                              {"updated_at", timestamp()}};
    auto o = object(common);
    if (full) {
      auto& props = o["properties"].as_object();
      auto& required = o["required"].as_array();
      props["company"] = nullable(object({{"id", id()}, {"name", text({})}}));
      props["tags"] = array_of(text({}));
      props["custom_fields"] = custom_fields();
      for (auto k : {"company", "tags", "custom_fields"}) required.emplace_back(k);
    }
    return o;
  };
  define(r, "ContactListItem", list_item(false));
  define(r, "Contact", list_item(true));
  define(r, "ContactPage", page_of("ContactListItem"));
  // PUT/PATCH: the id, what the request changed and updated_at.
  auto changed = list_item(true);
  changed["required"] = boost::json::array{"id", "updated_at"};
  changed["properties"].as_object()["company_id"] = nullable(id());
  define(r, "ContactChange", changed);
  auto contacts = array_of(ref("ContactCreate"));
  contacts["maxItems"] = rules::bulk_max;
  define(r, "ContactBulkCreate", object({{"contacts", contacts}}));
  define(r, "ContactBulkResults", bulk_results(rules::bulk_max));
  // Both imports' answer (contacts and deals: http/import_stream.hpp).
  define(r, "ImportResults", bulk_results(import_rows_max));
  // POST /contacts/search (domain::parse_contact_search).
  namespace search_rules = domain::search_rules;
  auto value = object_t{{"description",
                         "what the op compares the field with: none for exists and not_exists, "
                         "a list for in and not_in, else one value of the field's type"}};
  auto field = text({.min = 1, .max = 70});
  field["description"] = "a field of the list, tag, owner_id, or cf.<key> of a contact field";
  auto filters = array_of(
      object({{"field", field}, {"op", one_of(search_rules::ops)}, {"value", value, false}}));
  filters["minItems"] = 1;
  filters["maxItems"] = search_rules::filters_max;
  auto groups = array_of(object({{"filters", filters}}));
  groups["maxItems"] = search_rules::groups_max;
  groups["description"] = "OR-ed; the filters of a group are AND-ed (no group: every contact)";
  define(r, "ContactSearch",
         object({{"filter_groups", groups, false},
                 {"sort",
                  object({{"field", one_of(rules::sort_fields)},
                          {"order", one_of(list_rules::sort_orders), false}}),
                  false},
                 {"page", integer(1, paging_rules::page_max), false},
                 {"per_page", integer(1, paging_rules::per_page_max), false}}));
  define(r, "TagsAdd", object({{"tags", tags()}}));
  define(r, "Tag", object({{"name", text({})}, {"count", integer()}}));
  define(r, "TagList", array_of(ref("Tag")));
  define(r, "TagRename",
         object({{"name", text({.min = 1, .max = rules::tag_rename_max, .trim = true})}}));
}

// The filters and sorting of the list (read_contact_query); the export takes them too.
std::vector<query_param> contact_filters() {
  using namespace schema;
  namespace rules = contact_rules;
  std::vector<query_param> params{
      query("search", text({}), "part of the name, e-mail or phone (any case)"),
      query("status", one_of(rules::statuses), "with this status"),
      query("source", one_of(rules::sources), "with this source"),
      query("company_id", integer(), "of this company"),
      query("owner_id", integer(), "owned by this user"),
      query("tag", array_of(text({})),
            "with this tag (any case); repeat it for every one of several"),
      query("created_after", timestamp(), "created after this instant (RFC 3339)"),
      query("created_before", timestamp(), "created before this instant (RFC 3339)"),
      query("updated_after", timestamp(), "updated after this instant (RFC 3339)"),
      custom_field_filter()};
  for (auto& p : sorting(rules::sort_fields)) params.push_back(std::move(p));
  return params;
}

} // namespace

void add_contact_routes(router& r, services& s) {
  using domain::permission;
  define_contact_schemas(r);
  r.add({verb::get, "/api/v1/contacts", access::bearer, permission::read_records, bind(s, list),
         "List contacts (paging, search, sorting, filters)", "contacts"},
        route_doc("", "ContactPage").with_query(schema::paged(contact_filters())));
  r.add({verb::post, "/api/v1/contacts", access::bearer, permission::write_records, bind(s, create),
         "Create a contact (Idempotency-Key supported)", "contacts", 201},
        route_doc("ContactCreate", "ContactCreated")
            .with_headers({schema::idempotency_key()})
            .with_example(R"({"first_name": "Ana", "last_name": "Silva",
 "email": "ana.silva@example.com", "phone": "+5511987654321", "status": "active",
 "source": "website", "tags": ["new-patient"]})"));
  auto bulk_max = std::to_string(contact_rules::bulk_max);
  r.add({verb::post, "/api/v1/contacts/bulk", access::bearer, permission::write_records,
         bind(s, bulk),
         "Create up to " + bulk_max + " contacts, each on its own (Idempotency-Key supported)",
         "contacts"},
        route_doc("ContactBulkCreate", "ContactBulkResults")
            .with_headers({schema::idempotency_key()}));
  r.add(import_route({verb::post, "/api/v1/contacts/import", access::bearer,
                      permission::write_records, bind(s, import),
                      "Import up to " + std::to_string(import_rows_max) +
                          " contacts from CSV (text/csv), committed 1,000 rows at a time and "
                          "answered as they commit: a header row of first_name (required), "
                          "last_name, email, phone, company_id, owner_id, status, source, tags "
                          "(;-separated), cf.<key>, custom_fields (a JSON object); the columns "
                          "id, created_at and updated_at of an export are ignored",
                      "contacts"}),
        route_doc("", "ImportResults")
            .with_media("text/csv", "application/json")
            .with_headers({schema::idempotency_key()})
            .with_query({schema::query(
                "mode", schema::one_of(import_modes),
                "create (default): a row whose e-mail is taken is refused; upsert: it updates "
                "that contact with the row's cells (an empty cell changes nothing)")}));
  r.add({verb::post, "/api/v1/contacts/search", access::bearer, permission::read_records,
         bind(s, search),
         "Search contacts: filter groups OR-ed, the filters of a group AND-ed (HubSpot's shape)",
         "contacts"},
        route_doc("ContactSearch", "ContactPage").with_example(R"({"filter_groups": [
  {"filters": [{"field": "status", "op": "eq", "value": "active"},
               {"field": "tag", "op": "eq", "value": "diabetes"}]},
  {"filters": [{"field": "created_at", "op": "gte", "value": "2026-01-01T00:00:00Z"}]}],
 "sort": {"field": "created_at", "order": "desc"}, "per_page": 50})"));
  r.add({verb::get, "/api/v1/contacts/export", access::bearer, permission::read_records,
         bind(s, export_csv), "Export the matching contacts as CSV (streamed)", "contacts"},
        route_doc().with_query(contact_filters()).with_media("application/json", "text/csv"));
  r.add({verb::get, "/api/v1/contacts/{id}", access::bearer, permission::read_records, bind(s, get),
         "Get a contact", "contacts"},
        {"", "Contact"});
  r.add({verb::put, "/api/v1/contacts/{id}", access::bearer, permission::write_records,
         bind(s, update), "Update a contact (fields sent)", "contacts"},
        {"ContactUpdate", "ContactChange"});
  r.add({verb::patch, "/api/v1/contacts/{id}", access::bearer, permission::write_records,
         bind(s, update), "Update a contact (same as PUT)", "contacts"},
        {"ContactUpdate", "ContactChange"});
  r.add({verb::del, "/api/v1/contacts/{id}", access::bearer, permission::delete_records,
         bind(s, remove), "Delete a contact", "contacts", 204});
  r.add({verb::post, "/api/v1/contacts/{id}/tags", access::bearer, permission::write_records,
         bind(s, add_tags), "Add tags to a contact", "tags"},
        {"TagsAdd", "Contact"});
  auto tag_param = schema::text_of(schema::text({.min = 1, .max = contact_rules::tag_max}));
  r.add({verb::del, "/api/v1/contacts/{id}/tags/{tag}", access::bearer, permission::write_records,
         bind(s, remove_tag), "Remove a tag from a contact", "tags", 204},
        route_doc().with_path("tag", tag_param));
  r.add({verb::get, "/api/v1/tags", access::bearer, permission::read_records, bind(s, tags),
         "Tags in use with their counts", "tags"},
        {"", "TagList"});
  r.add({verb::put, "/api/v1/tags/{name}", access::bearer, permission::write_records,
         bind(s, rename_tag), "Rename a tag across the tenant", "tags"},
        route_doc("TagRename", "Tag").with_path("name", tag_param));
}

} // namespace crm::http
