// A contact's consents (contract §9 "Health data", docs/compliance.md "Consent"): an append-only
// history. POST records a grant or a withdrawal (agents and above); GET answers the history,
// newest first, with what it allows now. The contact must be the tenant's (its 404 or 403).
#include "http/api.hpp"

#include "actors/channels.hpp"
#include "actors/contacts.hpp"
#include "domain/consent.hpp"
#include "http/json.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

namespace crm::http {
namespace {

using domain::failure;

void record(services& s, const exchange_ptr& ex) {
  std::vector<domain::issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  domain::consent c;
  if (auto p = body.text("purpose", true)) {
    if (auto purpose = domain::parse_consent_purpose(*p))
      c.purpose = *purpose;
    else
      body.add({"body", "purpose"}, domain::consent_purpose_choices(), "enum");
  }
  if (auto* channel = body.raw("channel"); channel && !channel->is_null()) {
    if (channel->is_string() && channel->get_string() == "any") {
    } else if (channel->is_int64() && channel->get_int64() > 0) {
      c.channel_id = channel->get_int64();
    } else if (channel->is_uint64() && channel->get_uint64() <= INT64_MAX) {
      c.channel_id = static_cast<std::int64_t>(channel->get_uint64());
    } else {
      body.add({"body", "channel"}, "Input should be a channel id or 'any'", "value_error");
    }
  }
  if (auto granted = body.boolean("granted", true)) c.granted = *granted;
  if (auto source = body.text("source", false, {.min = 1, .max = 100, .trim = true}))
    c.source = *source;
  else
    c.source = "api";
  if (auto evidence = body.nullable_text("evidence", {.min = 1, .max = 2000}))
    c.evidence = *evidence;
  if (!body.finish()) return ex->fail(body.failure());
  c.contact_id = *id;
  c.recorded_by = ex->who.user_id;
  auto location = "/api/v1/contacts/" + std::to_string(*id) + "/consents/";
  with_contact(s.rt, ex, *id, [&s, ex, c = std::move(c), location]() mutable {
    actors::record_consent(s.rt, ex->who.tenant_id, std::move(c), created_reply(ex, location));
  });
}

void history(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  with_contact(s.rt, ex, *id, [&s, ex, id = *id] {
    actors::list_consents(s.rt, ex->who.tenant_id, id, json_reply(ex));
  });
}

void one(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto consent = id_param(ex, "consent_id");
  if (!consent) return;
  with_contact(s.rt, ex, *id, [&s, ex, id = *id, consent = *consent] {
    actors::get_consent(s.rt, ex->who.tenant_id, id, consent, json_reply(ex));
  });
}

} // namespace

void add_consent_routes(router& r, services& s) {
  using domain::permission;
  r.add({verb::post, "/api/v1/contacts/{id}/consents", access::bearer, permission::write_records,
         bind(s, record), "Record a consent granted or withdrawn", "consents", 201});
  r.add({verb::get, "/api/v1/contacts/{id}/consents", access::bearer, permission::read_records,
         bind(s, history), "A contact's consents, newest first, and what they allow", "consents"});
  r.add({verb::get, "/api/v1/contacts/{id}/consents/{consent_id}", access::bearer,
         permission::read_records, bind(s, one), "One consent record of a contact", "consents"});
}

} // namespace crm::http
