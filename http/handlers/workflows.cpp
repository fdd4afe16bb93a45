// Workflow endpoints (contract §7, docs/automation.md): CRUD, manual runs, runs, webhook info
// (managers and admins), and the inbound workflow webhook (no JWT: the workflow's secret).
#include "http/api.hpp"

#include "http/placement.hpp"

#include "actors/workflows.hpp"
#include "domain/clock.hpp"
#include "domain/consent.hpp"
#include "domain/json_nul.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"
#include "domain/workflow.hpp"
#include "http/contact_input.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"
#include "http/secret_gate.hpp"
#include "persistence/automation_repo.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/secret_owners.hpp"

#include <boost/json.hpp>

#include <array>
#include <cctype>
#include <span>

namespace json = boost::json;

namespace crm::http {
namespace {

secret_gate& workflow_gate() {
  static secret_gate gate("workflow", &persistence::webhook_owner_of_workflow);
  return gate;
}

using domain::failure;
using domain::issue;

// The rules of the fields read here (the definition's own rules, trigger_config, conditions
// and actions, are domain::workflow_rules), shared with the OpenAPI schemas below.
namespace workflow_field_rules {
constexpr text_rule name{.min = 1, .max = 200, .trim = true};
constexpr text_rule description{.max = 2000};
constexpr text_rule webhook_secret{.min = 16, .max = 256};
} // namespace workflow_field_rules

// "'a', 'b' or 'c'": the allowed values of an enum issue.
std::string choices(std::span<const std::string_view> values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += i + 1 == values.size() ? " or " : ", ";
    out += "'" + std::string(values[i]) + "'";
  }
  return out;
}

const std::string& trigger_names() {
  static const std::string names = choices(domain::workflow_rules::trigger_types);
  return names;
}

std::optional<domain::trigger_type> read_trigger(body_reader& body, bool required) {
  auto t = body.text("trigger_type", required);
  if (!t) return std::nullopt;
  auto type = domain::parse_trigger_type(*t);
  if (!type) body.add({"body", "trigger_type"}, "Input should be " + trigger_names(), "enum");
  return type;
}

// The fields both create and update read, as sent.
actors::workflow_patch read_patch(body_reader& body, bool creating) {
  actors::workflow_patch p;
  namespace rules = workflow_field_rules;
  p.name = body.text("name", creating, rules::name);
  p.description = body.nullable_text("description", rules::description);
  p.trigger = read_trigger(body, creating);
  if (auto cfg = body.raw("trigger_config")) p.trigger_config = *cfg;
  if (auto c = body.raw("conditions")) p.conditions = domain::parse_conditions(*c, body.issues());
  if (auto a = body.raw("actions")) p.actions = domain::parse_actions(*a, body.issues());
  p.is_active = body.boolean("is_active", false);
  p.webhook_secret = body.nullable_text("webhook_secret", rules::webhook_secret);
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
      forgetting_unknown(workflow_gate(), created_reply(ex, "/api/v1/workflows/")));
}

