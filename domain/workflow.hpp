// Workflow definitions and the pure rules of automation (docs/automation.md): trigger types
// and their configuration, conditions, actions and their parameters, templates, cron
// schedules, retry backoff and Standard Webhooks signatures. No I/O: the workflow actor and
// the HTTP layer call these.
#pragma once
#include "domain/failure.hpp"
#include "domain/task.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <array>
#include <bitset>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crm::domain {

enum class trigger_type : std::uint8_t {
  contact_created,
  contact_updated,
  contact_deleted,
  contact_status_changed,
  contact_tag_added,
  deal_created,
  deal_updated,
  deal_stage_changed,
  deal_won,
  deal_lost,
  deal_deleted,
  message_received,
  appointment_booked,
  appointment_rescheduled,
  appointment_cancelled,
  appointment_confirmed,
  appointment_no_show,
  appointment_completed,
  task_overdue,
  contact_merged,
  webhook,
  schedule,
  manual,
};

std::optional<trigger_type> parse_trigger_type(std::string_view s); // "contact.created", ...
std::string_view to_string(trigger_type t);
// Triggers fed by record events from the outbox (contact.*, deal.*, message.received,
// appointment.*).
bool is_record_event(trigger_type t);
// The record event names, in enum order: what subscriptions may name (besides "*").
const std::vector<std::string_view>& record_event_names();

enum class condition_op : std::uint8_t { eq, neq, contains, in, gt, lt, exists, changed_to };
std::optional<condition_op> parse_condition_op(std::string_view s);
std::string_view to_string(condition_op op);

struct condition {
  std::string field;
  condition_op op = condition_op::eq;
  boost::json::value value; // null for exists without a value (means true)
};

enum class action_type : std::uint8_t {
  update_contact,
  set_status,
  add_tag,
  remove_tag,
  create_deal,
  move_deal,
  send_message,
  http_request,
  ai_reply,
  delay,
  create_task,
};
std::optional<action_type> parse_action_type(std::string_view s);
std::string_view to_string(action_type t);
// False for the actions of areas that do not exist yet (create_deal, move_deal, send_message,
// ai_reply): they are rejected at definition time with a clear message.
bool action_available(action_type t);

struct action {
  action_type type = action_type::add_tag;
  boost::json::object params;
};

// ---- The rules of a definition -----------------------------------------------------------
// Named once, used by the parsers below and by the OpenAPI schemas of the workflow routes
// (http/handlers/workflows.cpp).
namespace workflow_rules {
// The names of trigger_type, condition_op and action_type, in the order of the enums.
inline constexpr std::array<std::string_view, 23> trigger_types{"contact.created",
                                                                "contact.updated",
                                                                "contact.deleted",
                                                                "contact.status_changed",
                                                                "contact.tag_added",
                                                                "deal.created",
                                                                "deal.updated",
                                                                "deal.stage_changed",
                                                                "deal.won",
                                                                "deal.lost",
                                                                "deal.deleted",
                                                                "message.received",
                                                                "appointment.booked",
                                                                "appointment.rescheduled",
                                                                "appointment.cancelled",
                                                                "appointment.confirmed",
                                                                "appointment.no_show",
                                                                "appointment.completed",
                                                                "task.overdue",
                                                                "contact.merged",
                                                                "webhook",
                                                                "schedule",
                                                                "manual"};
inline constexpr std::array<std::string_view, 8> condition_ops{
    "eq", "neq", "contains", "in", "gt", "lt", "exists", "changed_to"};
inline constexpr std::array<std::string_view, 11> action_types{
    "update_contact", "set_status",   "add_tag",  "remove_tag", "create_deal", "move_deal",
    "send_message",   "http_request", "ai_reply", "delay",      "create_task"};

inline constexpr std::size_t items_max = 50;  // conditions, and actions, of a workflow
inline constexpr std::size_t field_max = 200; // characters of a condition's field path
// A tag of a tag action written as a template ("{{trigger.tag}}"); a literal tag, and the tag a
// contact.tag_added trigger waits for, are contact tags (contact_tag_max).
inline constexpr std::size_t tag_template_max = 100;
// A string holding a template ("{{contact.id}}") stands for a value of another type (ids,
// statuses, a URL, a method) and is checked when the step runs.
inline constexpr std::string_view template_open = "{{";

// schedule trigger_config: exactly one of interval_seconds and cron.
inline constexpr std::int64_t interval_min = 5;
inline constexpr std::int64_t interval_max = 31'536'000; // a year
inline constexpr std::size_t cron_max = 200;

// update_contact: the contact fields `params.fields` may set (their values are read as
// PATCH /contacts/{id} reads them, when the step runs).
inline constexpr std::array<std::string_view, 10> update_contact_fields{
    "first_name", "last_name", "email",  "phone", "company_id",
    "owner_id",   "status",    "source", "tags",  "custom_fields"};
// http_request
inline constexpr std::size_t url_max = 2048; // also the longest URL parse_url accepts
inline constexpr std::array<std::string_view, 5> http_methods{"GET", "POST", "PUT", "PATCH",
                                                              "DELETE"};
inline constexpr std::size_t headers_max = 20;
// A header name is an HTTP token: letters, digits and these.
inline constexpr std::string_view token_symbols = "!#$%&'*+-.^_`|~";
// Headers the HTTP client sets itself (compared without case).
inline constexpr std::array<std::string_view, 4> client_headers{"host", "content-length",
                                                                "transfer-encoding", "connection"};
inline constexpr std::int64_t timeout_min = 1; // timeout_seconds
inline constexpr std::int64_t timeout_max = 30;
// send_message and create_deal
inline constexpr std::size_t message_text_max = 4096;
inline constexpr std::size_t purpose_max = 64;
inline constexpr std::size_t deal_title_max = 200;
// create_task: due at most one of these from the step's run (none: no due time).
inline constexpr std::int64_t task_due_max_seconds = 366LL * 24 * 3600;
inline constexpr std::array<std::pair<std::string_view, std::int64_t>, 3> task_due_units{
    {{"due_in_minutes", 60}, {"due_in_hours", 3600}, {"due_in_days", 86400}}};
// delay: exactly one of the units, at most delay_max_seconds in all.
inline constexpr std::int64_t delay_max_seconds = 30LL * 24 * 3600;
inline constexpr std::array<std::pair<std::string_view, std::int64_t>, 3> delay_units{
    {{"seconds", 1}, {"minutes", 60}, {"hours", 3600}}};
} // namespace workflow_rules

