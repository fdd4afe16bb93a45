// Notes on a contact (contract §11, docs/notes.md). Agents and above write; authors edit and
// delete their own notes, managers and admins anyone's. The contact must be the tenant's (its
// 404 or 403), and every read and change is audited as a touch of the contact's record.
#include "http/api.hpp"

#include "actors/notes.hpp"
#include "domain/note.hpp"
#include "domain/validation.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

namespace crm::http {
namespace {

using domain::failure;

constexpr text_rule body_rule{.min = 1, .max = domain::note_rules::body_max};
constexpr text_rule query_rule{.min = 1, .max = 200};

domain::requester editor(const exchange_ptr& ex) {
  return {ex->who.acting_user(), ex->who.role};
}

void create(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  domain::note n;
  if (auto text = body.text("body", true, body_rule)) n.body = *text;
  if (auto pinned = body.boolean("pinned", false)) n.pinned = *pinned;
  if (!body.finish()) return ex->fail(body.failure());
  n.contact_id = *id;
  auto location = "/api/v1/contacts/" + std::to_string(*id) + "/notes/";
  with_contact(s.rt, ex, *id, [&s, ex, n = std::move(n), location]() mutable {
    actors::create_note(s.rt, ex->who.tenant_id, std::move(n), editor(ex),
                        created_reply(ex, location));
  });
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  std::string q;
  if (auto v = ex->req.query_value("q")) {
    auto chars = domain::utf8_length(*v);
    if (chars < query_rule.min || chars > query_rule.max)
      issues.push_back({{"query", "q"},
                        "String should have " + std::to_string(query_rule.min) + " to " +
                            std::to_string(query_rule.max) + " characters",
                        "value_error"});
    else
      q = std::string(*v);
  }
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  with_contact(s.rt, ex, *id,
               [&s, ex, id = *id, q = std::move(q), page = *page, per_page = *per_page]() mutable {
                 actors::list_notes(s.rt, ex->who.tenant_id, id, std::move(q), page, per_page,
                                    json_reply(ex));
               });
}

// The contact's id and the note's, or the 422 already sent.
std::optional<std::pair<std::int64_t, std::int64_t>> ids(const exchange_ptr& ex) {
  auto contact = id_param(ex);
  if (!contact) return std::nullopt;
  auto note = id_param(ex, "note_id");
  if (!note) return std::nullopt;
  return std::pair{*contact, *note};
}

void get(services& s, const exchange_ptr& ex) {
  auto both = ids(ex);
  if (!both) return;
  with_contact(s.rt, ex, both->first, [&s, ex, both = *both] {
    actors::get_note(s.rt, ex->who.tenant_id, both.first, both.second, json_reply(ex));
  });
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> path_issues;
  auto contact = path_id(ex->param("id"), "id", path_issues);
  auto note = path_id(ex->param("note_id"), "note_id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  domain::note_patch p;
  p.body = body.text("body", false, body_rule);
  p.pinned = body.boolean("pinned", false);
  if (!body.finish()) return ex->fail(body.failure());
  with_contact(s.rt, ex, *contact, [&s, ex, contact = *contact, note = *note, p = std::move(p)] {
    actors::update_note(s.rt, ex->who.tenant_id, contact, note, p, editor(ex), json_reply(ex));
  });
}

void remove(services& s, const exchange_ptr& ex) {
  auto both = ids(ex);
  if (!both) return;
  with_contact(s.rt, ex, both->first, [&s, ex, both = *both] {
    actors::delete_note(s.rt, ex->who.tenant_id, both.first, both.second, editor(ex),
                        no_content_reply(ex));
  });
}

constexpr const char* create_example = R"({
  "body": "Allergic to penicillin; prefers morning appointments.",
  "pinned": true
})";

void define_note_schemas(router& r) {
  using namespace schema;
  auto pinned = boolean();
  pinned["default"] = false;
  pinned["description"] = "pinned notes come first";
  define(r, "NoteCreate", object({{"body", text(body_rule)}, {"pinned", pinned, false}}));
  define(r, "NoteUpdate", object({{"body", text(body_rule), false}, {"pinned", boolean(), false}}));
  // domain::note_to_json
  define(r, "Note",
         object({{"id", id()},
                 {"contact_id", id()},
                 {"body", text({})},
                 {"pinned", boolean()},
                 {"author_id", nullable(id())},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "NotePage", page_of("Note"));
}

} // namespace

void add_note_routes(router& r, services& s) {
  using domain::permission;
  define_note_schemas(r);
  r.add({verb::post, "/api/v1/contacts/{id}/notes", access::bearer, permission::write_records,
         bind(s, create), "Leave a note on a contact", "notes", 201},
        route_doc("NoteCreate", "Note").with_example(create_example));
  r.add({verb::get, "/api/v1/contacts/{id}/notes", access::bearer, permission::read_records,
         bind(s, list), "A contact's notes, pinned first, then newest first", "notes"},
        route_doc("", "NotePage")
            .with_query(schema::paging())
            .with_query({schema::query("q", schema::text(query_rule),
                                       "only notes whose text holds this (any case)")}));
  r.add({verb::get, "/api/v1/contacts/{id}/notes/{note_id}", access::bearer,
         permission::read_records, bind(s, get), "One note of a contact", "notes"},
        {"", "Note"});
  r.add({verb::patch, "/api/v1/contacts/{id}/notes/{note_id}", access::bearer,
         permission::write_records, bind(s, update), "Change a note (its author, or a manager)",
         "notes"},
        {"NoteUpdate", "Note"});
  r.add({verb::del, "/api/v1/contacts/{id}/notes/{note_id}", access::bearer,
         permission::write_records, bind(s, remove), "Delete a note (its author, or a manager)",
         "notes", 204});
}

} // namespace crm::http
