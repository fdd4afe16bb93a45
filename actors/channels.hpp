// Channels, conversations and messages of a tenant (contract §8, docs/channels.md), owned by
// the tenant's channel actor: inbound messages are matched to a contact (through the contacts
// actor), stored with their event in one transaction and acknowledged after COMMIT; outbound
// messages are queued, then sent through the channel's adapter with retries.
#pragma once
#include "actors/callback.hpp"
#include "domain/channel.hpp"
#include "domain/consent.hpp"
#include "domain/email.hpp"
#include "domain/inbox.hpp"
#include "domain/schedule.hpp"

#include <boost/json/value.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace crm::actors {

class runtime;

struct channel_patch {
  std::optional<std::string> name;
  std::optional<domain::channel_type> type; // a change is refused (409)
  std::optional<boost::json::value> config; // validated by the actor against the stored one
  std::optional<std::optional<std::string>> webhook_secret;
  std::optional<bool> is_active;
  // docs/channels.md "Business hours": null clears the hours (always open) or the reply.
  std::optional<std::optional<domain::working_week>> business_hours;
  std::optional<std::string> time_zone;
  std::optional<std::optional<std::string>> after_hours_reply;
};

struct channel_filter {
  std::optional<domain::channel_type> type;
  std::optional<bool> is_active;
  int page = 1;
  int per_page = 20;
};

