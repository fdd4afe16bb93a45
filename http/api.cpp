// Assembles the routers: the API on the main port, operations on the metrics port.
#include "http/api.hpp"

#include "http/placement.hpp"

#include "http/audit.hpp"

#include "config/settings.hpp"

#include "actors/meters.hpp"
#include "actors/runtime.hpp"
#include "http/json.hpp"
#include "http/metrics.hpp"
#include "http/secret_gate.hpp"
#include "persistence/pg_pool.hpp"

namespace crm::http {

router make_api_router(services& s) {
  router r;
  add_health_routes(r, s);
  add_auth_routes(r, s);
  add_user_routes(r, s);
  add_api_key_routes(r, s);
  add_totp_routes(r, s);
  add_contact_routes(r, s);
  add_company_routes(r, s);
  add_field_routes(r, s);
  add_workflow_routes(r, s);
  add_webhook_subscription_routes(r, s);
  add_channel_routes(r, s);
  add_conversation_routes(r, s);
  add_pipeline_routes(r, s);
  add_deal_routes(r, s);
  add_ai_routes(r, s);
  add_consent_routes(r, s);
  add_note_routes(r, s);
  add_task_routes(r, s);
  add_patient_record_routes(r, s);
  add_view_routes(r, s);
  add_team_routes(r, s);
  add_canned_routes(r, s);
  add_calendar_routes(r, s);
  add_appointment_routes(r, s);
  add_fhir_routes(r, s);
  add_subject_routes(r, s);
  add_audit_routes(r, s);
  add_docs_routes(r);
  add_openapi_route(r, r, s.cfg.public_url);
  classify_audit(r);
  return r;
}

router make_ops_router(services& s) {
  router r;
  r.add({verb::get,
         "/metrics",
         access::operator_metrics,
         {},
         [&s](const exchange_ptr& ex) {
           response res;
           res.content_type = "text/plain; version=0.0.4";
           s.metrics.write(res.body);
           actors::write_actor_metrics(res.body);
           secret_gate::write_metrics(res.body);
           res.body += "# HELP carecrm_db_queue_depth Database jobs waiting for a connection.\n"
                       "# TYPE carecrm_db_queue_depth gauge\ncarecrm_db_queue_depth " +
                       std::to_string(s.pool.queue_depth()) +
                       "\n# HELP carecrm_db_queue_refused_total Lookups answered 503 because the "
                       "database queue was full.\n# TYPE carecrm_db_queue_refused_total counter\n"
                       "carecrm_db_queue_refused_total " +
                       std::to_string(s.pool.refused()) + "\n";
           s.audit.write_metrics(res.body);
           res.body += "# HELP carecrm_tenants_live Tenants with live actors.\n"
                       "# TYPE carecrm_tenants_live gauge\ncarecrm_tenants_live " +
                       std::to_string(s.rt.live_tenants()) + "\n";
           if (s.placement) s.placement->write_metrics(res.body);
           ex->respond(std::move(res));
         },
         "Prometheus metrics",
         "operations"});
  r.add({verb::post,
         "/actors/{tenant_id}/{child}/fail",
         access::operator_token,
         {},
         [&s](const exchange_ptr& ex) {
           std::vector<domain::issue> issues;
           auto tid = path_id(ex->param("tenant_id"), "tenant_id", issues);
           if (!tid) return ex->fail(domain::failure::invalid(std::move(issues)));
           if (!s.rt.fail_child(*tid, ex->param("child")))
             return ex->fail(domain::failure::of(domain::errc::not_found,
                                                 "no such live tenant or child actor"));
           ex->json(202, R"({"status":"failing"})");
         },
         "Fail a tenant's child actor as a crash would (it restarts from Postgres)",
         "operations",
         202});
  r.add({verb::get,
         "/actors",
         access::operator_token,
         {},
         [&s](const exchange_ptr& ex) {
           auto body = s.rt.actors_json();
           // In a cluster: this node, the members and the leases held here (with epochs).
           if (s.placement)
             body.insert(body.size() - 1, ",\"cluster\":" + s.placement->cluster_json());
           ex->json(200, std::move(body));
         },
         "Live tenant supervisors and their children (and, in a cluster, the members and the "
         "leases this node holds)",
         "operations"});
  add_health_routes(r, s, access::operator_token);
  return r;
}

} // namespace crm::http