// ---- Validation of a definition (422 issues, loc starting with "body") ------------------
// Each parser appends every problem it finds to `issues` (loc e.g. ["body", "conditions", 0,
// "op"]) and returns nothing when there was at least one.
std::optional<boost::json::object> parse_trigger_config(trigger_type t, const boost::json::value& v,
                                                        std::vector<issue>& issues);
std::optional<std::vector<condition>> parse_conditions(const boost::json::value& v,
                                                       std::vector<issue>& issues);
std::optional<std::vector<action>> parse_actions(const boost::json::value& v,
                                                 std::vector<issue>& issues);

boost::json::array conditions_to_json(const std::vector<condition>& cs);
boost::json::array actions_to_json(const std::vector<action>& as);
// The inverse of *_to_json for stored definitions (already valid): never fails on them.
std::vector<condition> conditions_from_json(const boost::json::value& v);
std::vector<action> actions_from_json(const boost::json::value& v);

// The header values of http_request actions are write-only (docs/automation.md): the API shows
// them as null and they are sealed at rest. `actions` is the JSON form, [{"type", "params"}];
// `params` one action's.
void redact_headers(boost::json::array& actions);
void redact_header_values(boost::json::object& params);
// Replaces every header value of every http_request action with what `f` makes of it.
void map_header_values(boost::json::array& actions,
                       const std::function<std::string(std::string_view)>& f);

// ---- Evaluation -------------------------------------------------------------------------
// The value at a dotted path of the payload, with the contact fallback and the `cf.` alias of
// docs/automation.md; nullptr when missing.
const boost::json::value* resolve_path(const boost::json::value& payload, std::string_view path);
bool condition_holds(const condition& c, const boost::json::value& payload);
bool conditions_hold(const std::vector<condition>& cs, const boost::json::value& payload);
// The trigger_config filters of contact.status_changed (from/to) and contact.tag_added (tag).
bool trigger_config_matches(trigger_type t, const boost::json::object& config,
                            const boost::json::value& payload);

struct template_context {
  const boost::json::value* trigger = nullptr; // the trigger payload
  std::int64_t run_id = 0;
  std::int64_t workflow_id = 0;
  std::string workflow_name;
};
// Replaces the templates in every string of `params` (deeply).
boost::json::value render_templates(const boost::json::value& params, const template_context& ctx);

// The contact a contact action works on: params.contact_id (an integer, or a string of
// digits after rendering), else payload.contact_id, else payload.contact.id.
std::optional<std::int64_t> action_contact_id(const boost::json::object& rendered_params,
                                              const boost::json::value& payload);
