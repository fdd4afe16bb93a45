// Workflow endpoints (contract §7, docs/automation.md): CRUD, manual runs, runs, webhook info
// (managers and admins), and the inbound workflow webhook (no JWT: the workflow's secret).
#include "http/api.hpp"

#include "actors/workflows.hpp"
#include "domain/json_nul.hpp"
#include "domain/validation.hpp"
#include "http/contact_input.hpp"
#include "http/json.hpp"
#include "http/owner_directory.hpp"
#include "http/request_input.hpp"
#include "persistence/automation_repo.hpp"
#include "persistence/pg_pool.hpp"

#include <boost/json.hpp>

namespace json = boost::json;

namespace crm::http {
namespace {

owner_directory& workflow_owners() {
  static owner_directory directory("workflow", &persistence::tenant_of_workflow);
  return directory;
}

using domain::failure;
using domain::issue;

constexpr const char* trigger_names =
    "'contact.created', 'contact.updated', 'contact.deleted', 'contact.status_changed', "
    "'contact.tag_added', 'deal.created', 'deal.updated', 'deal.stage_changed', 'deal.won', "
    "'deal.lost', 'deal.deleted', 'message.received', 'webhook', 'schedule' or 'manual'";

std::optional<domain::trigger_type> read_trigger(body_reader& body, bool required) {
  auto t = body.text("trigger_type", required);
  if (!t) return std::nullopt;
  auto type = domain::parse_trigger_type(*t);
  if (!type)
    body.add({"body", "trigger_type"}, std::string("Input should be ") + trigger_names, "enum");
  return type;
}

// The fields both create and update read, as sent.
actors::workflow_patch read_patch(body_reader& body, bool creating) {
  actors::workflow_patch p;
  p.name = body.text("name", creating, {.min = 1, .max = 200, .trim = true});
  p.description = body.nullable_text("description", {.max = 2000});
  p.trigger = read_trigger(body, creating);
  if (auto cfg = body.raw("trigger_config")) p.trigger_config = *cfg;
  if (auto c = body.raw("conditions")) p.conditions = domain::parse_conditions(*c, body.issues());
  if (auto a = body.raw("actions")) p.actions = domain::parse_actions(*a, body.issues());
  p.is_active = body.boolean("is_active", false);
  p.webhook_secret = body.nullable_text("webhook_secret", {.min = 16, .max = 256});
  return p;
}

void create(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto p = read_patch(body, true);
  std::optional<json::object> config;
  if (p.trigger) {
    json::value cfg = p.trigger_config ? *p.trigger_config : json::value(json::object());
    config = domain::parse_trigger_config(*p.trigger, cfg, body.issues());
  }
  if (!body.finish() || !config) return ex->fail(body.failure());
  domain::workflow w;
  w.name = *p.name;
  if (p.description) w.description = *p.description;
  w.trigger = *p.trigger;
  w.trigger_config = std::move(*config);
  if (p.conditions) w.conditions = std::move(*p.conditions);
  if (p.actions) w.actions = std::move(*p.actions);
  w.is_active = p.is_active.value_or(true);
  if (p.webhook_secret) w.webhook_secret = *p.webhook_secret;
  actors::create_workflow(
      s.rt, ex->who.tenant_id, std::move(w),
      forgetting_missing(workflow_owners(), created_reply(ex, "/api/v1/workflows/")));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  actors::workflow_filter f;
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
  if (auto t = ex->req.query_value("trigger_type")) {
    f.trigger = domain::parse_trigger_type(*t);
    if (!f.trigger)
      issues.push_back(
          {{"query", "trigger_type"}, std::string("Input should be ") + trigger_names, "enum"});
  }
  f.is_active = query_bool(ex->req, "is_active", std::nullopt, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  f.page = *page;
  f.per_page = *per_page;
  actors::list_workflows(s.rt, ex->who.tenant_id, f, json_reply(ex));
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_workflow(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void update(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto p = read_patch(body, false);
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_workflow(s.rt, ex->who.tenant_id, *id, std::move(p), json_reply(ex));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_workflow(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

actors::callback<std::int64_t> accepted(const exchange_ptr& ex) {
  return actors::callback<std::int64_t>([ex](domain::outcome<std::int64_t> r) {
    if (!r) return ex->fail(r.error());
    json::object o{{"run_id", *r}, {"status", "queued"}};
    ex->json(202, json::serialize(o));
  });
}

void run(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  json::value payload = json::object();
  if (!ex->req.body.empty()) {
    json::error_code ec;
    payload = json::parse(ex->req.body, ec);
    if (ec) return ex->fail(failure::invalid({{{"body"}, "JSON decode error", "json_invalid"}}));
    if (auto at = domain::nul_location(ex->req.body, payload))
      return ex->fail(failure::invalid({domain::nul_issue(std::move(*at))}));
  }
  actors::run_workflow(s.rt, ex->who.tenant_id, *id, std::move(payload), accepted(ex));
}

void runs(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  auto page = query_int(ex->req, "page", 1, 1, 1'000'000, issues);
  auto per_page = query_int(ex->req, "per_page", 20, 1, 100, issues);
  std::optional<domain::run_status> status;
  if (auto v = ex->req.query_value("status")) {
    status = domain::parse_run_status(*v);
    if (!status)
      issues.push_back({{"query", "status"},
                        "Input should be 'queued', 'running', 'waiting', 'succeeded' or 'failed'",
                        "enum"});
  }
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_runs(s.rt, ex->who.tenant_id, *id, status, *page, *per_page, json_reply(ex));
}

void get_run(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex, "run_id");
  if (!id) return;
  actors::get_run(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void info(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex, "workflow_id");
  if (!id) return;
  actors::webhook_info(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void inbound(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex, "workflow_id");
  if (!id) return;
  actors::webhook_call call;
  call.body = ex->req.body;
  if (auto v = ex->req.header("x-webhook-secret")) call.secret = std::string(*v);
  if (auto v = ex->req.header("x-webhook-signature")) call.signature = std::string(*v);
  if (auto v = ex->req.header("webhook-id")) call.std_id = std::string(*v);
  if (auto v = ex->req.header("webhook-timestamp")) call.std_timestamp = std::string(*v);
  if (auto v = ex->req.header("webhook-signature")) call.std_signature = std::string(*v);
  if (auto v = ex->req.header("carecrm-chain-depth")) {
    int d = 0;
    for (char c : *v)
      if (c >= '0' && c <= '9' && d < 100) d = d * 10 + (c - '0');
    call.depth = d;
  }
  auto deliver = [&s, ex, id = *id](std::int64_t tenant, actors::webhook_call call) {
    actors::receive_webhook(s.rt, tenant, id, std::move(call), accepted(ex));
  };
  workflow_owners().find(
      s.pool, *id,
      [ex, deliver,
       call = std::move(call)](domain::outcome<std::optional<std::int64_t>> r) mutable {
        if (!r) return ex->fail(r.error());
        if (!*r) return ex->fail(failure::of(domain::errc::not_found, "workflow not found"));
        deliver(**r, std::move(call));
      });
}

} // namespace

actors::contact_fields read_contact_patch(const json::object& fields,
                                          std::vector<domain::issue>& issues) {
  return read_contact(fields, false, {"params", "fields"}, issues);
}

void add_workflow_routes(router& r, services& s) {
  using domain::permission;
  constexpr auto manage = permission::manage_automation;
  r.add({verb::get, "/api/v1/workflows", access::bearer, manage, bind(s, list),
         "List workflows (page, per_page, trigger_type, is_active)", "workflows"});
  r.add({verb::post, "/api/v1/workflows", access::bearer, manage, bind(s, create),
         "Create a workflow", "workflows", 201});
  r.add({verb::get, "/api/v1/workflows/{id}", access::bearer, manage, bind(s, get),
         "Get a workflow", "workflows"});
  r.add({verb::put, "/api/v1/workflows/{id}", access::bearer, manage, bind(s, update),
         "Update a workflow (fields sent)", "workflows"});
  r.add({verb::patch, "/api/v1/workflows/{id}", access::bearer, manage, bind(s, update),
         "Update a workflow (fields sent)", "workflows"});
  r.add({verb::del, "/api/v1/workflows/{id}", access::bearer, manage, bind(s, remove),
         "Delete a workflow and its runs", "workflows", 204});
  r.add({verb::post, "/api/v1/workflows/{id}/run", access::bearer, manage, bind(s, run),
         "Run a manual workflow (body: the trigger payload)", "workflows", 202});
  r.add({verb::get, "/api/v1/workflows/{id}/runs", access::bearer, manage, bind(s, runs),
         "List a workflow's runs (page, per_page, status)", "workflows"});
  r.add({verb::get, "/api/v1/workflow-runs/{run_id}", access::bearer, manage, bind(s, get_run),
         "Get a workflow run with its steps", "workflows"});
  r.add({verb::get, "/api/v1/webhooks/info/{workflow_id}", access::bearer, manage, bind(s, info),
         "Webhook info of a workflow", "webhooks"});
  r.add({verb::post,
         "/api/v1/webhooks/{workflow_id}",
         access::open,
         {},
         bind(s, inbound),
         "Trigger a webhook workflow (X-Webhook-Secret or X-Webhook-Signature)",
         "webhooks",
         202},
        route_doc::secrets({"X-Webhook-Secret", "X-Webhook-Signature"}));
}

} // namespace crm::http
