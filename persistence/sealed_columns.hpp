// Which stored values are secrets at rest (domain/secret_keys.hpp) and what each is bound to:
// one list, read by the repositories that write them and by `carecrm secrets` that counts and
// moves them to a new key (persistence/secrets_repo.hpp).
#pragma once
#include "domain/channel.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace crm::persistence::sealed {

// channels.webhook_secret: a keyed hash (only ever compared).
inline constexpr std::string_view channel_webhook_secret = "channel.webhook_secret";
// channels.config: the provider secrets in it (domain::is_secret_config_key), each bound to its
// key's name.
inline std::string channel_config(std::string_view key) {
  return "channel.config." + std::string(key);
}
// workflows.webhook_secret.
inline constexpr std::string_view workflow_webhook_secret = "workflow.webhook_secret";
// The header values of http_request actions, in workflows.actions and workflow_runs.actions.
inline constexpr std::string_view http_header = "workflow.http_header";
// webhook_subscriptions.secret.
inline constexpr std::string_view subscription_secret = "webhook_subscription.secret";
// calendars.feed_token_hash: a keyed hash of a calendar feed's token (only ever compared).
inline constexpr std::string_view calendar_feed_token = "calendar.feed_token";
// api_keys.secret_hash: a keyed hash of an integrator's API key (only ever compared).
inline constexpr std::string_view api_key_secret = "api_key.secret";
// user_totp.secret and user_totp.pending_secret: a user's TOTP secret (raw bytes).
inline constexpr std::string_view user_totp_secret = "user.totp_secret";
// user_totp.recovery_codes: keyed hashes of the recovery codes (only ever compared).
inline constexpr std::string_view user_recovery_code = "user.recovery_code";
// ai_agents.api_key.
inline constexpr std::string_view agent_api_key = "ai_agent.api_key";
// contacts.custom_fields: the values of sensitive fields, sealed with the tenant's data key and
// bound to their contact and field (a value copied to another record or field does not open).
inline std::string contact_field(std::int64_t contact_id, std::string_view field) {
  std::string out = "contact.custom_field.";
  out += std::to_string(contact_id);
  out += '.';
  out += field;
  return out;
}
// What they were bound to before migration 017 (the tenant's data key only): read by that
// migration, which seals them again bound.
inline constexpr std::string_view legacy_contact_field = "contact.custom_field";
// tenant_data_keys.data_key: the key sealing the tenant's sensitive values (domain::data_key).
inline constexpr std::string_view tenant_data_key = "tenant.data_key";

// Replaces each secret string of a channel's config with `each(key, value)`.
template <class Each>
void map_config_secrets(domain::channel_type type, boost::json::object& config, Each each) {
  for (auto& kv : config)
    if (domain::is_secret_config_key(type, kv.key()) && kv.value().is_string()) {
      auto& s = kv.value().get_string();
      s = each(kv.key(), std::string_view(s.data(), s.size()));
    }
}

} // namespace crm::persistence::sealed
