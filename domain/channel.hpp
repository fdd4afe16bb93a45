// Channels and messages as plain values, and the pure rules of the messaging area
// (docs/channels.md): channel config per type, the inbound payloads (generic api body and
// Telegram Update), and the provider adapters' outbound requests and their responses. No I/O.
#pragma once
#include "domain/failure.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crm::domain {

enum class channel_type : std::uint8_t { api, telegram, whatsapp, sms, email };
std::optional<channel_type> parse_channel_type(std::string_view s);
std::string_view to_string(channel_type t);

struct channel {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  channel_type type = channel_type::api;
  boost::json::object config; // secrets included: never rendered as they are
  std::optional<std::string> webhook_secret;
  bool is_active = true;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

enum class conversation_status : std::uint8_t { open, pending, closed };
std::optional<conversation_status> parse_conversation_status(std::string_view s);
std::string_view to_string(conversation_status s);

struct conversation {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::int64_t channel_id = 0;
  std::int64_t contact_id = 0;
  conversation_status status = conversation_status::open;
  std::optional<std::int64_t> assignee_id;
  std::int64_t unread_count = 0;
  std::int64_t last_message_at = 0;
  // Handed to a person by an AI agent (docs/ai.md): no agent answers until a person does.
  bool ai_paused = false;
  std::optional<std::string> handoff_reason;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

// ---- Channel config ---------------------------------------------------------------------
// Validates `config` for `type` (issues at ["body","config",key...]). `creating`: required keys
// must be present. On update, `previous` is the stored config: secret keys not sent are kept
// (write-only values are never sent back, so a client cannot resend them). Returns the config
// to store, or nothing when there was an issue.
std::optional<boost::json::object> parse_channel_config(channel_type type,
                                                        const boost::json::value& config,
                                                        const boost::json::object* previous,
                                                        std::vector<issue>& issues);
// True for the keys of `type`'s config that are secret (write-only).
bool is_secret_config_key(channel_type type, std::string_view key);
// The config as responses show it: secret keys removed, "has_<key>" added for each secret key
// the type knows (and for each secret key present, for the free-form types).
boost::json::object public_config(channel_type type, const boost::json::object& config);

// ---- Inbound ----------------------------------------------------------------------------
struct inbound_contact {
  std::optional<std::string> phone; // E.164
  std::optional<std::string> email; // as sent (matching is case-insensitive)
  std::optional<std::string> name;
  std::optional<std::string> external_id;
};

struct inbound_message {
  inbound_contact contact;
  std::string text;
  std::string external_message_id;
  std::int64_t timestamp = 0; // 0: not sent
};

// The generic channel webhook body (docs/channels.md, step 5): nothing and `issues` (loc
// starting with "body") when invalid, including json_invalid for text that is not a JSON
// object.
std::optional<inbound_message> parse_api_inbound(std::string_view body, std::vector<issue>& issues);

// A Telegram Update: a text message, or nothing with `ignored` true for other updates (edits,
// stickers, callbacks...). Invalid JSON → issues (json_invalid).
std::optional<inbound_message> parse_telegram_update(std::string_view body, bool& ignored,
                                                     std::vector<issue>& issues);

// "Ada Lovelace King" → {"Ada", "Lovelace King"}; a name of one word has no last name.
std::pair<std::string, std::optional<std::string>> split_name(std::string_view name);

// ---- Outbound (adapters) ----------------------------------------------------------------
struct outbound_message {
  std::int64_t message_id = 0;
  std::int64_t conversation_id = 0;
  std::int64_t contact_id = 0;
  std::int64_t channel_id = 0;
  std::string text;
  std::int64_t created_at = 0;
  // The contact as the channel knows it.
  std::optional<std::string> phone;
  std::optional<std::string> email;
  std::optional<std::string> external_id; // Telegram: the chat id
};

struct adapter_request {
  std::string method = "POST";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// The request that sends `m` through channel `c`, or an error message when it cannot be sent
// ("no adapter for whatsapp channels yet (not configured)", "not configured: the channel has
// no outbound_url", "the contact has no chat on this channel"). `now_seconds` is the signing
// timestamp for api channels with a signing_secret.
struct adapter_plan {
  std::optional<adapter_request> request;
  std::string error;
};
adapter_plan plan_outbound(const channel& c, const outbound_message& m, std::int64_t now_seconds);

// Reads the provider's answer: sent (with the provider's message id when it gives one) or the
// reason it failed.
struct adapter_result {
  bool sent = false;
  std::optional<std::string> provider_message_id;
  std::string error;
};
adapter_result read_outbound_response(channel_type type, int status, std::string_view body);

} // namespace crm::domain
