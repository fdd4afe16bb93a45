#include "http/audit.hpp"

#include "domain/clock.hpp"
#include "domain/json_parse.hpp"
#include "http/router.hpp"
#include "persistence/audit_repo.hpp"
#include "persistence/log.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <charconv>

namespace crm::http {

namespace {

struct table_row {
  verb method;
  const char* path;
  audit_rule rule;
};

using m = audit_mode;

audit_rule rule(m mode, const char* resource, const char* action, const char* id = "id",
                const char* list_key = "", const char* nested = "") {
  return {mode, resource, action, id, list_key, nested, "", false};
}

// A route about a patient's appointment: recorded as a touch of the patient's record, whose
// id the answer names (contact_id); a failed change names none (its path id is the
// appointment's, never a contact's).
audit_rule of_patient(m mode, const char* action, const char* list_key = "") {
  return {mode, "contact", action, "", list_key, "", "contact_id", false};
}

// Every route that touches health data, and the security events. Routes of configuration
// (users, channels, workflows, subscriptions, fields, pipelines, agents) are not listed: their
// changes are recorded as `change` under the path's first segment (see classify_audit).
const std::vector<table_row>& table() {
  static const std::vector<table_row> rows = {
      // Sign-in, refresh, sign-out.
      {verb::post, "/api/v1/auth/login", rule(m::security, "session", "login", "")},
      {verb::post, "/api/v1/auth/refresh", rule(m::security, "session", "refresh", "")},
      {verb::post, "/api/v1/auth/logout", rule(m::security, "session", "logout", "")},
      {verb::get, "/api/v1/auth/me", rule(m::none, "session", "me", "")},
      // Two-factor sign-in: set up, turned on and off, reset by an admin, required.
      {verb::post, "/api/v1/auth/totp/setup", rule(m::security, "session", "totp_setup", "")},
      {verb::post, "/api/v1/auth/totp/enable", rule(m::security, "session", "totp_enable", "")},
      {verb::post, "/api/v1/auth/totp/disable", rule(m::security, "session", "totp_disable", "")},
      {verb::put, "/api/v1/auth/totp/policy", rule(m::security, "tenant", "totp_policy", "")},
      {verb::del, "/api/v1/users/{id}/totp", rule(m::security, "user", "totp_reset")},
      // API keys: created and revoked as security events of the tenant.
      {verb::post, "/api/v1/api-keys", rule(m::change, "api_key", "create", "")},
      {verb::del, "/api/v1/api-keys/{id}", rule(m::change, "api_key", "revoke")},
      // Contacts and their tags, consents, notes, deals, exports. A row's listed ids are ids of
      // its resource (contacts here): the lists of a contact's consents, notes and deals name
      // the contact alone, or a consent id equal to another contact's id would put the row in
      // that patient's access log (GET /contacts/{id}/export).
      {verb::get, "/api/v1/contacts", rule(m::list, "contact", "list", "", "items")},
      {verb::post, "/api/v1/contacts", rule(m::change_in_tx, "contact", "create", "")},
      {verb::post, "/api/v1/contacts/bulk", rule(m::change_in_tx, "contact", "bulk_create", "")},
      {verb::post, "/api/v1/contacts/import", rule(m::change_in_tx, "contact", "import", "")},
      {verb::get, "/api/v1/contacts/export", rule(m::list, "contact", "export_csv", "")},
      {verb::post, "/api/v1/contacts/search", rule(m::list, "contact", "search", "", "items")},
      // A saved view's run: a list of contacts (the path's id is the view's).
      {verb::get, "/api/v1/views/{id}/contacts",
       rule(m::list, "contact", "view_contacts", "", "items")},
      {verb::get, "/api/v1/contacts/{id}", rule(m::read, "contact", "read")},
      {verb::put, "/api/v1/contacts/{id}", rule(m::change_in_tx, "contact", "update")},
      {verb::patch, "/api/v1/contacts/{id}", rule(m::change_in_tx, "contact", "update")},
      {verb::del, "/api/v1/contacts/{id}", rule(m::change_in_tx, "contact", "delete")},
      {verb::post, "/api/v1/contacts/{id}/tags", rule(m::change_in_tx, "contact", "update")},
      {verb::del, "/api/v1/contacts/{id}/tags/{tag}", rule(m::change_in_tx, "contact", "update")},
      {verb::put, "/api/v1/tags/{name}", rule(m::change_in_tx, "contact", "rename_tag", "")},
      {verb::get, "/api/v1/tags", rule(m::none, "tag", "list", "")},
      {verb::post, "/api/v1/contacts/{id}/ai/summary", rule(m::read, "contact", "ai_summary")},
      {verb::post, "/api/v1/conversations/{id}/ai/draft",
       rule(m::read, "conversation", "ai_draft")},
      {verb::get, "/api/v1/contacts/{id}/consents", rule(m::list, "contact", "list_consents")},
      {verb::post, "/api/v1/contacts/{id}/consents",
       rule(m::change_in_tx, "contact", "record_consent")},
      {verb::get, "/api/v1/contacts/{id}/consents/{consent_id}",
       rule(m::read, "contact", "read_consent")},
      {verb::get, "/api/v1/contacts/{id}/notes", rule(m::list, "contact", "list_notes")},
      {verb::post, "/api/v1/contacts/{id}/notes", rule(m::change_in_tx, "contact", "create_note")},
      {verb::get, "/api/v1/contacts/{id}/notes/{note_id}", rule(m::read, "contact", "read_note")},
      {verb::patch, "/api/v1/contacts/{id}/notes/{note_id}",
       rule(m::change_in_tx, "contact", "update_note")},
      {verb::del, "/api/v1/contacts/{id}/notes/{note_id}",
       rule(m::change_in_tx, "contact", "delete_note")},
      {verb::get, "/api/v1/contacts/{id}/deals", rule(m::list, "contact", "list_deals")},
      {verb::get, "/api/v1/contacts/{id}/appointments",
       rule(m::list, "contact", "list_appointments")},
      {verb::get, "/api/v1/contacts/{id}/export", rule(m::read, "contact", "export")},
      {verb::get, "/api/v1/contacts/{id}/timeline", rule(m::list, "contact", "read_timeline")},
      {verb::post, "/api/v1/contacts/{id}/merge", rule(m::change_in_tx, "contact", "merge")},
      {verb::post, "/api/v1/contacts/{id}/erase", rule(m::change_in_tx, "contact", "erase")},
      // FHIR Patient: contacts by another name.
      {verb::get, "/api/v1/fhir/Patient",
       rule(m::list, "contact", "fhir_search", "", "entry", "resource")},
      {verb::post, "/api/v1/fhir/Patient", rule(m::change_in_tx, "contact", "create", "")},
      {verb::get, "/api/v1/fhir/Patient/{id}", rule(m::read, "contact", "fhir_read")},
      // FHIR Appointment: the handler names the patients (exchange::audit_records).
      {verb::get, "/api/v1/fhir/Appointment", of_patient(m::list, "fhir_search_appointments")},
      {verb::get, "/api/v1/fhir/Appointment/{id}", of_patient(m::read, "fhir_read_appointment")},
      // A calendar's feed (a token in its query, no user): the patients it names, under the
      // calendar's tenant (the handler sets it once the token is checked).
      // A feed token opens the calendar's appointments (and names, when shown): made like a key.
      {verb::post, "/api/v1/calendars/{id}/feed-token",
       rule(m::change, "calendar", "rotate_feed_token")},
      {verb::get,
       "/api/v1/calendars/{id}/feed.ics",
       {m::list, "contact", "calendar_feed", "", "", "", "", true}},
      // Companies.
      {verb::get, "/api/v1/companies", rule(m::list, "company", "list", "", "items")},
      {verb::post, "/api/v1/companies", rule(m::change_in_tx, "company", "create", "")},
      {verb::get, "/api/v1/companies/{id}", rule(m::read, "company", "read")},
      {verb::put, "/api/v1/companies/{id}", rule(m::change_in_tx, "company", "update")},
      {verb::patch, "/api/v1/companies/{id}", rule(m::change_in_tx, "company", "update")},
      {verb::del, "/api/v1/companies/{id}", rule(m::change_in_tx, "company", "delete")},
      // Conversations and messages.
      {verb::get, "/api/v1/conversations", rule(m::list, "conversation", "list", "", "items")},
      {verb::get, "/api/v1/conversations/{id}", rule(m::read, "conversation", "read")},
      {verb::patch, "/api/v1/conversations/{id}", rule(m::change_in_tx, "conversation", "update")},
      {verb::get, "/api/v1/conversations/{id}/messages",
       rule(m::list, "conversation", "list_messages", "id", "items")},
      // A patient's file (docs/channels.md "Media"): audited as a read of the message.
      {verb::get, "/api/v1/messages/{id}/attachments/{n}",
       rule(m::read, "message", "read_attachment")},
      {verb::post, "/api/v1/conversations/{id}/messages",
       rule(m::change_in_tx, "conversation", "send_message")},
      {verb::post, "/api/v1/conversations/{id}/read",
       rule(m::change_in_tx, "conversation", "mark_read")},
      // Deals.
      {verb::get, "/api/v1/deals", rule(m::list, "deal", "list", "", "items")},
      {verb::post, "/api/v1/deals", rule(m::change_in_tx, "deal", "create", "")},
      {verb::post, "/api/v1/deals/bulk", rule(m::change_in_tx, "deal", "bulk_create", "")},
      {verb::post, "/api/v1/deals/import", rule(m::change_in_tx, "deal", "bulk_create", "")},
      {verb::get, "/api/v1/deals/export", rule(m::list, "deal", "export_csv", "")},
      {verb::get, "/api/v1/deals/{id}", rule(m::read, "deal", "read")},
      {verb::put, "/api/v1/deals/{id}", rule(m::change_in_tx, "deal", "update")},
      {verb::patch, "/api/v1/deals/{id}", rule(m::change_in_tx, "deal", "update")},
      {verb::del, "/api/v1/deals/{id}", rule(m::change_in_tx, "deal", "delete")},
      {verb::post, "/api/v1/deals/{id}/move", rule(m::change_in_tx, "deal", "move")},
      {verb::get, "/api/v1/deals/{id}/history", rule(m::read, "deal", "read_history")},
      {verb::get, "/api/v1/pipelines/{id}/board", rule(m::list, "pipeline", "board")},
      // Appointments: touches of their patients' records.
      {verb::get, "/api/v1/appointments", of_patient(m::list, "list_appointments", "items")},
      {verb::post, "/api/v1/appointments", of_patient(m::change_in_tx, "book_appointment")},
      {verb::get, "/api/v1/appointments/{id}", of_patient(m::read, "read_appointment")},
      {verb::patch, "/api/v1/appointments/{id}", of_patient(m::change_in_tx, "update_appointment")},
      {verb::post, "/api/v1/appointments/{id}/reschedule",
       of_patient(m::change_in_tx, "reschedule_appointment")},
      {verb::post, "/api/v1/appointments/{id}/cancel",
       of_patient(m::change_in_tx, "cancel_appointment")},
      // Tasks: touches of their patients' records (a task about nobody names none).
      {verb::get, "/api/v1/tasks", of_patient(m::list, "list_tasks", "items")},
      {verb::post, "/api/v1/tasks", of_patient(m::change_in_tx, "create_task")},
      {verb::get, "/api/v1/tasks/{id}", of_patient(m::read, "read_task")},
      {verb::patch, "/api/v1/tasks/{id}", of_patient(m::change_in_tx, "update_task")},
      {verb::del, "/api/v1/tasks/{id}", of_patient(m::change_in_tx, "delete_task")},
      // What agents answered patients.
      {verb::get, "/api/v1/ai/agents/{id}/replies",
       rule(m::list, "agent", "list_replies", "id", "items")},
      // The trail itself: who looked at it.
      {verb::get, "/api/v1/audit-log", rule(m::list, "audit_log", "read", "")},
      {verb::get, "/api/v1/audit-log/export", rule(m::list, "audit_log", "export", "")},
  };
  return rows;
}

std::string_view action_of(verb v) {
  switch (v) {
  case verb::post: return "create";
  case verb::put:
  case verb::patch: return "update";
  case verb::del: return "delete";
  default: return "read";
  }
}

// "users" of /api/v1/users/{id}: the name configuration changes are recorded under.
std::string first_segment(std::string_view path) {
  constexpr std::string_view prefix = "/api/v1/";
  if (path.substr(0, prefix.size()) != prefix) return std::string(path);
  path.remove_prefix(prefix.size());
  return std::string(path.substr(0, path.find('/')));
}

// The names of a JSON body's top-level members (never their values).
std::vector<std::string> body_fields(const request& req) {
  std::vector<std::string> out;
  if (req.body.empty() || req.body.size() > 1024 * 1024) return out;
  boost::json::error_code ec;
  auto v = crm::domain::parse_json(req.body, ec);
  if (ec || !v.is_object()) return out;
  for (auto& kv : v.as_object()) out.emplace_back(kv.key());
  return out;
}

std::string_view query_of(const request& req) {
  auto q = std::string_view(req.target).find('?');
  return q == std::string_view::npos ? std::string_view()
                                     : std::string_view(req.target).substr(q + 1);
}

} // namespace

void classify_audit(router& r) {
  for (auto& rt : r.routes()) {
    bool found = false;
    for (auto& row : table()) {
      if (row.method == rt->method && rt->path == row.path) {
        rt->audit = row.rule;
        found = true;
        break;
      }
    }
    if (found) continue;
    rt->audit.resource = first_segment(rt->path);
    rt->audit.action = action_of(rt->method);
    rt->audit.id_param = rt->path.find("{id}") != std::string::npos ? "id" : "";
    // Configuration changes by signed-in staff; inbound webhooks are audited by what they do.
    rt->audit.mode = rt->auth == access::bearer && rt->method != verb::get ? audit_mode::change
                                                                           : audit_mode::none;
  }
}

auditor::auditor(persistence::audit_writer& writer, read_policy reads)
    : writer_(writer), reads_(reads) {}

bool auditor::record(domain::audit_record row) {
  return writer_.record(std::move(row));
}

void auditor::write_metrics(std::string& out) {
  auto metric = [&](const char* name, const char* type, const char* help, std::uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(v) + "\n";
  };
  metric("carecrm_audit_rows_recorded_total", "counter",
         "Audit rows of reads and security events queued for the writer.", writer_.recorded());
  metric("carecrm_audit_rows_written_total", "counter",
         "Audit rows the writer appended to the chains (pending changes included).",
         writer_.written());
  metric("carecrm_audit_rows_refused_total", "counter",
         "Audit rows refused because the writer's buffer was full.", writer_.refused());
  metric("carecrm_audit_rows_dropped_total", "counter",
         "Requests answered without their audit row (best_effort reads, configuration changes).",
         dropped());
  metric("carecrm_audit_rows_buffered", "gauge", "Audit rows waiting in memory for the writer.",
         writer_.buffered());
  metric("carecrm_audit_writer_failures_total", "counter",
         "Audit writer transactions that failed (retried).", writer_.failures());
  writer_.flush_latency().write(out, "carecrm_audit_flush_seconds",
                                "Audit writer transactions that committed, from their first "
                                "statement to COMMIT.");
  metric("carecrm_audit_rows_sanitized_total", "counter",
         "Audit rows chained with bytes that were not UTF-8 text replaced (sanitized = true).",
         writer_.sanitized());
  metric("carecrm_audit_rows_quarantined_total", "counter",
         "Audit rows PostgreSQL refused for their content, chained escaped (sanitized = true).",
         writer_.quarantined());
  metric("carecrm_audit_heads_unverified_total", "counter",
         "Chain heads the writer found not signed by the configured keys (rewound or replaced "
         "by hand), recorded in their chains.",
         writer_.unverified_heads());
  metric("carecrm_audit_rows_unstorable_total", "counter",
         "Audit rows PostgreSQL refused even escaped, dropped so the rows behind them go on.",
         writer_.unstorable());
}

domain::audit_context_ptr audit_context_of(const exchange& ex, bool signed_in) {
  auto ctx = std::make_shared<domain::audit_context>();
  if (signed_in && ex.who.api_key_id != 0) {
    ctx->actor = domain::audit_actor::api_key;
    ctx->role = std::string(domain::to_string(ex.who.role));
    ctx->actor_ref = "api_key:" + std::to_string(ex.who.api_key_id);
  } else if (signed_in) {
    ctx->actor = domain::audit_actor::user;
    ctx->user_id = ex.who.user_id;
    ctx->role = std::string(domain::to_string(ex.who.role));
  } else {
    bool webhook = ex.req.path.find("/webhook") != std::string::npos;
    ctx->actor = webhook ? domain::audit_actor::webhook : domain::audit_actor::anonymous;
    ctx->actor_ref = std::string(to_string(ex.req.method)) + " " + ex.req.path;
  }
  ctx->client_ip = ex.req.remote;
  if (auto ua = ex.req.header("user-agent")) ctx->user_agent = std::string(ua->substr(0, 512));
  ctx->request_id = ex.req.request_id;
  return ctx;
}

void auditor::on_response(exchange& ex, response& r) {
  const auto& rule = ex.matched->audit;
  auto mode = rule.mode;
  bool success = r.status < 400;
  bool reading = mode == audit_mode::read || mode == audit_mode::list;
  // Who is asking decides the chain: a request without a tenant (an unknown e-mail, no token)
  // is recorded in chain 0, carecrm's own.
  std::int64_t tenant = ex.who.tenant_id;
  switch (mode) {
  case audit_mode::none:
    if (r.status != 403 || tenant == 0) return;
    break;
  case audit_mode::read:
  case audit_mode::list:
    if (reads_ == read_policy::off || tenant == 0) return;
    break;
  case audit_mode::change_in_tx:
    if (success || tenant == 0) return; // the actor audited it with the change
    break;
  case audit_mode::change:
    if (tenant == 0) return;
    break;
  case audit_mode::security: break;
  }
  // Filled here rather than through an audit_context: this runs for every audited read.
  domain::audit_record row;
  row.tenant_id = tenant;
  row.at = domain::now_micros();
  if (ex.who.api_key_id != 0) {
    row.actor_type = "api_key";
    row.role = domain::to_string(ex.who.role);
    row.actor_ref = "api_key:" + std::to_string(ex.who.api_key_id);
  } else if (ex.who.user_id != 0) {
    row.actor_type = "user";
    row.user_id = ex.who.user_id;
    row.role = domain::to_string(ex.who.role);
  } else {
    row.actor_type = "anonymous";
    row.actor_ref = std::string(to_string(ex.req.method)) + " " + ex.req.path;
  }
  row.resource = rule.resource;
  if (!rule.id_param.empty()) {
    auto v = ex.param(rule.id_param);
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc() && end == v.data() + v.size()) row.resource_id = n;
  } else if (mode == audit_mode::read && success && !rule.answer_id.empty() && !r.stream) {
    row.resource_id = domain::member_id(r.body, rule.answer_id);
  }
  if (mode == audit_mode::read && !ex.audit_records.empty())
    row.resource_id = ex.audit_records.front();
  row.action = ex.audit_action.empty() ? rule.action : ex.audit_action;
  row.client_ip = ex.req.remote;
  if (auto ua = ex.req.header("user-agent")) row.user_agent = ua->substr(0, 512);
  row.request_id = ex.req.request_id;
  row.status = r.status;
  row.outcome = domain::audit_outcome(r.status);
  if (mode == audit_mode::list) {
    if (!rule.secret_query) row.query = std::string(query_of(ex.req).substr(0, 2048));
    if (success && !rule.list_key.empty() && !r.stream)
      row.ids = domain::list_ids(r.body, rule.list_key, rule.nested,
                                 rule.answer_id.empty() ? "id" : rule.answer_id);
    if (success && !ex.audit_records.empty()) row.ids = ex.audit_records;
  }
  if (mode == audit_mode::change || (mode == audit_mode::change_in_tx && !success))
    row.fields = body_fields(ex.req);
  if (writer_.record(std::move(row))) return;
  // The row could not be queued: a read of health data is not answered unaudited.
  if (reading && success && reads_ == read_policy::required) {
    r = error_response(domain::errc::service_unavailable,
                       "the audit trail cannot record this read now; retry");
    return;
  }
  dropped_.fetch_add(1, std::memory_order_relaxed);
  if (dropped_.load(std::memory_order_relaxed) % 1000 == 1)
    log_warn("audit: a {} row could not be queued (the writer is behind)", rule.resource);
}

} // namespace crm::http
