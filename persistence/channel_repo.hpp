// SQL of the messaging area (docs/channels.md): channels, the identities providers use for a
// contact, conversations and messages. Blocking: call only on a pg_pool thread.
#pragma once
#include "domain/audit.hpp"
#include "domain/channel.hpp"
#include "domain/consent.hpp"
#include "domain/inbox.hpp"
#include "domain/schedule.hpp"
#include "persistence/contact_repo.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/tx_batch.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace crm::persistence {

struct identity {
  std::int64_t channel_id = 0;
  std::string external_id;
  std::int64_t contact_id = 0;
};

// A message waiting to be sent (status queued).
struct queued_message {
  std::int64_t id = 0;
  std::int64_t conversation_id = 0;
  std::int64_t channel_id = 0;
  std::int64_t contact_id = 0;
  std::string text;
  int attempts = 0;
  std::int64_t next_attempt_at = 0;
  std::int64_t created_at = 0;
  domain::consent_purpose purpose = domain::consent_purpose::treatment_communication;
  bool from_agent = false;   // an AI agent's reply: needs ai_processing consent too
  std::string template_json; // WhatsApp: the template it sends (domain::whatsapp), else empty
  int files = 0;             // its attachments (docs/channels.md "Media")
  // When an attempt whose outcome was never stored began (µs; 0: none): the provider may have
  // the message (domain::after_unknown_send).
  std::int64_t unknown_since = 0;
};

// A file of an inbound message still to fetch from its provider (docs/channels.md "Media").
struct pending_media {
  std::int64_t message_id = 0;
  int n = 0;
  std::int64_t channel_id = 0;
  std::string source;
  int attempts = 0;
};

struct messaging_snapshot {
  std::vector<pending_media> media; // pending, oldest first
  std::vector<domain::channel> channels;
  std::vector<domain::conversation> conversations;
  std::vector<identity> identities;
  std::vector<queued_message> queued;
  std::vector<std::int64_t> ai_channels; // channels of active auto-replying agents
  std::vector<domain::consent> consents; // oldest first
  // Conversations a reminder went out on for an appointment still to come, with the latest
  // such start: an answer there ("1", "2") before it is taken as the patient's answer.
  std::vector<std::pair<std::int64_t, std::int64_t>> reminded;
  // An active record-event workflow or webhook subscription exists (has_event_listeners).
  bool event_listeners = true;
  // Where each channel's new conversations go, and who is not available (persistence/
  // inbox_repo.hpp load_inbox; read with the rest at the channels actor's load).
  std::map<std::int64_t, domain::team_route> routes;
  std::set<std::int64_t> unavailable;
};
messaging_snapshot load_messaging(pg_conn& c, std::int64_t tenant_id);

domain::channel save_channel(pg_conn& c, domain::channel ch);
void delete_channel(pg_conn& c, std::int64_t tenant_id, std::int64_t id);
// Sets the inbound secret's hash to `new_hash` if it still is `old_hash`; true if it did.
bool replace_channel_secret(pg_conn& c, std::int64_t tenant_id, std::int64_t id,
                            const std::string& old_hash, const std::string& new_hash);
std::optional<std::int64_t> tenant_of_channel(pg_conn& c, std::int64_t id);
std::optional<std::int64_t> tenant_of_conversation(pg_conn& c, std::int64_t id);

struct stored_inbound {
  std::int64_t message_id = 0;
  std::int64_t conversation_id = 0;
  std::int64_t contact_id = 0;
};
// The inbound message with this external id on the channel, if stored.
std::optional<stored_inbound> find_inbound(pg_conn& c, std::int64_t channel_id,
                                           const std::string& external_message_id);

struct inbound_write {
  std::int64_t tenant_id = 0;
  // Ids the channels actor reserved (reserve_messaging_ids), so that a tenant's messages are
  // numbered in the order the actor took them.
  std::int64_t message_id = 0;
  domain::conversation conversation; // new_conversation: insert it under its (reserved) id
  bool new_conversation = false;
  std::int64_t channel_id = 0;
  std::int64_t contact_id = 0;
  std::string text;
  std::string external_message_id;
  std::int64_t received_at = 0;
  std::string subject;                    // e-mail's, else empty
  std::optional<std::string> external_id; // identity to remember
  std::string event_payload;              // message.received; empty: nobody listens
  int depth = 0;                          // workflow chain depth of the event
  bool ai_pending = false;                // an auto-replying agent is to answer it
  std::vector<domain::consent> consents;  // recorded with the message (a STOP request)
  // Audit rows of the change (a "conversation" row without an id gets the conversation's).
  std::vector<domain::audit_record> audit;
  std::vector<domain::media_ref> media; // its files (docs/channels.md "Media")
  // The channel's after-hours reply to send in the conversation (docs/channels.md "Business
  // hours"), if this message gets one: staged with it, queued after COMMIT.
  std::optional<std::string> after_hours_reply;
};
struct inbound_written {
  stored_inbound ids;
  bool duplicate = false;
  domain::conversation conversation;
  std::vector<domain::consent> consents; // as stored, with their ids
};
// One transaction: the conversation (new or updated: unread + 1, last_message_at), the
// message, the identity, the outbox event. A message already stored under its external id →
// duplicate, nothing written.
inbound_written store_inbound(pg_conn& c, const inbound_write& w);

