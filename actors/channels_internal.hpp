// The channel actor's parts (docs/channels.md), shared by its three files: the actor with its
// channels and conversations (channels_actor.cpp), the inbound pipeline from each provider's
// webhook to the group commit (channels_inbound.cpp), and the outbound queue with the AI agents'
// replies (channels_outbound.cpp). Internal to actors/ (CAF).
#pragma once
#include "actors/channels.hpp"

#include "actors/channels.hpp"
#include "actors/schedule.hpp"

#include "actors/agents.hpp"
#include "actors/async_io.hpp"
#include "actors/contacts.hpp"
#include "actors/group_batch.hpp"
#include "actors/system.hpp"
#include "actors/workflows.hpp"
#include "actors/writer.hpp"
#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/email.hpp"
#include "domain/json_parse.hpp"
#include "domain/messaging.hpp"
#include "domain/page_json.hpp"
#include "domain/secret_keys.hpp"
#include "domain/send_window.hpp"
#include "domain/twilio.hpp"
#include "domain/validation.hpp"
#include "domain/whatsapp.hpp"
#include "net/http_client.hpp"
#include "net/smtp_client.hpp"
#include "persistence/channel_repo.hpp"
#include "persistence/inbox_repo.hpp"
#include "persistence/log.hpp"
#include "persistence/sealed_columns.hpp"
#include "persistence/subject_repo.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::domain::channel> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::channel_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::channel_filter> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::inbound_call> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::hub_verification> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::inbox_routes> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::conversation_filter> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::conversation_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::outbound_request> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::agent_reply> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::consent> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::consent_purpose> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::persistence::queued_message> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::persistence::pending_media> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::persistence::send_outcome> : std::true_type {};
} // namespace caf

namespace crm::actors::channels_impl {

namespace json = boost::json;
using domain::errc;
using domain::failure;

using delete_atom = caf::atom_constant<caf::atom("delete")>;
using inbound_atom = caf::atom_constant<caf::atom("inbound")>;
using conv_atom = caf::atom_constant<caf::atom("conv")>;
using read_atom = caf::atom_constant<caf::atom("read")>;
using msgs_atom = caf::atom_constant<caf::atom("msgs")>;
using send_atom = caf::atom_constant<caf::atom("send")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using record_atom = caf::atom_constant<caf::atom("record")>;
using media_atom = caf::atom_constant<caf::atom("media")>;
using agent_atom = caf::atom_constant<caf::atom("agent")>;
using aichan_atom = caf::atom_constant<caf::atom("aichan")>;
using consent_atom = caf::atom_constant<caf::atom("consent")>;
using allow_atom = caf::atom_constant<caf::atom("allow")>;
using erase_atom = caf::atom_constant<caf::atom("erase")>;
using moved_atom = caf::atom_constant<caf::atom("ctmoved")>;
using hub_atom = caf::atom_constant<caf::atom("hub")>;
using tmpl_atom = caf::atom_constant<caf::atom("tmpl")>;
using routes_atom = caf::atom_constant<caf::atom("routes")>;
using report_atom = caf::atom_constant<caf::atom("report")>;

constexpr int max_send_attempts = 3;
// Sends of one channel in flight at once (docs/channels.md "Pace"): WhatsApp's default of 80
// messages a second at about 100 ms a call.
constexpr std::size_t sends_per_channel = 8;
constexpr std::array<std::int64_t, 2> retry_delays_ms = {1000, 5000};

struct inbound_open {
  std::uint64_t seq = 0;
  persistence::inbound_batch sql;
  std::unordered_map<std::int64_t, std::size_t> conversation_pos; // in sql.conversations
  std::map<std::pair<std::int64_t, std::string>, std::size_t> identity_pos;
  std::vector<continuation> on_commit;
  std::vector<std::function<void(const failure&)>> on_fail;
  std::size_t writes = 0;
};

struct staged_conversation {
  domain::conversation conv;
  std::uint64_t seq = 0; // of the last batch that changes it
};

struct staged_identity {
  std::int64_t contact = 0;
  std::uint64_t seq = 0;
};

struct channels_state {
  tenant_env env;
  const automation_options* opts = nullptr;
  bool loaded = false;
  bool loading = false;
  bool stopping = false;
  waiting_list waiting;

