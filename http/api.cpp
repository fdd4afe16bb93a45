// Assembles the routers: the API on the main port, operations on the metrics port.
#include "http/api.hpp"

#include "http/placement.hpp"

#include "http/audit.hpp"

#include "config/settings.hpp"

#include "actors/meters.hpp"
#include "actors/runtime.hpp"
#include "domain/clock.hpp"
#include "http/json.hpp"
#include "http/metrics.hpp"
#include "http/request_input.hpp"
#include "http/secret_gate.hpp"
#include "persistence/log.hpp"
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

std::string metrics_text(services& s) {
  std::string out;
  s.metrics.write(out);
  actors::write_actor_metrics(out);
  secret_gate::write_metrics(out);
  out += "# HELP carecrm_db_queue_depth Database jobs waiting for a connection.\n"
         "# TYPE carecrm_db_queue_depth gauge\ncarecrm_db_queue_depth " +
         std::to_string(s.pool.queue_depth()) +
         "\n# HELP carecrm_db_queue_refused_total Lookups answered 503 because the "
         "database queue was full.\n# TYPE carecrm_db_queue_refused_total counter\n"
         "carecrm_db_queue_refused_total " +
         std::to_string(s.pool.refused()) + "\n";
  s.audit.write_metrics(out);
  out += "# HELP carecrm_tenants_live Tenants with live actors.\n"
         "# TYPE carecrm_tenants_live gauge\ncarecrm_tenants_live " +
         std::to_string(s.rt.live_tenants()) +
         "\n# HELP carecrm_tenants_passivated_total Tenants whose actors stopped on this node "
         "(idle, passivated by an operator, or moved away).\n"
         "# TYPE carecrm_tenants_passivated_total counter\ncarecrm_tenants_passivated_total " +
         std::to_string(s.rt.passivations()) + "\n";
  if (s.placement) s.placement->write_metrics(out);
  return out;
}

namespace {

// A drill on a tenant's actors is in that tenant's audit trail (docs/operations.md "Console"):
// who (the operator token), from where, what (`action`, the child in `fields`).
void audit_drill(services& s, const exchange& ex, std::int64_t tenant, const char* action,
                 const std::string& child) {
  domain::audit_record row;
  row.tenant_id = tenant;
  row.at = domain::now_micros();
  row.actor_type = "operator";
  row.actor_ref = "operator token";
  row.resource = "actor";
  row.action = action;
  if (!child.empty()) row.fields = {child};
  row.outcome = "success";
  row.status = 202;
  row.client_ip = ex.req.remote;
  if (auto ua = ex.req.header("user-agent")) row.user_agent = ua->substr(0, 512);
  row.request_id = ex.req.request_id;
  if (!s.audit.record(std::move(row)))
    log_warn("tenant {}: the audit row of the operator's {} drill was not queued", tenant, action);
}

} // namespace

router make_ops_router(services& s) {
  router r;
  r.add({verb::get,
         "/metrics",
         access::operator_metrics,
         {},
         [&s](const exchange_ptr& ex) {
           response res;
           res.content_type = "text/plain; version=0.0.4";
           res.body = metrics_text(s);
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
           auto child = std::string(ex->param("child"));
           if (!s.rt.fail_child(*tid, child))
             return ex->fail(domain::failure::of(domain::errc::not_found,
                                                 "no such live tenant or child actor"));
           audit_drill(s, *ex, *tid, "fail", child);
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
  r.add({verb::post,
         "/actors/{tenant_id}/passivate",
         access::operator_token,
         {},
         [&s](const exchange_ptr& ex) {
           std::vector<domain::issue> issues;
           auto tid = path_id(ex->param("tenant_id"), "tenant_id", issues);
           if (!tid) return ex->fail(domain::failure::invalid(std::move(issues)));
           if (!s.rt.is_live(*tid))
             return ex->fail(domain::failure::of(domain::errc::not_found, "no such live tenant"));
           s.rt.evict({*tid});
           audit_drill(s, *ex, *tid, "passivate", {});
           ex->json(202, R"({"status":"passivating"})");
         },
         "Passivate a live tenant now, as if idle (its actors finish their mailboxes and stop; "
         "the next request starts them from Postgres)",
         "operations",
         202});
  r.add({verb::post,
         "/tenants/{tenant_id}/move",
         access::operator_token,
         {},
         [&s](const exchange_ptr& ex) {
           std::vector<domain::issue> issues;
           auto tid = path_id(ex->param("tenant_id"), "tenant_id", issues);
           auto body = object_body(ex);
           if (!body) return;
           std::string to;
           for (auto& kv : *body)
             if (kv.key() != "to")
               issues.push_back({{"body", std::string(kv.key())},
                                 "Extra inputs are not permitted",
                                 "extra_forbidden"});
           if (auto v = body->if_contains("to"); !v)
             issues.push_back({{"body", "to"}, "Field required", "missing"});
           else if (!v->is_string() || v->as_string().empty() || v->as_string().size() > 64)
             issues.push_back(
                 {{"body", "to"}, "Input should be a node id (1 to 64 characters)", "string_type"});
           else
             to = std::string(v->as_string());
           if (!tid || !issues.empty())
             return ex->fail(domain::failure::invalid(std::move(issues)));
           if (!s.placement)
             return ex->fail(domain::failure::of(domain::errc::conflict,
                                                 "this node is not a member of a cluster"));
           s.placement->move(*tid, to, [&s, ex, tenant = *tid, to](domain::outcome<std::string> r) {
             if (!r) return ex->fail(r.error());
             audit_drill(s, *ex, tenant, "move", to);
             ex->json(202, std::move(*r));
           });
         },
         "Move a tenant to another node of the cluster (as `carecrm cluster move`): its owner "
         "hands it over on its next heartbeat",
         "operations",
         202});
  add_health_routes(r, s, access::operator_token);
  add_console_routes(r, s);
  return r;
}

} // namespace crm::http