// Inbound messages of one tenant staged while its previous batch commits (docs/channels.md
// "Inbound group commit"), written by the group committer with other tenants' batches. Ids are
// reserved ahead, so nothing is read back; a message whose external id is already stored fails
// the batch (the unique index), and the committer then retries each batch alone.
struct inbound_row {
  std::int64_t message_id = 0;
  std::int64_t conversation_id = 0;
  std::int64_t channel_id = 0;
  std::string text;
  std::string external_message_id;
  std::int64_t received_at = 0;
  bool ai_pending = false;
  // A patient's answer to a reminder: kept in reminder_answers until the schedule actor settles
  // it (docs/appointments.md "Answers").
  bool reminder_answer = false;
  std::int64_t contact_id = 0;
  std::string subject;                  // e-mail's, else empty
  std::vector<domain::media_ref> media; // its files (docs/channels.md "Media")
};
// A message carecrm writes itself beside an inbound one (the channel's after-hours reply),
// stored queued in the same transaction and sent after COMMIT.
struct reply_row {
  queued_message message;
  int segments = 0; // SMS: the segments its text takes
};
struct inbound_batch final : tx_batch {
  std::int64_t tenant_id = 0;
  std::vector<reply_row> replies;
  std::vector<domain::conversation> conversations; // as the batch leaves each: one row per id
  std::vector<inbound_row> messages;
  std::vector<identity> identities; // the last contact of each (channel, external id)
  std::vector<outbox_event> events;
  std::int64_t tenant() const override { return tenant_id; }
  void append_sql(sql_text& out) const override;
};

// Reserves `n` message ids and `n` conversation ids from their sequences.
struct messaging_ids {
  std::vector<std::int64_t> messages;
  std::vector<std::int64_t> conversations;
};
messaging_ids reserve_messaging_ids(pg_conn& c, int n);

// Outbound: inserts the message (queued) and moves the conversation (reopened, last_message_at).
struct outbound_write {
  std::int64_t tenant_id = 0;
  std::int64_t message_id = 0;       // as inbound_write::message_id
  domain::conversation conversation; // new_conversation: insert it under its (reserved) id
  bool new_conversation = false;
  std::string text;
  std::optional<std::int64_t> sender_user_id;
  std::optional<std::int64_t> sender_agent_id;
  std::int64_t created_at = 0;
  domain::consent_purpose purpose = domain::consent_purpose::treatment_communication;
  std::vector<domain::audit_record> audit; // of the change, in its transaction
  // An appointment's reminder: recorded as sent in the same transaction.
  std::optional<domain::reminder_key> reminder;
  std::string template_json;            // WhatsApp: an approved template instead of free text
  int segments = 0;                     // SMS: the segments the text takes (0: not an SMS)
  std::vector<domain::media_ref> media; // its files, with their bytes
};
struct outbound_written {
  queued_message message;
  std::string json;       // the message as the API shows it
  bool duplicate = false; // the reminder was sent already: nothing written
};
outbound_written store_outbound(pg_conn& c, const outbound_write& w);

// A file's fetch: stored (with its bytes), refused or failed for good (with why), or pending
// again with one more attempt. A row no longer pending (or gone with an erasure) is left alone.
struct media_outcome {
  std::int64_t message_id = 0;
  int n = 0;
  std::string status; // stored, refused, failed, pending
  std::string content_type;
  std::string data;
  std::optional<std::string> error;
  int attempts = 0;
};
void save_media(pg_conn& c, std::int64_t tenant_id, const media_outcome& o);
// GET /messages/{id}/attachments/{n}: the file, if the tenant's message has it.
struct attachment_file {
  std::string status;
  std::string content_type;
  std::string filename;
  std::string data;
  std::optional<std::string> error;
};
std::optional<attachment_file> read_attachment(pg_conn& c, std::int64_t tenant_id,
                                               std::int64_t message_id, int n);
std::optional<std::int64_t> tenant_of_message(pg_conn& c, std::int64_t id);
// An outbound message's files as they are sent: the bytes only `with_data` (e-mail).
struct outbound_file {
  int n = 0;
  std::string content_type;
  std::string filename;
  std::string data;
};
std::vector<outbound_file> outbound_files(pg_conn& c, std::int64_t tenant_id,
                                          std::int64_t message_id, bool with_data);