void list(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  actors::workflow_filter f;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (auto t = ex->req.query_value("trigger_type")) {
    f.trigger = domain::parse_trigger_type(*t);
    if (!f.trigger)
      issues.push_back({{"query", "trigger_type"}, "Input should be " + trigger_names(), "enum"});
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
  // The gate reads the secret again at the next call here (other nodes within a second).
  actors::update_workflow(s.rt, ex->who.tenant_id, *id, std::move(p),
                          forgetting(workflow_gate(), *id, json_reply(ex)));
}

void remove(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_workflow(s.rt, ex->who.tenant_id, *id,
                          forgetting(workflow_gate(), *id, no_content_reply(ex)));
}

actors::callback<std::int64_t> accepted(const exchange_ptr& ex) {
  return actors::callback<std::int64_t>([ex](domain::outcome<std::int64_t> r) {
    if (!r) return ex->fail(r.error());
    json::object o{{"run_id", *r}, {"status", domain::to_string(domain::run_status::queued)}};
    ex->json(202, json::serialize(o));
  });
}

void run(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  json::value payload = json::object();
  if (!ex->req.body.empty()) {
    json::error_code ec;
    payload = crm::domain::parse_json(ex->req.body, ec);
    if (ec) return ex->fail(failure::invalid({{{"body"}, "JSON decode error", "json_invalid"}}));
    if (auto at = domain::nul_location(ex->req.body, payload))
      return ex->fail(failure::invalid({domain::nul_issue(std::move(*at))}));
  }
  actors::run_workflow(s.rt, ex->who.tenant_id, *id, std::move(payload), accepted(ex));
}

void runs(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  std::optional<domain::run_status> status;
  if (auto v = ex->req.query_value("status")) {
    status = domain::parse_run_status(*v);
    if (!status)
      issues.push_back(
          {{"query", "status"}, "Input should be " + choices(domain::run_statuses), "enum"});
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
  auto& creds = call.creds;
  if (auto v = ex->req.header("x-webhook-secret")) creds.secret = std::string(*v);
  if (auto v = ex->req.header("x-webhook-signature")) creds.signature = std::string(*v);
  if (auto v = ex->req.header("webhook-id")) creds.std_id = std::string(*v);
  if (auto v = ex->req.header("webhook-timestamp")) creds.std_timestamp = std::string(*v);
  if (auto v = ex->req.header("webhook-signature")) creds.std_signature = std::string(*v);
  if (auto v = ex->req.header("carecrm-chain-depth")) {
    int d = 0;
    for (char c : *v)
      if (c >= '0' && c <= '9' && d < 100) d = d * 10 + (c - '0');
    call.depth = d;
  }
  auto deliver = [&s, ex, id = *id](std::int64_t tenant, actors::webhook_call call) {
    within_tenant(s, ex, tenant, [&s, ex, id, tenant, call = std::move(call)]() mutable {
      actors::receive_webhook(s.rt, tenant, id, std::move(call), accepted(ex));
    });
  };
  // The secret is checked here before the tenant is woken; a workflow that does not exist is
  // refused like a wrong secret (ids are sequential: the answer must not tell which exist).
  auto shared = std::make_shared<actors::webhook_call>(std::move(call));
  auto accepts = [shared](const persistence::secret_owner& o) {
    return !domain::webhook_refusal(o.secret, shared->creds, shared->body, domain::now_seconds());
  };
  workflow_gate().admit(s.pool, *id, std::move(accepts),
                        [ex, deliver, shared](domain::outcome<secret_gate::admission> r) mutable {
                          if (!r) return ex->fail(r.error());
                          if (r->v != secret_gate::verdict::admitted)
                            return ex->fail(failure::of(domain::errc::invalid_credentials,
                                                        std::string(domain::webhook_refused)));
                          deliver(r->tenant, std::move(*shared));
                        });
}

// ---- OpenAPI schemas ------------------------------------------------------------------------

using schema::constant;
using schema::object_t;

// A pattern matching `text` literally (`in_class`: the members of a character class).
std::string literal_pattern(std::string_view text, bool in_class = false) {
  std::string_view special = in_class ? "\\]^-[" : "\\^$.|?*+()[]{}/";
  std::string out;
  for (char c : text) {
    if (special.find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// A pattern matching `text` in any case ("[Hh][Oo][Ss][Tt]").
std::string any_case_pattern(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto upper = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (lower != upper)
      out += std::string("[") + upper + lower + "]";
    else
      out += literal_pattern(std::string_view(&c, 1));
  }
  return out;
}

object_t any_of(std::initializer_list<object_t> schemas) {
  json::array a;
  for (auto& x : schemas) a.emplace_back(x);
  return object_t{{"anyOf", std::move(a)}};
}

// Any JSON value.
object_t any_value(std::string_view description) {
  return object_t{{"description", description}};
}

// A string holding a template, which stands for a value checked when the step runs.
object_t template_text() {
  auto t = schema::text_matching(literal_pattern(domain::workflow_rules::template_open));
  t["description"] = "a template such as {{contact.id}}, resolved when the step runs";
  return t;
}

object_t templated(object_t s) {
  return any_of({std::move(s), template_text()});
}

// An optional member a client may also send as null (the readers treat null as absent).
schema::property optional(std::string_view name, object_t s) {
  return {name, schema::nullable(std::move(s)), false};
}

// The contact of a contact action (domain check_contact_id): an id, its digits, or a template.
object_t contact_id() {
  return any_of({schema::id(), schema::text_matching("^0*[1-9][0-9]*$"), template_text()});
}

object_t id_or_template() {
  return templated(schema::id());
}

// `s` where exactly one of `members` is given (not null).
void exactly_one_of(object_t& s,
                    std::initializer_list<std::pair<std::string_view, const char*>> members) {
  json::array branches;
  for (auto& [name, type] : members)
    branches.emplace_back(object_t{{"required", json::array{name}},
                                   {"properties", object_t{{name, object_t{{"type", type}}}}}});
  s["oneOf"] = std::move(branches);
}

// One action of a definition in a request: `type` and the `params` of that type.
object_t action(domain::action_type type, object_t params, std::string_view description) {
  bool params_required = type != domain::action_type::ai_reply; // ai_reply's are all optional
  auto o = schema::object(
      {{"type", constant(domain::to_string(type))},
       {"params", params_required ? std::move(params) : schema::nullable(std::move(params)),
        params_required}});
  o["description"] = description;
  return o;
}

std::string component_of(domain::action_type type) {
  std::string name = "WorkflowAction";
  bool upper = true;
  for (char c : domain::to_string(type)) {
    if (c == '_') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return name;
}

// The trigger_config component of a trigger type (as domain::parse_trigger_config reads it).
std::string_view trigger_config_of(domain::trigger_type t) {
  using domain::trigger_type;
  switch (t) {
  case trigger_type::contact_status_changed: return "WorkflowTriggerConfigStatusChanged";
  case trigger_type::contact_tag_added: return "WorkflowTriggerConfigTagAdded";
  case trigger_type::deal_stage_changed: return "WorkflowTriggerConfigStageChanged";
  case trigger_type::deal_created:
  case trigger_type::deal_updated:
  case trigger_type::deal_won:
  case trigger_type::deal_lost:
  case trigger_type::deal_deleted: return "WorkflowTriggerConfigDeal";
  case trigger_type::appointment_booked:
  case trigger_type::appointment_rescheduled:
  case trigger_type::appointment_cancelled:
  case trigger_type::appointment_confirmed:
  case trigger_type::appointment_no_show:
  case trigger_type::appointment_completed: return "WorkflowTriggerConfigAppointment";
  case trigger_type::schedule: return "WorkflowTriggerConfigSchedule";
  default: return "WorkflowTriggerConfigNone";
  }
}

void define_trigger_configs(router& r) {
  using namespace schema;
  namespace rules = domain::workflow_rules;
  auto status = one_of(contact_rules::statuses);
  define(r, "WorkflowTriggerConfigStatusChanged",
         object({optional("from", status), optional("to", status)}));
  auto tag = text({.min = 1, .max = contact_rules::tag_max});
  define(r, "WorkflowTriggerConfigTagAdded", object({optional("tag", tag)}));
  define(r, "WorkflowTriggerConfigStageChanged",
         object({optional("pipeline_id", id()), optional("from", id()), optional("to", id())}));
  define(r, "WorkflowTriggerConfigDeal", object({optional("pipeline_id", id())}));
  define(r, "WorkflowTriggerConfigAppointment",
         object({optional("calendar_id", id()), optional("service_id", id())}));
  auto schedule =
      object({optional("interval_seconds", integer(rules::interval_min, rules::interval_max)),
              optional("cron", text({.min = 1, .max = rules::cron_max})),
              optional("payload", any_object())});
  schedule["description"] = "exactly one of interval_seconds and cron (5 fields: minute hour "
                            "day-of-month month day-of-week); payload is the runs' trigger "
                            "payload";
  exactly_one_of(schedule, {{"interval_seconds", "integer"}, {"cron", "string"}});
  define(r, "WorkflowTriggerConfigSchedule", schedule);
  define(r, "WorkflowTriggerConfigNone", object({}));
  json::array all;
  for (auto name : {"WorkflowTriggerConfigStatusChanged", "WorkflowTriggerConfigTagAdded",
                    "WorkflowTriggerConfigStageChanged", "WorkflowTriggerConfigDeal",
                    "WorkflowTriggerConfigAppointment", "WorkflowTriggerConfigSchedule",
                    "WorkflowTriggerConfigNone"})
    all.emplace_back(schema::ref(name));
  define(r, "WorkflowTriggerConfig",
         object_t{{"anyOf", std::move(all)},
                  {"description", "the filters or schedule of the trigger type (null or absent: "
                                  "{}); each type takes the members of its component"}});
}

void define_conditions(router& r) {
  using namespace schema;
  namespace rules = domain::workflow_rules;
  auto c = object({{"field", text({.min = 1, .max = rules::field_max})},
                   {"op", one_of(rules::condition_ops)},
                   {"value", any_value("what the op compares the field with"), false}});
  c["description"] = "field: a dotted path of the trigger payload (contact fields also "
                     "without the contact. prefix, cf.<key> for custom fields)";
  // What value each op takes is said in words: an if/then by op would be exact but makes example
  // checkers report the example's members as unevaluated.
  c["properties"].as_object()["value"].as_object()["description"] =
      "what the op compares the field with: exists takes a boolean or nothing; in, a list; gt "
      "and lt, a number or a string; eq, neq, contains and changed_to, any value (required)";
  define(r, "WorkflowCondition", c);
}

void define_actions(router& r) {
  using namespace schema;
  namespace rules = domain::workflow_rules;
  using domain::action_type;
  // A contact's tag, or a template of one (longer before it is rendered).
  auto tag = text({.min = 1, .max = rules::tag_template_max});
  tag["description"] = "a tag of at most " + std::to_string(contact_rules::tag_max) +
                       " characters, or a template ({{...}}) of at most " +
                       std::to_string(rules::tag_template_max);

  auto fields = object({});
  for (auto name : rules::update_contact_fields)
    fields["properties"].as_object()[name] = any_value("read as PATCH /contacts/{id} reads it");
  fields["minProperties"] = 1;
  define(r, component_of(action_type::update_contact),
         action(action_type::update_contact,
                object({{"fields", fields}, optional("contact_id", contact_id())}),
                "update the contact's fields (the trigger's contact unless contact_id)"));

  define(r, component_of(action_type::set_status),
         action(action_type::set_status,
                object({{"status", templated(one_of(contact_rules::statuses))},
                        optional("contact_id", contact_id())}),
                "set the contact's status"));

  auto tags = array_of(tag);
  tags["minItems"] = 1;
  auto add_tag =
      object({optional("tag", tag), optional("tags", tags), optional("contact_id", contact_id())});
  exactly_one_of(add_tag, {{"tag", "string"}, {"tags", "array"}});
  define(r, component_of(action_type::add_tag),
         action(action_type::add_tag, add_tag, "add a tag (or tags) to the contact"));

  define(r, component_of(action_type::remove_tag),
         action(action_type::remove_tag,
                object({{"tag", tag}, optional("contact_id", contact_id())}),
                "remove a tag from the contact"));

  auto at_run = [] { return any_value("read as POST /deals reads it, when the step runs"); };
  define(r, component_of(action_type::create_deal),
         action(action_type::create_deal,
                object({{"title", text({.min = 1, .max = rules::deal_title_max})},
                        optional("contact_id", id_or_template()),
                        optional("company_id", id_or_template()),
                        optional("owner_id", id_or_template()),
                        optional("pipeline_id", id_or_template()),
                        optional("stage_id", id_or_template()),
                        optional("custom_fields", any_object()),
                        {"amount", at_run(), false},
                        {"currency", at_run(), false},
                        {"expected_close_date", at_run(), false},
                        {"lost_reason", at_run(), false}}),
                "create a deal"));

  auto position = integer();
  position["minimum"] = 0;
  define(
      r, component_of(action_type::move_deal),
      action(action_type::move_deal,
             object({{"stage_id", id_or_template()},
                     optional("deal_id", id_or_template()),
                     optional("position", templated(position)),
                     {"lost_reason", any_value("read as POST /deals/{id}/move reads it"), false}}),
             "move a deal (the trigger's deal unless deal_id) to a stage"));

  define(r, component_of(action_type::send_message),
         action(action_type::send_message,
                object({{"text", text({.min = 1, .max = rules::message_text_max})},
                        optional("channel_id", id_or_template()),
                        optional("contact_id", contact_id()),
                        optional("purpose", one_of(domain::consent_rules::purposes))}),
                "send a message to the contact (checked against its consents for purpose)"));

  auto url = text({.min = 1, .max = rules::url_max});
  url["anyOf"] = json::array{text_matching("^[Hh][Tt][Tt][Pp][Ss]?://"), template_text()};
  url["description"] = "http(s)://host[:port][/path][?query], without user info or fragment";
  auto headers = object({}, false);
  headers.erase("properties");
  headers["maxProperties"] = rules::headers_max;
  std::string forbidden;
  for (auto h : rules::client_headers)
    forbidden += (forbidden.empty() ? "" : "|") + any_case_pattern(h);
  headers["propertyNames"] =
      object_t{{"pattern", "^[" + literal_pattern(rules::token_symbols, true) + "0-9A-Za-z]+$"},
               {"not", object_t{{"pattern", "^(?:" + forbidden + ")$"}}}};
  headers["additionalProperties"] = text_matching("^[^\\r\\n\\u0000]*$");
  headers["description"] = "write-only: answers show the values as null";
  define(
      r, component_of(action_type::http_request),
      action(action_type::http_request,
             object({{"url", url},
                     optional("method", templated(one_of(rules::http_methods))),
                     optional("headers", headers),
                     {"body", any_value("sent as JSON"), false},
                     optional("timeout_seconds", integer(rules::timeout_min, rules::timeout_max))}),
             "call a URL"));

  define(r, component_of(action_type::ai_reply),
         action(action_type::ai_reply, object({optional("agent_id", id_or_template())}),
                "reply with an AI agent (the trigger channel's auto-replying agent unless "
                "agent_id)"));

  // create_task (docs/tasks.md "From a workflow").
  namespace task_rules = domain::task_rules;
  auto task = object({{"title", text({.min = 1, .max = task_rules::title_max})},
                      optional("description", text({.min = 0, .max = task_rules::description_max})),
                      optional("priority", templated(one_of(task_rules::priorities))),
                      optional("assignee_id", id_or_template()),
                      optional("contact_id", contact_id()),
                      optional("deal_id", id_or_template()),
                      optional("appointment_id", id_or_template())});
  for (auto& [unit, scale] : rules::task_due_units)
    task["properties"].as_object()[unit] = integer(0, rules::task_due_max_seconds / scale);
  define(r, component_of(action_type::create_task),
         action(action_type::create_task, task,
                "create a task, about the trigger's contact, deal and appointment unless the "
                "params name others, due after at most one of due_in_minutes, due_in_hours "
                "and due_in_days"));

  auto delay = object({});
  auto& props = delay["properties"].as_object();
  json::array one_of_units;
  for (auto& [unit, scale] : rules::delay_units) {
    props[unit] = nullable(integer(1, rules::delay_max_seconds / scale));
    one_of_units.emplace_back(
        object_t{{"required", json::array{unit}},
                 {"properties", object_t{{unit, object_t{{"type", "integer"}}}}}});
  }
  delay["oneOf"] = std::move(one_of_units);
  define(r, component_of(action_type::delay),
         action(action_type::delay, delay, "wait (exactly one unit)"));

  json::array all;
  json::object mapping;
  for (std::size_t i = 0; i < rules::action_types.size(); ++i) {
    auto type = static_cast<action_type>(i);
    auto name = component_of(type);
    all.emplace_back(schema::ref(name));
    mapping[domain::to_string(type)] = "#/components/schemas/" + name;
  }
  define(r, "WorkflowActionInput",
         object_t{{"oneOf", std::move(all)},
                  {"discriminator",
                   object_t{{"propertyName", "type"}, {"mapping", std::move(mapping)}}}});
  // As answers show it: the params as sent, the header values of http_request as null.
  define(r, "WorkflowAction",
         object({{"type", one_of(rules::action_types)}, {"params", any_object()}}));
}

void define_workflow_schemas(router& r) {
  using namespace schema;
  namespace rules = domain::workflow_rules;
  namespace fields = workflow_field_rules;
  define_trigger_configs(r);
  define_conditions(r);
  define_actions(r);

  auto conditions = array_of(ref("WorkflowCondition"));
  conditions["maxItems"] = rules::items_max;
  conditions["description"] = "all must hold for a run to take its actions (null: none)";
  auto actions = array_of(ref("WorkflowActionInput"));
  actions["maxItems"] = rules::items_max;
  actions["description"] = "the steps of a run, in order (null: none)";
  // trigger_config as the trigger type reads it (WorkflowTriggerConfig is any of them; an
  // if/then by type would be exact but makes example checkers report the example's members as
  // unevaluated).
  std::string config_of = "its shape follows trigger_type:";
  for (std::size_t i = 0; i < rules::trigger_types.size(); ++i)
    config_of += std::string(i ? ", " : " ") + std::string(rules::trigger_types[i]) + " → " +
                 std::string(trigger_config_of(static_cast<domain::trigger_type>(i)));
  config_of += "; a schedule trigger needs it when created";
  auto input = [&](bool creating) {
    auto o = object({{"name", text(fields::name), creating},
                     optional("description", text(fields::description)),
                     {"trigger_type", one_of(rules::trigger_types), creating},
                     optional("trigger_config", ref("WorkflowTriggerConfig")),
                     optional("conditions", conditions),
                     optional("actions", actions),
                     {"is_active", boolean(), false},
                     optional("webhook_secret", text(fields::webhook_secret))});
    auto& props = o["properties"].as_object();
    props["trigger_config"].as_object()["description"] = config_of;
    props["is_active"].as_object()["default"] = true;
    props["webhook_secret"].as_object()["description"] =
        "write-only: webhook calls must carry it (X-Webhook-Secret) or sign with it; a webhook "
        "workflow saved without one (or with null) gets one drawn, shown once in that answer";
    return o;
  };
  define(r, "WorkflowCreate", input(true));
  define(r, "WorkflowUpdate", input(false));

  auto stored_condition =
      object_t{{"allOf", json::array{ref("WorkflowCondition"),
                                     object_t{{"required", json::array{"field", "op", "value"}}}}}};
  define(r, "Workflow",
         object({{"id", id()},
                 {"name", text({})},
                 {"description", nullable(text({}))},
                 {"trigger_type", one_of(rules::trigger_types)},
                 {"trigger_config", ref("WorkflowTriggerConfig")},
                 {"conditions", array_of(stored_condition)},
                 {"actions", array_of(ref("WorkflowAction"))},
                 {"is_active", boolean()},
                 {"has_secret", boolean()},
                 optional("webhook_secret", text({})),
                 {"is_webhook_trigger", boolean()},
                 {"webhook_url", nullable(text({}))},
                 {"next_run_at", nullable(timestamp())},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "WorkflowPage", page_of("Workflow"));
  define(r, "WorkflowWebhookInfo",
         object({{"has_secret", boolean()},
                 {"workflow_id", id()},
                 {"workflow_name", text({})},
                 {"trigger_type", one_of(rules::trigger_types)},
                 {"is_webhook_trigger", boolean()},
                 {"webhook_url", nullable(text({}))}}));
  define(r, "WorkflowRunPayload",
         any_value("the trigger payload: any JSON value (an empty body is {})"));
  define(r, "WorkflowRunQueued",
         object({{"run_id", id()},
                 {"status", constant(domain::to_string(domain::run_status::queued))}}));
  std::array<std::string_view, 2> finished{domain::to_string(domain::run_status::succeeded),
                                           domain::to_string(domain::run_status::failed)};
  define(r, "WorkflowRunStep",
         object({{"index", integer()},
                 {"type", nullable(one_of(rules::action_types))},
                 {"status", one_of(finished)},
                 {"params", any_object()},
                 {"result", any_value("what the action returned")},
                 {"error", nullable(text({}))},
                 {"started_at", timestamp()},
                 {"finished_at", timestamp()}}));
  define(r, "WorkflowRun",
         object({{"id", id()},
                 {"workflow_id", id()},
                 {"status", one_of(domain::run_statuses)},
                 {"trigger_type", one_of(rules::trigger_types)},
                 {"trigger_payload", any_value("the trigger payload")},
                 {"depth", integer()},
                 {"conditions_met", boolean()},
                 {"steps", array_of(ref("WorkflowRunStep"))},
                 {"error", nullable(text({}))},
                 {"resume_at", nullable(timestamp())},
                 {"created_at", timestamp()},
                 {"started_at", nullable(timestamp())},
                 {"finished_at", nullable(timestamp())},
                 {"updated_at", timestamp()}}));
  define(r, "WorkflowRunPage", page_of("WorkflowRun"));
}

constexpr const char* workflow_example = R"({
  "name": "Welcome new patients",
  "description": "Tag contacts from the website and tell the front desk",
  "trigger_type": "contact.created",
  "conditions": [{"field": "source", "op": "eq", "value": "website"}],
  "actions": [
    {"type": "add_tag", "params": {"tag": "new-patient"}},
    {"type": "delay", "params": {"hours": 1}},
    {"type": "http_request",
     "params": {"url": "https://example.org/hooks/new-patient", "method": "POST",
                "body": {"contact_id": "{{contact.id}}", "run": "{{run.id}}"}}}
  ],
  "is_active": true
})";

} // namespace

actors::contact_fields read_contact_patch(const json::object& fields,
                                          std::vector<domain::issue>& issues) {
  return read_contact(fields, false, {"params", "fields"}, issues);
}

void add_workflow_routes(router& r, services& s) {
  using domain::permission;
  using schema::query;
  constexpr auto manage = permission::manage_automation;
  define_workflow_schemas(r);
  auto list_query = schema::paging();
  list_query.push_back(query("trigger_type", schema::one_of(domain::workflow_rules::trigger_types),
                             "only workflows of this trigger type"));
  list_query.push_back(query("is_active", schema::boolean(), "only active (or inactive) ones"));
  r.add({verb::get, "/api/v1/workflows", access::bearer, manage, bind(s, list),
         "List workflows (page, per_page, trigger_type, is_active)", "workflows"},
        route_doc("", "WorkflowPage").with_query(std::move(list_query)));
  r.add({verb::post, "/api/v1/workflows", access::bearer, manage, bind(s, create),
         "Create a workflow", "workflows", 201},
        route_doc("WorkflowCreate", "Workflow").with_example(workflow_example));
  r.add({verb::get, "/api/v1/workflows/{id}", access::bearer, manage, bind(s, get),
         "Get a workflow", "workflows"},
        {"", "Workflow"});
  r.add({verb::put, "/api/v1/workflows/{id}", access::bearer, manage, bind(s, update),
         "Update a workflow (fields sent)", "workflows"},
        {"WorkflowUpdate", "Workflow"});
  r.add({verb::patch, "/api/v1/workflows/{id}", access::bearer, manage, bind(s, update),
         "Update a workflow (fields sent)", "workflows"},
        {"WorkflowUpdate", "Workflow"});
  r.add({verb::del, "/api/v1/workflows/{id}", access::bearer, manage, bind(s, remove),
         "Delete a workflow and its runs", "workflows", 204});
  r.add({verb::post, "/api/v1/workflows/{id}/run", access::bearer, manage, bind(s, run),
         "Run a manual workflow (body: the trigger payload)", "workflows", 202},
        route_doc("WorkflowRunPayload", "WorkflowRunQueued").with_optional_body());
  auto runs_query = schema::paging();
  runs_query.push_back(
      query("status", schema::one_of(domain::run_statuses), "only runs in this status"));
  r.add({verb::get, "/api/v1/workflows/{id}/runs", access::bearer, manage, bind(s, runs),
         "List a workflow's runs (page, per_page, status)", "workflows"},
        route_doc("", "WorkflowRunPage").with_query(std::move(runs_query)));
  r.add({verb::get, "/api/v1/workflow-runs/{run_id}", access::bearer, manage, bind(s, get_run),
         "Get a workflow run with its steps", "workflows"},
        {"", "WorkflowRun"});
  r.add({verb::get, "/api/v1/webhooks/info/{workflow_id}", access::bearer, manage, bind(s, info),
         "Webhook info of a workflow", "webhooks"},
        {"", "WorkflowWebhookInfo"});
  // 409: not a webhook workflow, inactive, or a webhook-id still being processed. A
  // Standard Webhooks message id seen before answers the run it started (202 again).
  r.add(
      {verb::post,
       "/api/v1/webhooks/{workflow_id}",
       access::open,
       {},
       bind(s, inbound),
       "Trigger a webhook workflow (X-Webhook-Secret or X-Webhook-Signature)",
       "webhooks",
       202},
      route_doc("WorkflowRunPayload", "WorkflowRunQueued")
          .with_secret_headers({"X-Webhook-Secret", "X-Webhook-Signature", "webhook-signature"})
          .with_headers(
              {schema::query("webhook-id", schema::text({.min = 1}),
                             "Standard Webhooks: the message id (a replay answers its first run)"),
               schema::query("webhook-timestamp", schema::text_matching("^[0-9]+$"),
                             "Standard Webhooks: seconds since the epoch, signed with the body"),
               schema::query("carecrm-chain-depth", schema::text_matching("^[0-9]+$"),
                             "set by carecrm on its own calls, to stop workflow loops")})
          .with_optional_body()
          .fails_with({409}));
}

} // namespace crm::http