  std::map<std::int64_t, domain::channel> channels;
  std::map<std::int64_t, domain::conversation> conversations; // changed by keep_conversation
  domain::open_load open_load;                                // of `conversations`, kept with them
  std::unordered_map<std::int64_t, std::vector<std::int64_t>> by_contact;  // → conversation ids
  std::map<std::pair<std::int64_t, std::string>, std::int64_t> identities; // → contact
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> chats; // (channel, contact) → id
  // Inbound messages being stored, by (channel, external message id): the callers waiting.
  std::map<std::pair<std::int64_t, std::string>, std::vector<callback<std::string>>> storing;
  std::set<std::int64_t> sending;   // outbound messages with an attempt in flight (to recorded)
  std::set<std::int64_t> in_window; // those of them holding a window slot (to the answer)
  domain::send_window window{sends_per_channel}; // at most so many of a channel's in flight
  std::map<std::int64_t, persistence::queued_message> held_sends; // waiting in the window
  std::set<std::pair<std::int64_t, int>> fetching;      // (message, n): media being fetched
  std::deque<persistence::pending_media> media_waiting; // past the fetches allowed at once
  std::set<std::int64_t> ai_channels;                   // served by an active auto-replying agent
  // The shared inbox (docs/channels.md "Teams and assignment"): each team channel's route, who
  // is not available, and when each member of a team was last given a conversation.
  inbox_routes inbox;
  std::map<std::int64_t, std::map<std::int64_t, std::int64_t>> last_assigned; // team → user → µs
  // Conversations a reminder went out on, with the latest start it was for: "1" or "2" there
  // before that start answers it (docs/appointments.md "Answers").
  std::map<std::int64_t, std::int64_t> reminded;
  // Each contact's consents, oldest first: every send, and every message an agent would read,
  // is checked against them here (docs/compliance.md "Consent").
  std::unordered_map<std::int64_t, std::vector<domain::consent>> consents;
  // Everything that changes a conversation runs one at a time (inbound: from the contact match
  // to staging; outbound; status, assignee, read): each computes the conversation (found or
  // new, unread count, last message time, status) from the state the previous one left, and
  // the first message of a new sender has its contact and identity in place before the next.
  one_at_a_time conv;
  // The channels' own writes (create, update, delete, a secret's rehash): actors/writer.hpp.
  one_at_a_time writes;

  // Inbound group commit (docs/channels.md): messages are staged into `open` while `in_flight`
  // commits; the conversations and identities they change are overlaid (`staged`) until their
  // batch commits, so the next message is computed from the state the previous one left.
  inbound_open open;
  std::optional<inbound_open> in_flight;
  std::uint64_t next_seq = 1;
  std::map<std::int64_t, staged_conversation> staged;                         // by conversation id
  std::map<std::pair<std::int64_t, std::string>, staged_identity> staged_ids; // (channel, ext)
  std::deque<std::int64_t> message_ids;                                       // reserved
  std::deque<std::int64_t> conversation_ids;
  // The conversation step waiting for the staged messages to commit (it reads committed state).
  std::deque<continuation> after_drain;
  // A batch's outcome is unknown (the connection was lost at COMMIT): the conversations are
  // read again from Postgres before the next step uses them.
  bool stale = false;
  // Whether anyone listens to message.received (docs/automation.md): read at load, then told by
  // the workflow actor of every change. Without listeners no event row is written.
  bool event_listeners = true;
  bool listeners_told = false;

