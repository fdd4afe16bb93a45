// The patient record's routes beyond the contact itself (contract §11, docs/patient-record.md):
// the timeline of everything that happened to a contact.
#include "http/api.hpp"

#include "actors/contacts.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

void timeline(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  std::vector<issue> issues;
  auto limit = query_int(ex->req, "limit", domain::timeline_limit_default, 1,
                         domain::timeline_limit_max, issues);
  std::optional<domain::timeline_position> after;
  if (auto text = ex->req.query_value("cursor")) {
    auto read = domain::read_timeline_cursor(*text, *id);
    if (read.error == domain::cursor_error::other_contact)
      issues.push_back(
          {{"query", "cursor"}, "the cursor belongs to another contact's timeline", "value_error"});
    else if (read.error)
      issues.push_back({{"query", "cursor"}, "not a cursor this timeline gave", "value_error"});
    after = std::move(read.position);
  }
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::contact_timeline(s.rt, ex->who.tenant_id, *id, std::move(after), *limit, json_reply(ex));
}

void define_schemas(router& r) {
  using namespace schema;
  auto type = one_of(domain::timeline_types);
  type["description"] =
      "what the item is; its other members are that resource's: appointment: Appointment, "
      "consent: Consent, deal: Deal, deal_move: a row of GET /deals/{id}/history (kind "
      "stage_changed), merge: ContactMerge, message: ConversationMessage, note: Note, task: Task";
  auto at = timestamp();
  at["description"] = "when it happened (created, recorded, moved, merged): the feed's order";
  define(r, "TimelineItem",
         object({{"type", type}, {"at", at}, {"id", id()}, {"summary", text({})}}, false));
  auto cursor = nullable(text({}));
  cursor["description"] = "the cursor of the next page (null: this is the last)";
  define(r, "Timeline",
         object({{"items", array_of(ref("TimelineItem"))}, {"next_cursor", cursor}}));
}

} // namespace

void add_patient_record_routes(router& r, services& s) {
  using domain::permission;
  define_schemas(r);
  r.add({verb::get, "/api/v1/contacts/{id}/timeline", access::bearer, permission::read_records,
         bind(s, timeline),
         "Everything that happened to a contact, newest first: notes, tasks, messages, "
         "appointments, deals and their stage moves, consents and merges",
         "contacts"},
        route_doc("", "Timeline")
            .with_query({schema::query("cursor", schema::text({}),
                                       "next_cursor of the page before (opaque)"),
                         schema::query("limit", schema::integer(1, domain::timeline_limit_max),
                                       "items per page (default 20)")}));
}

} // namespace crm::http
