// The routes of the service: the API router on the main port and the operations router on
// the metrics port. One endpoint family per file in http/handlers/.
#pragma once
#include "http/router.hpp"
#include "http/services.hpp"

#include <boost/json/fwd.hpp>

#include <string>
#include <vector>

namespace crm::actors {
struct contact_fields;
}
namespace crm::domain {
struct issue;
}

namespace crm::http {

// A route handler from a function of the services and the exchange.
inline handler_fn bind(services& s, void (*f)(services&, const exchange_ptr&)) {
  return [&s, f](const exchange_ptr& ex) { f(s, ex); };
}

void add_auth_routes(router& r, services& s);
void add_user_routes(router& r, services& s);
void add_api_key_routes(router& r, services& s);
void add_totp_routes(router& r, services& s);
void add_contact_routes(router& r, services& s);
void add_company_routes(router& r, services& s);
void add_field_routes(router& r, services& s);
void add_workflow_routes(router& r, services& s);
void add_webhook_subscription_routes(router& r, services& s);
void add_channel_routes(router& r, services& s);
void add_conversation_routes(router& r, services& s);
void add_pipeline_routes(router& r, services& s);
void add_deal_routes(router& r, services& s);
void add_ai_routes(router& r, services& s);
void add_consent_routes(router& r, services& s);
void add_note_routes(router& r, services& s);
void add_task_routes(router& r, services& s);
void add_patient_record_routes(router& r, services& s);
void add_view_routes(router& r, services& s);
void add_team_routes(router& r, services& s);
void add_canned_routes(router& r, services& s);
void add_calendar_routes(router& r, services& s);
void add_appointment_routes(router& r, services& s);
void add_fhir_routes(router& r, services& s);
void add_subject_routes(router& r, services& s);
void add_audit_routes(router& r, services& s);
// `a`: open on the API listener; the operator token on the metrics listener (contract §9).
void add_health_routes(router& r, services& s, access a = access::open);
void add_docs_routes(router& r);
// The operator console on the metrics listener (http/handlers/console.cpp).
void add_console_routes(router& r, services& s);
// What GET /metrics answers (the Prometheus text format), and the same samples as JSON:
// {"name": [{"labels": {...}, "value": v}]} (GET /console/data "metrics").
std::string metrics_text(services& s);
std::string prometheus_json(std::string_view text);
// `server_url`: the public URL (--public-url), or empty (the document says "/").
void add_openapi_route(router& r, const router& documented, std::string_view server_url);

// The rules of PATCH /contacts/{id} for an update_contact action's `fields` (issues located
// under params.fields): handed to the workflow actors at start-up.
actors::contact_fields read_contact_patch(const boost::json::object& fields,
                                          std::vector<domain::issue>& issues);

router make_api_router(services& s);
router make_ops_router(services& s);

// The OpenAPI 3.1 document of every route `r` serves.
std::string openapi_document(const router& r, std::string_view server_url = {});

} // namespace crm::http