// An AI agent's decision on an inbound message (docs/ai.md), in one transaction: its messages
// (queued, sender_agent_id), the conversation as the decision leaves it (handed off: pending,
// assignee, ai_paused), the ai_replies row and the ai.replied / ai.handoff event. `dropped`:
// the conversation was handed to a person meanwhile, so only the row is written.
struct agent_reply_write {
  std::int64_t tenant_id = 0;
  std::int64_t agent_id = 0;
  domain::conversation conversation;
  std::int64_t message_id = 0; // the inbound message answered
  std::vector<std::string> texts;
  std::vector<std::int64_t> message_ids; // one per text, as inbound_write::message_id
  std::string intent;
  bool handoff = false;
  std::optional<std::string> handoff_reason;
  std::vector<std::int64_t> passages;
  std::string provider;
  std::optional<int> prompt_tokens, completion_tokens;
  double latency_ms = 0;
  std::optional<std::string> error;
  bool dropped = false;
  // An auto-reply: dropped when the message already has a decision (a reply taken up again
  // after a restart, when the first one had been stored after all).
  bool auto_reply = false;
  std::int64_t created_at = 0;
  std::string event_payload; // a JSON object; the reply and message ids are added
  int depth = 0;
  std::vector<domain::audit_record> audit; // the agent's reading of the message, and its answer
};
struct agent_reply_written {
  std::int64_t reply_id = 0;
  std::vector<queued_message> messages;
  bool duplicate = false; // an auto-reply to a message already decided on: nothing written
};

struct pending_inbound {
  std::int64_t message_id = 0;
  std::int64_t conversation_id = 0;
  std::int64_t channel_id = 0;
  std::int64_t contact_id = 0;
  std::string text;
};
// The tenant's inbound messages still waiting for an agent's decision, oldest first.
std::vector<pending_inbound> pending_ai(pg_conn& c, std::int64_t tenant_id);
void forget_pending_ai(pg_conn& c, std::int64_t tenant_id, std::int64_t message_id);
// Tenants with messages waiting for an agent longer than `seconds`.
std::vector<std::int64_t> tenants_with_pending_ai(pg_conn& c, double seconds);
agent_reply_written store_agent_reply(pg_conn& c, const agent_reply_write& w);

// The outcome of a send attempt: sent, failed for good, or queued again at next_attempt_at.
struct send_outcome {
  std::int64_t message_id = 0;
  std::string status; // sent | failed | queued
  int attempts = 0;
  std::optional<std::string> error;
  std::optional<std::string> provider_message_id;
  std::int64_t next_attempt_at = 0;
};
// Clears the mark claim_send set.
void record_send(pg_conn& c, std::int64_t tenant_id, const send_outcome& o);
// Marks the message as being sent, committed before its provider is called; false when it is
// no longer queued (a provider's report naming it arrived, or it was failed meanwhile): then it
// is not sent.
// `wake_at` (µs, 0: unchanged) is when the sweeper should wake the tenant for it should the
// outcome be lost: after the wait for a provider's report, for the channels that wait.
bool claim_send(pg_conn& c, std::int64_t tenant_id, std::int64_t message_id,
                std::int64_t wake_at = 0);

// A provider's report of an outbound message's delivery (WhatsApp's statuses), applied when
// the message, found by the provider's id on the channel, is in one of `from`.
struct delivery_update {
  std::int64_t channel_id = 0;
  std::string provider_message_id;
  std::string status; // delivered, read, failed, sent
  std::vector<std::string_view> from;
  std::optional<std::string> error;
  std::optional<std::int64_t> message_id; // carecrm's id, when the report carries it
};
enum class delivery_applied : std::uint8_t { moved, behind, unknown };
// The Message-ID and Subject of the conversation's last inbound message (e-mail threading);
// empty when there is none.
std::pair<std::string, std::string> last_inbound_of(pg_conn& c, std::int64_t tenant_id,
                                                    std::int64_t conversation_id);
// moved; behind: the message is there with a later status (a report out of order); unknown:
// no outbound message of the channel has that id.
delivery_applied apply_delivery(pg_conn& c, std::int64_t tenant_id, const delivery_update& u);

// GET /reports/conversations (docs/channels.md "Response times"): the conversations opened in
// [from, to) µs, grouped by `group_by` (channel_id, assignee_id or team_id), with the total.
struct conversation_report_query {
  std::int64_t from = 0;
  std::int64_t to = 0;
  std::string group_by = "channel";
};
std::string conversation_report(pg_conn& c, std::int64_t tenant_id,
                                const conversation_report_query& q);

void save_conversation(pg_conn& c, const domain::conversation& conv,
                       const std::vector<domain::audit_record>& audit);
bool active_user_of(pg_conn& c, std::int64_t tenant_id, std::int64_t user_id);
std::string messages_page_json(pg_conn& c, std::int64_t tenant_id, std::int64_t conversation_id,
                               int page, int per_page);

std::vector<std::int64_t> tenants_with_queued_messages(pg_conn& c);

// Appends a consent record; returns it with its id.
domain::consent insert_consent(pg_conn& c, domain::consent record,
                               const std::vector<domain::audit_record>& audit);

} // namespace crm::persistence
