// Response shapes of channels and conversations.
#include "domain/messaging.hpp"

#include "domain/clock.hpp"

namespace json = boost::json;

namespace crm::domain {

json::object channel_to_json(const channel& c, std::string_view public_url) {
  json::object o;
  o["id"] = c.id;
  o["name"] = c.name;
  o["type"] = to_string(c.type);
  o["config"] = public_config(c.type, c.config);
  o["is_active"] = c.is_active;
  o["has_secret"] = c.webhook_secret.has_value();
  o["webhook_url"] = std::string(public_url) + "/api/v1/channels/" + std::to_string(c.id) +
                     (c.type == channel_type::telegram   ? "/telegram/webhook"
                      : c.type == channel_type::whatsapp ? "/whatsapp/webhook"
                      : c.type == channel_type::sms      ? "/sms/webhook"
                      : c.type == channel_type::email    ? "/email/webhook"
                                                         : "/api/webhook");
  o["business_hours"] =
      c.business_hours ? json::value(working_hours_to_json(*c.business_hours)) : json::value();
  o["time_zone"] = c.time_zone;
  o["after_hours_reply"] =
      c.after_hours_reply ? json::value(*c.after_hours_reply) : json::value(nullptr);
  o["created_at"] = format_rfc3339(c.created_at);
  o["updated_at"] = format_rfc3339(c.updated_at);
  return o;
}

void set_status(conversation& c, conversation_status next, std::int64_t now) {
  if (next == conversation_status::closed && c.status != conversation_status::closed)
    c.resolved_at = now;
  if (next != conversation_status::closed) c.resolved_at = 0;
  c.status = next;
}

void person_replied(conversation& c, std::int64_t now) {
  if (c.first_response_at == 0 && c.last_inbound_at != 0) c.first_response_at = now;
}

json::object conversation_to_json(const conversation& c) {
  json::object o;
  o["id"] = c.id;
  o["channel_id"] = c.channel_id;
  o["contact_id"] = c.contact_id;
  o["status"] = to_string(c.status);
  o["assignee_id"] = c.assignee_id ? json::value(*c.assignee_id) : json::value(nullptr);
  o["team_id"] = c.team_id ? json::value(*c.team_id) : json::value(nullptr);
  o["unread_count"] = c.unread_count;
  o["ai_paused"] = c.ai_paused;
  o["handoff_reason"] = c.handoff_reason ? json::value(*c.handoff_reason) : json::value(nullptr);
  o["last_message_at"] = format_rfc3339(c.last_message_at);
  auto when = [](std::int64_t t) {
    return t ? json::value(format_rfc3339(t)) : json::value(nullptr);
  };
  o["last_inbound_at"] = when(c.last_inbound_at);
  o["first_response_at"] = when(c.first_response_at);
  o["resolved_at"] = when(c.resolved_at);
  json::array labels;
  for (auto& l : c.labels) labels.emplace_back(l);
  o["labels"] = std::move(labels);
  o["priority"] = c.priority ? json::value(to_string(*c.priority)) : json::value(nullptr);
  o["created_at"] = format_rfc3339(c.created_at);
  o["updated_at"] = format_rfc3339(c.updated_at);
  return o;
}

} // namespace crm::domain