void list_channels(runtime& rt, std::int64_t tenant, channel_filter f, callback<std::string> reply);
void get_channel(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void create_channel(runtime& rt, std::int64_t tenant, domain::channel c,
                    callback<std::string> reply);
void update_channel(runtime& rt, std::int64_t tenant, std::int64_t id, channel_patch p,
                    callback<std::string> reply);
void delete_channel(runtime& rt, std::int64_t tenant, std::int64_t id,
                    callback<domain::done> reply);

// The inbound channel webhook (the tenant is the channel's, looked up by the caller).
enum class inbound_kind : std::uint8_t { api, telegram, whatsapp, sms, email };
struct inbound_call {
  inbound_kind kind = inbound_kind::api;
  // whatsapp: the X-Hub-Signature-256 header (the body's HMAC); sms: X-Twilio-Signature.
  std::string secret;
  std::string body;
  int depth = 0; // carecrm-chain-depth: the workflow chain this call comes from
  // sms, email: the posted form's fields; sms: the URL Twilio called (its signature covers
  // both); email: the files of a multipart form (described, not kept).
  std::vector<std::pair<std::string, std::string>> form;
  std::string url;
  std::vector<domain::email::attachment_info> files;
};
void receive_inbound(runtime& rt, std::int64_t tenant, std::int64_t channel_id, inbound_call call,
                     callback<std::string> reply);
// The address providers call carecrm at (--public-url, else the listening address): the URL a
// Twilio signature covers is this followed by the request's target.
std::string public_base_url(runtime& rt);

// A WhatsApp channel's subscription handshake (Meta's GET with hub.mode, hub.verify_token,
// hub.challenge): the challenge when the token is the channel's verify_token, else 403.
struct hub_verification {
  std::string mode, token, challenge;
};
void verify_hub(runtime& rt, std::int64_t tenant, std::int64_t channel_id, hub_verification v,
                callback<std::string> reply);
// A WhatsApp channel's message templates, as its business account lists them at the provider
// ({"items": [...]}, domain::whatsapp::read_templates).
void list_templates(runtime& rt, std::int64_t tenant, std::int64_t channel_id,
                    callback<std::string> reply);

struct conversation_filter : domain::conversation_query {
  int page = 1;
  int per_page = 20;
};
struct conversation_patch {
  std::optional<domain::conversation_status> status;
  std::optional<std::optional<std::int64_t>> assignee_id;
  std::optional<bool> ai_paused;                  // false: agents may answer again after a hand-off
  std::optional<std::vector<std::string>> labels; // the whole set
  std::optional<std::optional<domain::conversation_priority>> priority; // null clears it
};
void list_conversations(runtime& rt, std::int64_t tenant, conversation_filter f,
                        callback<std::string> reply);
void get_conversation(runtime& rt, std::int64_t tenant, std::int64_t id,
                      callback<std::string> reply);
void update_conversation(runtime& rt, std::int64_t tenant, std::int64_t id, conversation_patch p,
                         callback<std::string> reply);
void mark_read(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void list_messages(runtime& rt, std::int64_t tenant, std::int64_t conversation_id, int page,
                   int per_page, callback<std::string> reply);
// A file of a message (docs/channels.md "Media"), as stored: 404 when the tenant's message has no
// such file, 403 for another tenant's message, 409 while it is being fetched or when it was not
// kept (with why).
struct attachment {
  std::string content_type;
  std::string filename;
  std::string data;
};
void read_attachment(runtime& rt, std::int64_t tenant, std::int64_t message_id, int n,
                     callback<attachment> reply);
// The same for a provider at a capability URL (domain::media link): `payload` names the file,
// `mac` must be its keyed hash under the server's keys (else 404, as for no such file).
void read_linked_attachment(runtime& rt, std::int64_t tenant, std::int64_t message_id, int n,
                            std::string payload, std::string mac, callback<attachment> reply);
// Response times of the conversations opened in [from, to) µs, by channel, assignee or team
// (docs/channels.md "Response times"), from what is committed.
void conversation_report(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t to,
                         std::string group_by, callback<std::string> reply);

// An outbound message: to `conversation_id`, or (workflows) to the contact's most recent
// conversation, on `channel_id` when given. Answers the queued message as JSON.
struct outbound_request {
  std::optional<std::int64_t> conversation_id;
  std::optional<std::int64_t> contact_id;
  std::optional<std::int64_t> channel_id;
  std::string text;
  std::optional<std::int64_t> sender_user_id;
  // What the message is for: refused (409) unless the contact's consents allow it on the
  // conversation's channel (docs/compliance.md "Consent").
  domain::consent_purpose purpose = domain::consent_purpose::treatment_communication;
  // An appointment's reminder (the schedule actor): queued and recorded as sent once. A second
  // attempt is refused with reminder_sent_already; an answer on the conversation afterwards is
  // read as the patient's answer to it.
  std::optional<domain::reminder_key> reminder;
  // With contact_id and channel_id: when the contact has no conversation on the channel, one is
  // opened, if the channel can write first to the contact (else 404 naming why).
  bool open_conversation = false;
  // WhatsApp: an approved template (domain::whatsapp::template_to_json) sent instead of `text`,
  // also outside the 24-hour window; `text` is how staff read it.
  std::string template_json;
  // A canned response's text: its {{contact.*}} placeholders are filled from the conversation's
  // contact first (domain::fill_for_contact).
  bool fill_for_contact = false;
  // Files sent with it (docs/channels.md "Media"), checked by the caller (type, 16 MiB).
  std::vector<domain::media_ref> media;
};
inline constexpr std::string_view reminder_sent_already = "the reminder was sent already";
void send_message(runtime& rt, std::int64_t tenant, outbound_request req,
                  callback<std::string> reply);

// An AI agent's decision on an inbound message (docs/ai.md). The channel actor applies it in
// the conversation's order: when the conversation was handed to a person meanwhile
// (ai_paused), the text is not sent and the decision is stored as dropped. Answers
// {"reply_id", "message_ids", "dropped"}.
struct agent_reply {
  std::int64_t agent_id = 0;
  std::int64_t conversation_id = 0;
  std::int64_t message_id = 0;
  std::optional<std::string> text; // the message to send, if any
  std::string intent;
  std::optional<std::string> handoff_reason; // set: hand the conversation to a person
  std::optional<std::int64_t> assignee_id;   // with a hand-off
  std::vector<std::int64_t> passages;
  std::string provider;
  std::optional<int> prompt_tokens, completion_tokens;
  double latency_ms = 0;
  std::optional<std::string> error;
  int depth = 0;
  bool auto_reply = false; // answers an inbound message by itself (not a workflow's ai_reply)
};
void deliver_agent_reply(runtime& rt, std::int64_t tenant, agent_reply r,
                         callback<std::string> reply);

// The channels that active auto-replying agents serve (from the agent actor after each change
// of its agents): an inbound message on one of them is stored as waiting for the agent.
// A contact's consents (docs/compliance.md "Consent"): `record_consent` appends one (the HTTP
// layer has checked that the contact exists) and answers it; `list_consents` answers the
// history, newest first, with what it allows now.
void record_consent(runtime& rt, std::int64_t tenant, domain::consent c,
                    callback<std::string> reply);
void list_consents(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                   callback<std::string> reply);
void get_consent(runtime& rt, std::int64_t tenant, std::int64_t contact_id, std::int64_t id,
                 callback<std::string> reply);
// Whether `purpose` is allowed for the contact on every channel (a withdrawal on any one
// refuses): done, or 409 naming the consent. For work that reads all of a contact's messages,
// such as the AI summary.
void require_consent(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                     domain::consent_purpose purpose, callback<domain::done> reply);

void set_ai_channels(runtime& rt, std::int64_t tenant, std::vector<std::int64_t> channels);

// Where each channel's new conversations go (its team's route) and who is not available, from
// the inbox actor after each change of its teams or of a user's availability.
struct inbox_routes {
  std::map<std::int64_t, domain::team_route> routes;
  std::set<std::int64_t> unavailable;
};
void set_routes(runtime& rt, std::int64_t tenant, std::map<std::int64_t, domain::team_route> routes,
                std::set<std::int64_t> unavailable);

// The patient's erasure (docs/compliance.md): the contact's conversations with their messages
// and AI decisions, channel identities and consents go from Postgres and from memory, after
// every conversation change queued before it. Answers the number of conversations removed.
// A contact merged into another (contract §11): its conversations, provider ids and consents
// are the survivor's now.
void move_contact_messaging(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t into);
void erase_messaging(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                     callback<std::int64_t> reply);

} // namespace crm::actors