  int pending_io = 0;
  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
  static inline const char* name = "channels";
};

using ch_actor = caf::stateful_actor<channels_state>;

// channels_actor.cpp: the state, its load, and the conversation steps (each change of a
// conversation runs in its turn; see channels_state::conv).
bool inbound_drained(const channels_state& st);
void settle(ch_actor* self);
std::string public_url(const channels_state& st);
void keep_conversation(channels_state& st, const domain::conversation& c);
void remember_identity(channels_state& st, std::int64_t channel, const std::string& external,
                       std::int64_t contact);
void schedule_send(ch_actor* self, const persistence::queued_message& m);
std::optional<std::string> consent_refusal(const channels_state& st, std::int64_t contact,
                                           domain::consent_purpose purpose, std::int64_t channel);
bool is_reminder_answer(const channels_state& st, std::int64_t conversation, std::string_view text);
domain::audit_context_ptr channel_webhook(std::int64_t channel_id);
domain::audit_record conversation_row(const domain::audit_context* who, const channels_state& st,
                                      const domain::conversation& conv, const char* action,
                                      std::vector<std::string> fields, int status);
void conv_done(ch_actor* self);
// The shared inbox's metrics (actors/meters.hpp inbox_meter): a conversation opened, and its
// move from `before` to `after` once committed (a first response, a resolution).
void count_opened(const channels_state& st, const domain::conversation& c);
void count_change(const channels_state& st, const domain::conversation& before,
                  const domain::conversation& after);
void when_current(ch_actor* self, continuation k, std::function<void(const failure&)> fail);
void conv_serial(ch_actor* self, std::function<void(const failure&)> fail, continuation k);
void conv_serial_inbound(ch_actor* self, continuation k);
std::int64_t take(std::deque<std::int64_t>& ids);
bool ids_ready(ch_actor* self, continuation retry, std::function<void(const failure&)> fail);

// channels_inbound.cpp
std::optional<std::string> hashed_secret(ch_actor* self, const std::optional<std::string>& plain);
void on_inbound(ch_actor* self, std::int64_t channel_id, inbound_call call,
                callback<std::string> reply);

// channels_media.cpp (docs/channels.md "Media"): the files of a stored message that its
// provider keeps, fetched, checked and stored one by one, with retries.
std::vector<persistence::pending_media> pending_refs(std::int64_t channel_id,
                                                     const std::vector<domain::media_ref>& media);
void fetch_media_of(ch_actor* self, std::int64_t message_id,
                    std::vector<persistence::pending_media> media);
void fetch_media(ch_actor* self, persistence::pending_media m);

// channels_outbound.cpp
void attempt_send(ch_actor* self, persistence::queued_message m);
// An attempt of message `m` is over (its outcome stored, or it was not made): the next message
// waiting for its channel's window goes.
void send_over(ch_actor* self, const persistence::queued_message& m);
// An attempt's outcome stored (again, after a failure to store it).
void record(ch_actor* self, persistence::send_outcome o, persistence::queued_message m);
// The queued messages a load found: each scheduled, or, when an attempt's outcome was lost,
// settled by domain::after_unknown_send first.
void resume_queued(ch_actor* self, std::vector<persistence::queued_message> queued);
void do_send(ch_actor* self, outbound_request req, callback<std::string> reply_to);
void apply_agent_reply(ch_actor* self, agent_reply a, callback<std::string> reply_to);

// The most recent conversation of `contact` (on `channel` when given) that passes `keep`.
template <class Keep>
const domain::conversation* latest_conversation(const channels_state& st, std::int64_t contact,
                                                std::optional<std::int64_t> channel, Keep keep) {
  const domain::conversation* best = nullptr;
  auto ids = st.by_contact.find(contact);
  if (ids == st.by_contact.end()) return nullptr;
  for (auto id : ids->second) {
    auto& c = st.conversations.at(id);
    if ((!channel || c.channel_id == *channel) && keep(c) &&
        (!best || c.last_message_at > best->last_message_at))
      best = &c;
  }
  return best;
}

template <class T, class Lookup>
void reply_missing(ch_actor* self, Lookup lookup, const char* what, callback<T> reply) {
  reply_not_held(self->state.env, std::move(lookup),
                 failure::of(errc::not_found, std::string(what) + " not found"), std::move(reply));
}

template <class T>
void missing_channel(ch_actor* self, std::int64_t id, callback<T> reply) {
  reply_missing(
      self, [id](persistence::pg_conn& c) { return persistence::tenant_of_channel(c, id); },
      "channel", std::move(reply));
}

template <class T>
void missing_conversation(ch_actor* self, std::int64_t id, callback<T> reply) {
  reply_missing(
      self, [id](persistence::pg_conn& c) { return persistence::tenant_of_conversation(c, id); },
      "conversation", std::move(reply));
}

} // namespace crm::actors::channels_impl