// A run's trigger payload once its contact was merged into another (POST
// /contacts/{id}/merge): the contact its actions fall back to (payload.contact_id,
// payload.contact.id) is the survivor from then on. False when the payload names no `from`.
bool move_payload_contact(boost::json::value& payload, std::int64_t from, std::int64_t into);
// Seconds of a delay action's params (already validated).
std::int64_t delay_seconds(const boost::json::object& params);
// The task a create_task step makes (docs/tasks.md "From a workflow"): its params after
// templates, linked to the trigger's contact, deal and appointment unless they name others,
// assigned to the trigger's contact's owner unless they name someone, due `due_in_*` after `now`; a
// rendered value that breaks a rule fails the step (the failure's text says which). The run and
// step are the caller's to set.
outcome<task> task_from_action(const boost::json::object& rendered_params,
                               const boost::json::value& payload, std::int64_t now);

// ---- Schedules --------------------------------------------------------------------------
struct cron_expr {
  std::bitset<60> minute;
  std::bitset<24> hour;
  std::bitset<32> day_of_month; // 1..31
  std::bitset<13> month;        // 1..12
  std::bitset<7> day_of_week;   // 0..6, Sunday 0 (7 is folded into 0)
  bool day_of_month_any = true; // the field was "*"
  bool day_of_week_any = true;
};
// Five fields; on failure returns nothing and sets `error` to a human message.
std::optional<cron_expr> parse_cron(std::string_view text, std::string& error);
// The first whole minute strictly after `after_micros` (UTC, microseconds since the epoch)
// that matches. Searches at most ~5 years ahead; returns 0 if nothing matches (Feb 30).
std::int64_t next_cron_time(const cron_expr& c, std::int64_t after_micros);
// The next fire time of a validated schedule trigger_config after `after_micros`.
std::int64_t next_schedule_time(const boost::json::object& config, std::int64_t after_micros);

// ---- Deliveries -------------------------------------------------------------------------
// Seconds before retry number `failed_attempts` (1 after the first failure):
// min(base * 2^(n-1), max) * (0.8 + 0.4 * jitter01), jitter01 in [0, 1).
double retry_delay_seconds(int failed_attempts, double base, double max, double jitter01);

// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>", the key being the base64-decoded part
// after "whsec_" for such a secret, else the secret's bytes (docs/automation.md).
std::string webhook_signature(std::string_view secret, std::string_view msg_id,
                              std::int64_t timestamp, std::string_view body);
// "whsec_" + base64 of 24 random bytes.
std::string generate_webhook_secret();

// An inbound request signed the Standard Webhooks way (webhook-id, webhook-timestamp,
// webhook-signature: one or more space-separated "v1,<base64>"), checked against `secret`:
// the timestamp must be within `tolerance` seconds of `now` (so a captured request goes stale)
// and one signature must match, compared in constant time.
enum class signed_request { valid, stale, invalid };
signed_request verify_standard_webhook(std::string_view secret, std::string_view msg_id,
                                       std::string_view timestamp, std::string_view signatures,
                                       std::string_view body, std::int64_t now,
                                       std::int64_t tolerance = 300);

// What an inbound workflow webhook call carries to prove itself (contract section 7).
struct webhook_credentials {
  std::optional<std::string> secret;    // X-Webhook-Secret
  std::optional<std::string> signature; // X-Webhook-Signature: sha256=<hex HMAC of the body>
  // Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature.
  std::optional<std::string> std_id, std_timestamp, std_signature;
};
// Why a call with `c` and `body` may not trigger a workflow whose secret is `secret`, or
// nothing when it may: X-Webhook-Secret, X-Webhook-Signature, or a Standard Webhooks signature
// (which, when sent, is the only one checked: its timestamp must be fresh). A workflow without
// a secret admits nobody: a webhook workflow always has one (ensure_webhook_secret).
std::optional<std::string_view> webhook_refusal(const std::optional<std::string>& secret,
                                                const webhook_credentials& c, std::string_view body,
                                                std::int64_t now);
// The refusal an unauthenticated caller gets for a wrong secret and for a workflow that does not
// exist alike (ids are sequential: the answer must not tell which exist).
inline constexpr std::string_view webhook_refused = "missing or wrong webhook secret or signature";

// A URL of the form http(s)://host[:port][/path][?query]; nothing else (no user info, no
// fragment). Used for validation and by the HTTP client.
struct url_parts {
  bool https = false;
  std::string host; // without brackets for IPv6 literals
  std::uint16_t port = 0;
  std::string target; // path and query, at least "/"
};
std::optional<url_parts> parse_url(std::string_view url);

} // namespace crm::domain
