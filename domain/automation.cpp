// Names and response shapes of the automation records.
#include "domain/automation.hpp"

#include "domain/clock.hpp"
#include "domain/workflow.hpp"

namespace json = boost::json;

namespace crm::domain {
namespace {

json::value time_or_null(std::int64_t micros) {
  if (!micros) return nullptr;
  return json::value(format_rfc3339(micros));
}

json::value text_or_null(const std::optional<std::string>& s) {
  if (!s) return nullptr;
  return json::value(*s);
}

} // namespace

static_assert(run_statuses.size() == static_cast<std::size_t>(run_status::failed) + 1);

std::string_view to_string(run_status s) {
  auto i = static_cast<std::size_t>(s);
  return i < run_statuses.size() ? run_statuses[i] : "failed";
}

std::optional<run_status> parse_run_status(std::string_view s) {
  for (std::size_t i = 0; i < run_statuses.size(); ++i)
    if (run_statuses[i] == s) return static_cast<run_status>(i);
  return std::nullopt;
}

std::optional<std::string> ensure_webhook_secret(workflow& w) {
  if (w.trigger != trigger_type::webhook || (w.webhook_secret && !w.webhook_secret->empty()))
    return std::nullopt;
  w.webhook_secret = generate_webhook_secret();
  return w.webhook_secret;
}

json::object workflow_to_json(const workflow& w, std::string_view public_url) {
  json::object o;
  o["id"] = w.id;
  o["name"] = w.name;
  o["description"] = text_or_null(w.description);
  o["trigger_type"] = to_string(w.trigger);
  o["trigger_config"] = w.trigger_config;
  o["conditions"] = conditions_to_json(w.conditions);
  auto actions = actions_to_json(w.actions);
  redact_headers(actions);
  o["actions"] = std::move(actions);
  o["is_active"] = w.is_active;
  o["has_secret"] = w.webhook_secret.has_value();
  o["is_webhook_trigger"] = w.trigger == trigger_type::webhook;
  if (w.trigger == trigger_type::webhook)
    o["webhook_url"] = std::string(public_url) + "/api/v1/webhooks/" + std::to_string(w.id);
  else
    o["webhook_url"] = nullptr;
  o["next_run_at"] = w.trigger == trigger_type::schedule && w.is_active
                         ? time_or_null(w.next_run_at)
                         : json::value(nullptr);
  o["created_at"] = format_rfc3339(w.created_at);
  o["updated_at"] = format_rfc3339(w.updated_at);
  return o;
}

json::object run_to_json(const workflow_run& r) {
  json::object o;
  o["id"] = r.id;
  o["workflow_id"] = r.workflow_id;
  o["status"] = to_string(r.status);
  o["trigger_type"] = r.trigger;
  o["trigger_payload"] = r.payload;
  o["depth"] = r.depth;
  o["conditions_met"] = r.conditions_met;
  o["steps"] = r.steps;
  o["error"] = text_or_null(r.error);
  o["resume_at"] = r.status == run_status::waiting ? time_or_null(r.resume_at) : nullptr;
  o["created_at"] = format_rfc3339(r.created_at);
  o["started_at"] = time_or_null(r.started_at);
  o["finished_at"] = time_or_null(r.finished_at);
  o["updated_at"] = format_rfc3339(r.updated_at);
  return o;
}

json::object subscription_to_json(const webhook_subscription& s) {
  json::object o;
  o["id"] = s.id;
  o["url"] = s.url;
  json::array events;
  for (auto& e : s.events) events.emplace_back(e);
  o["events"] = std::move(events);
  o["description"] = text_or_null(s.description);
  o["is_active"] = s.is_active;
  o["has_secret"] = !s.secret.empty();
  o["disabled_reason"] = text_or_null(s.disabled_reason);
  o["created_at"] = format_rfc3339(s.created_at);
  o["updated_at"] = format_rfc3339(s.updated_at);
  return o;
}

} // namespace crm::domain
