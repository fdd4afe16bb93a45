// Channels and messages as plain values, and the pure rules of the messaging area
// (docs/channels.md): channel config per type, the inbound payloads (generic api body and
// Telegram Update), and the provider adapters' outbound requests and their responses. No I/O.
#pragma once
#include "domain/failure.hpp"
#include "domain/week.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <array>
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
// "Input should be 'api', 'telegram', 'whatsapp', 'sms' or 'email'".
std::string channel_type_choices();

// The rules of the messaging area's fields, named once for the readers (here and in
// http/handlers/channels.cpp, conversations.cpp) and the OpenAPI schemas made from them.
namespace channel_rules {
// The names of channel_type and conversation_status, in the order of their enumerators.
inline constexpr std::array<std::string_view, 5> types{"api", "telegram", "whatsapp", "sms",
                                                       "email"};
inline constexpr std::array<std::string_view, 3> conversation_statuses{"open", "pending", "closed"};
inline constexpr std::array<std::string_view, 4> conversation_priorities{"low", "medium", "high",
                                                                         "urgent"};
// A conversation's labels (docs/channels.md "Labels and priority"): each trimmed, 1 to
// label_max characters; at most labels_max, kept sorted without repeats.
inline constexpr std::size_t label_max = 50;
inline constexpr std::size_t labels_max = 20;
// A channel's after-hours reply, in characters.
inline constexpr std::size_t after_hours_reply_max = 1000;
// A shared secret in characters: an api channel's signing_secret, a channel's webhook_secret.
inline constexpr std::size_t secret_min = 16;
inline constexpr std::size_t secret_max = 256;
// A provider's token or secret in a channel's config, in characters.
inline constexpr std::size_t config_value_max = 1000;
inline constexpr std::size_t url_max = 2048; // outbound_url, api_base_url
// A WhatsApp phone number id or business account id: digits.
inline constexpr std::size_t whatsapp_id_max = 32;
// A Telegram bot token: digits, ':', then at least this many of A-Z, a-z, 0-9, _ and -.
inline constexpr std::size_t bot_token_secret_min = 20;
// The generic inbound body (parse_api_inbound): its event, the contact's name (trimmed), the
// ids of the contact and the message, and the text of a message either way.
inline constexpr std::string_view inbound_event = "message.received";
inline constexpr std::size_t contact_name_max = 200;
inline constexpr std::size_t external_id_max = 200;
inline constexpr std::size_t text_max = 4096;
} // namespace channel_rules

