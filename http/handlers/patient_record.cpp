// The patient record's routes beyond the contact itself (contract §11, docs/patient-record.md):
// the timeline of everything that happened to a contact, the candidate duplicates, and the
// merge of a duplicate into the contact that stays.
#include "http/api.hpp"

#include "actors/contacts.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <algorithm>

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

void duplicates(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::find_duplicate_contacts(s.rt, ex->who.tenant_id, *page, *per_page, json_reply(ex));
}

void merge(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  body_reader body(ex->req.body);
  actors::contact_merge_request req;
  if (auto d = body.id("duplicate_id", true)) req.duplicate_id = *d;
  if (auto* prefer = body.raw("prefer"); prefer && !prefer->is_null()) {
    if (!prefer->is_object()) {
      body.add({"body", "prefer"}, "Input should be a valid dictionary", "dict_type");
    } else {
      for (auto& [key, side] : prefer->as_object()) {
        std::vector<domain::loc_part> loc{std::string("body"), std::string("prefer"),
                                          std::string(key)};
        auto field = std::string_view(key);
        if (std::find(domain::merge_fields.begin(), domain::merge_fields.end(), field) ==
            domain::merge_fields.end()) {
          body.add(loc, "not a field a merge chooses", "extra_forbidden");
        } else if (!side.is_string() ||
                   (side.as_string() != "survivor" && side.as_string() != "duplicate")) {
          body.add(loc, "Input should be 'survivor' or 'duplicate'", "enum");
        } else {
          req.prefer[std::string(field)] = side.as_string() == "duplicate"
                                               ? domain::merge_side::duplicate
                                               : domain::merge_side::survivor;
        }
      }
    }
  }
  if (!body.finish()) return ex->fail(body.failure());
  actors::merge_contacts(s.rt, ex->who.tenant_id, *id, std::move(req), json_reply(ex));
}

void define_schemas(router& r) {
  using namespace schema;
  auto type = one_of(domain::timeline_types);
  type["description"] =
      "what the item is; its other members are that resource's: appointment: Appointment, "
      "consent: Consent, deal: Deal, deal_move: a row of GET /deals/{id}/history (kind "
      "stage_changed), merge: survivor_id, duplicate_id, merged_by, moved (rows moved, by "
      "table) and merged_at, message: ConversationMessage, note: Note, task: Task";
  auto at = timestamp();
  at["description"] = "when it happened (created, recorded, moved, merged): the feed's order";
  define(r, "TimelineItem",
         object({{"type", type}, {"at", at}, {"id", id()}, {"summary", text({})}}, false));
  auto cursor = nullable(text({}));
  cursor["description"] = "the cursor of the next page (null: this is the last)";
  define(r, "Timeline",
         object({{"items", array_of(ref("TimelineItem"))}, {"next_cursor", cursor}}));
  auto reasons = array_of(one_of(std::array<std::string_view, 3>{"phone", "email", "name"}));
  reasons["description"] = "phone: the same number; email: the same mailbox (case, +tags and "
                           "Gmail's dots aside); name: close names (one or two edits) of one "
                           "company, or of a pair found by phone or e-mail";
  define(r, "DuplicatePair", object({{"contact_ids", array_of(id())}, {"reasons", reasons}}));
  define(r, "DuplicatePairPage", page_of("DuplicatePair"));
  object_t prefer;
  prefer["type"] = "object";
  object_t side = one_of(domain::merge_sides);
  object_t props;
  for (auto f : domain::merge_fields) props[f] = side;
  prefer["properties"] = props;
  prefer["additionalProperties"] = false;
  prefer["description"] = "per field, whose value the survivor keeps; a field not named keeps "
                          "the survivor's, or takes the duplicate's where the survivor has none "
                          "(custom_fields: key by key)";
  define(r, "ContactMergeRequest",
         object({{"duplicate_id", id()}, {"prefer", nullable(prefer), false}}));
}

} // namespace

void add_patient_record_routes(router& r, services& s) {
  using domain::permission;
  define_schemas(r);
  r.add({verb::get, "/api/v1/contacts/duplicates", access::bearer, permission::read_records,
         bind(s, duplicates),
         "Candidate pairs of duplicate contacts: the same phone or mailbox, or close names that "
         "share a company",
         "contacts"},
        route_doc("", "DuplicatePairPage").with_query(schema::paging()));
  // 409: a sensitive value of the duplicate does not open with the tenant's key.
  r.add({verb::post, "/api/v1/contacts/{id}/merge", access::bearer, permission::delete_records,
         bind(s, merge),
         "Merge a duplicate into this contact: everything about it moves here in one "
         "transaction, and it is deleted (a GET of it then answers 404 with merged_into)",
         "contacts"},
        route_doc("ContactMergeRequest", "Contact").fails_with({409}));
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
