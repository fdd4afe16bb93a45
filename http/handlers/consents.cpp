// A contact's consents (contract §9 "Health data", docs/compliance.md "Consent"): an append-only
// history. POST records a grant or a withdrawal (agents and above); GET answers the history,
// newest first, with what it allows now. The contact must be the tenant's (its 404 or 403).
#include "http/api.hpp"

#include "actors/channels.hpp"
#include "actors/contacts.hpp"
#include "domain/consent.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

namespace crm::http {
namespace {

using domain::failure;
namespace rules = domain::consent_rules;

// Who or what said so (default "api"), and the reference it leaves.
constexpr text_rule source_rule{.min = 1, .max = 100, .trim = true};
constexpr std::string_view default_source = "api";
constexpr text_rule evidence_rule{.min = 1, .max = 2000};

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
    if (channel->is_string() && channel->get_string() == rules::any_channel) {
    } else if (channel->is_int64() && channel->get_int64() > 0) {
      c.channel_id = channel->get_int64();
    } else if (channel->is_uint64() && channel->get_uint64() <= INT64_MAX) {
      c.channel_id = static_cast<std::int64_t>(channel->get_uint64());
    } else {
      body.add({"body", "channel"}, "Input should be a channel id or 'any'", "value_error");
    }
  }
  if (auto granted = body.boolean("granted", true)) c.granted = *granted;
  if (auto source = body.text("source", false, source_rule))
    c.source = *source;
  else
    c.source = default_source;
  if (auto evidence = body.nullable_text("evidence", evidence_rule)) c.evidence = *evidence;
  if (!body.finish()) return ex->fail(body.failure());
  c.contact_id = *id;
  c.recorded_by = ex->who.acting_user();
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

constexpr const char* record_example = R"({
  "purpose": "marketing",
  "channel": "any",
  "granted": true,
  "source": "intake_form",
  "evidence": "signed intake form 2025-01-15"
})";

void define_consent_schemas(router& r) {
  using namespace schema;
  auto channel = [] {
    return object_t{{"oneOf", boost::json::array{id(), object_t{{"const", rules::any_channel}}}}};
  };
  auto create_channel = nullable(channel());
  create_channel["description"] = "a channel of the tenant, or any (also when absent or null)";
  auto source = text(source_rule);
  source["default"] = default_source;
  define(r, "ConsentCreate",
         object({{"purpose", one_of(rules::purposes)},
                 {"channel", create_channel, false},
                 {"granted", boolean()},
                 {"source", source, false},
                 {"evidence", nullable(text(evidence_rule)), false}}));
  // domain::consent_to_json
  define(r, "Consent",
         object({{"id", id()},
                 {"contact_id", id()},
                 {"purpose", one_of(rules::purposes)},
                 {"channel", channel()},
                 {"granted", boolean()},
                 {"source", text({})},
                 {"evidence", nullable(text({}))},
                 {"recorded_at", timestamp()},
                 {"recorded_by", nullable(id())}}));
  // What the history allows now on a channel without records of its own, by purpose.
  auto allowed = object({});
  auto& props = allowed["properties"].as_object();
  boost::json::array required;
  for (auto p : rules::purposes) {
    props[p] = boolean();
    required.emplace_back(p);
  }
  allowed["required"] = std::move(required);
  define(r, "ConsentHistory",
         object({{"contact_id", id()},
                 {"total", integer()},
                 {"items", array_of(ref("Consent"))},
                 {"allowed", allowed}}));
}

} // namespace

void add_consent_routes(router& r, services& s) {
  using domain::permission;
  define_consent_schemas(r);
  r.add({verb::post, "/api/v1/contacts/{id}/consents", access::bearer, permission::write_records,
         bind(s, record), "Record a consent granted or withdrawn", "consents", 201},
        route_doc("ConsentCreate", "Consent").with_example(record_example));
  r.add({verb::get, "/api/v1/contacts/{id}/consents", access::bearer, permission::read_records,
         bind(s, history), "A contact's consents, newest first, and what they allow", "consents"},
        {"", "ConsentHistory"});
  r.add({verb::get, "/api/v1/contacts/{id}/consents/{consent_id}", access::bearer,
         permission::read_records, bind(s, one), "One consent record of a contact", "consents"},
        {"", "Consent"});
}

} // namespace crm::http