struct channel {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  channel_type type = channel_type::api;
  boost::json::object config; // secrets included: never rendered as they are
  std::optional<std::string> webhook_secret;
  bool is_active = true;
  // The shared inbox (docs/channels.md "Business hours"): when the channel is staffed, in
  // `time_zone` (none: always), and what a patient who writes outside those hours is told once
  // per conversation per closed period (none: nothing).
  std::optional<working_week> business_hours;
  std::string time_zone = "UTC";
  std::optional<std::string> after_hours_reply;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

enum class conversation_status : std::uint8_t { open, pending, closed };
std::optional<conversation_status> parse_conversation_status(std::string_view s);
std::string_view to_string(conversation_status s);
// "Input should be 'open', 'pending' or 'closed'".
std::string conversation_status_choices();

enum class conversation_priority : std::uint8_t { low, medium, high, urgent };
std::optional<conversation_priority> parse_conversation_priority(std::string_view s);
std::string_view to_string(conversation_priority p);
std::string conversation_priority_choices();

struct conversation {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::int64_t channel_id = 0;
  std::int64_t contact_id = 0;
  conversation_status status = conversation_status::open;
  std::optional<std::int64_t> assignee_id;
  std::optional<std::int64_t> team_id; // the team its channel routed it to (docs/channels.md)
  std::int64_t unread_count = 0;
  std::int64_t last_message_at = 0;
  // When the contact last wrote (0: never): WhatsApp's 24-hour window for free text opens then.
  std::int64_t last_inbound_at = 0;
  // The shared inbox's figures (docs/channels.md "Response times"): a person's first reply to
  // the contact, and when the conversation was closed (0: not yet / open again).
  std::int64_t first_response_at = 0;
  std::int64_t resolved_at = 0;
  // Handed to a person by an AI agent (docs/ai.md): no agent answers until a person does.
  bool ai_paused = false;
  std::optional<std::string> handoff_reason;
  // Staff's sorting of the conversation (docs/channels.md "Labels and priority").
  std::vector<std::string> labels; // sorted, without repeats
  std::optional<conversation_priority> priority;
  // The closed period of its channel (that period's start, µs) the after-hours reply was last
  // sent for (docs/channels.md "Business hours"): one reply per closed period.
  std::optional<std::int64_t> after_hours_for;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

// Which conversations a list shows: each filter given must hold.
struct conversation_query {
  std::optional<conversation_status> status;
  std::optional<std::int64_t> channel_id;
  std::optional<std::int64_t> contact_id;
  std::optional<std::int64_t> assignee_id;
  std::optional<std::int64_t> team_id;
  std::optional<std::string> label;
  std::optional<conversation_priority> priority;
  bool matches(const conversation& c) const;
};

// Labels as a conversation keeps them: sorted, without repeats.
std::vector<std::string> label_set(std::vector<std::string> labels);

// The after-hours reply an inbound message at `now` on channel `ch` gets in conversation `c`:
// the closed period it answers (its start, µs), when the channel has business hours and a reply,
// is closed at `now`, and has not answered `c` in this closed period yet.
std::optional<std::int64_t> after_hours_period(const channel& ch, const conversation& c,
                                               std::int64_t now);

// The conversation's status becomes `next` at `now`: closing it resolves it, opening it again
// (a reply, a reopen) clears that.
void set_status(conversation& c, conversation_status next, std::int64_t now);
// A person (not an AI agent, not an automation) answers at `now`: the first such answer after
// the contact wrote is the conversation's first response.
void person_replied(conversation& c, std::int64_t now);

// ---- Channel config ---------------------------------------------------------------------
// Validates `config` for `type` (issues at ["body","config",key...]). `creating`: required keys
// must be present. On update, `previous` is the stored config: secret keys not sent are kept
// (write-only values are never sent back, so a client cannot resend them). Returns the config
// to store, or nothing when there was an issue.
std::optional<boost::json::object> parse_channel_config(channel_type type,
                                                        const boost::json::value& config,
                                                        const boost::json::object* previous,
                                                        std::vector<issue>& issues);
// A config's string at `key`, when it is one and not empty (the adapters read their settings
// with it).
std::optional<std::string> config_string(const boost::json::object& config, std::string_view key);
// True for the keys of `type`'s config that are secret (write-only).
bool is_secret_config_key(channel_type type, std::string_view key);
// The config as responses show it: secret keys removed, "has_<key>" added for each secret key
// the type knows.
boost::json::object public_config(channel_type type, const boost::json::object& config);

// ---- Inbound ----------------------------------------------------------------------------
struct inbound_contact {
  std::optional<std::string> phone; // E.164
  std::optional<std::string> email; // as sent (matching is case-insensitive)
  std::optional<std::string> name;
  std::optional<std::string> external_id;
};

// A file that came with a message (docs/channels.md "Media"): the provider's reference to fetch
// it by (a WhatsApp media id, a Twilio media URL), or the file itself (an e-mail's attachment).
struct media_ref {
  std::string source;
  std::string content_type; // as the provider named it
  std::string filename;
  std::optional<std::string> data;
};
inline constexpr std::size_t media_per_message_max = 10;

struct inbound_message {
  inbound_contact contact;
  std::vector<media_ref> media;
  std::string text;
  std::string external_message_id;
  std::int64_t timestamp = 0; // 0: not sent
  std::string subject;        // e-mail: the Subject
  // E-mail: the carecrm conversation the message answers (In-Reply-To, References); it joins
  // it when it is the contact's on the channel.
  std::optional<std::int64_t> conversation_hint;
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
  std::optional<std::string> external_id; // Telegram: the chat id; WhatsApp: the wa_id
  // WhatsApp: an approved template to send instead of the text (whatsapp::template_to_json).
  std::string template_json;
  // SMS: where the provider reports the message's delivery (the channel's webhook URL).
  std::string callback_url;
  // Its files (docs/channels.md "Media"): where the provider fetches each (a capability URL of
  // carecrm's), or, for e-mail, the bytes themselves.
  struct file {
    std::string url;
    std::string content_type;
    std::string filename;
    std::string data;
  };
  std::vector<file> files;
};

struct adapter_request {
  std::string method = "POST";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// The request that sends `m` through channel `c`, or an error message when it cannot be sent
// ("not configured: the channel has no outbound_url", "the contact has no chat on this
// channel"). E-mail has no request: it leaves over SMTP (email::plan_send). `now_seconds` is the
// signing timestamp for api channels with a signing_secret.
struct adapter_plan {
  std::optional<adapter_request> request;
  std::string error;
};
adapter_plan plan_outbound(const channel& c, const outbound_message& m, std::int64_t now_seconds);

// Why carecrm cannot write first to a contact on channel `c` (nothing: it can), asked before a
// conversation is opened for an outbound message: the adapter's own reason ("the contact has
// no chat on this channel", "not configured: ..."). `chat`: the contact's
// id on the channel, when the channel knows one (a Telegram chat). An api channel reaches any
// contact through its outbound_url (the receiver gets the contact's phone, e-mail and id).
// `with_template`: the message is a WhatsApp template, which may open a conversation.
std::optional<std::string> cannot_write_first(const channel& c, std::optional<std::string> chat,
                                              bool with_template = false);

// Reads the provider's answer: sent (with the provider's message id when it gives one) or the
// reason it failed.
struct adapter_result {
  bool sent = false;
  bool retry = true; // not sent: whether another attempt may succeed
  std::optional<std::string> provider_message_id;
  std::string error;
};
adapter_result read_outbound_response(channel_type type, int status, std::string_view body);

// ---- A send whose outcome is unknown ------------------------------------------------------
// A message is marked before its provider is called and the mark is cleared with the attempt's
// outcome. A mark found at load means carecrm stopped (or lost the outcome) in between: the
// provider may have taken the message. Sending it again is safe only where a copy can be told
// apart; otherwise the provider's own report decides.
enum class unknown_send : std::uint8_t {
  send_again,   // api (webhook-id and the body's message id), e-mail (its Message-ID)
  await_report, // WhatsApp, SMS: their delivery reports carry carecrm's id; sent again only if
                // none came within the wait (the provider never took it)
  give_up,      // Telegram: neither; failed, "the outcome is unknown", never sent twice
};
unknown_send after_unknown_send(channel_type type);
// The text a provider's report carries back as carecrm's id of the message (what
// message_ref_of reads): the decimal id.
std::string message_ref(std::int64_t message_id);
// carecrm's id in a report's text, or nothing for anything else (another application's data).
std::optional<std::int64_t> message_ref_of(std::string_view text);

// ---- Delivery reports -------------------------------------------------------------------
// A message's delivery as a provider reports it after the send (WhatsApp's statuses, Twilio's
// status callbacks). Statuses only move forward: queued → sent → delivered → read; failed from
// any status before read.
enum class delivery : std::uint8_t { sent, delivered, read, failed };
std::optional<delivery> parse_delivery(std::string_view s);
std::string_view to_string(delivery d);
// The stored statuses (messages.status) a message may move to `d` from.
std::vector<std::string_view> delivery_predecessors(delivery d);

struct status_update {
  std::string provider_message_id; // the provider's id carecrm stored as external_message_id
  // carecrm's own id of the message, when the report carries it (WhatsApp's
  // biz_opaque_callback_data, the ?message= of Twilio's StatusCallback URL): it names the
  // message even when the provider's id was never stored (a send whose outcome is unknown).
  std::optional<std::int64_t> message_id;
  delivery status = delivery::sent;
  std::optional<std::string> error; // failed: the provider's code and reason
};

} // namespace crm::domain
