// The channel actor of one tenant (docs/channels.md): the only writer of its channels,
// conversations and messages.
//
// - Channels and conversations load on first use and are served from memory; message
//   histories are read from Postgres (they only grow).
// - An inbound message: secret and state checks, then the contact (the contacts actor matches
//   or creates it), then the conversation, the message, the identity and the message.received
//   event are staged into the tenant's open batch, which the group committer writes in one
//   transaction with the messages staged beside it (docs/channels.md "Inbound group commit");
//   the caller is answered after COMMIT. Posts of the same
//   external message id that arrive while the first is being stored wait for it and get its
//   ids with duplicate = true.
// - Outbound messages are stored queued, then sent through the channel's adapter on the HTTP
//   client's thread; each attempt's outcome is stored (sent, queued again, failed).
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
} // namespace caf

namespace crm::actors {
namespace {

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
using agent_atom = caf::atom_constant<caf::atom("agent")>;
using aichan_atom = caf::atom_constant<caf::atom("aichan")>;
using consent_atom = caf::atom_constant<caf::atom("consent")>;
using allow_atom = caf::atom_constant<caf::atom("allow")>;
using erase_atom = caf::atom_constant<caf::atom("erase")>;
using hub_atom = caf::atom_constant<caf::atom("hub")>;
using tmpl_atom = caf::atom_constant<caf::atom("tmpl")>;
using routes_atom = caf::atom_constant<caf::atom("routes")>;
using report_atom = caf::atom_constant<caf::atom("report")>;

constexpr int max_send_attempts = 3;
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
  std::map<std::int64_t, domain::conversation> conversations;
  std::unordered_map<std::int64_t, std::vector<std::int64_t>> by_contact;  // → conversation ids
  std::map<std::pair<std::int64_t, std::string>, std::int64_t> identities; // → contact
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> chats; // (channel, contact) → id
  // Inbound messages being stored, by (channel, external message id): the callers waiting.
  std::map<std::pair<std::int64_t, std::string>, std::vector<callback<std::string>>> storing;
  std::set<std::int64_t> sending;     // outbound messages with an attempt in flight
  std::set<std::int64_t> ai_channels; // served by an active auto-replying agent
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

bool inbound_drained(const channels_state& st) {
  return !st.in_flight && st.open.writes == 0;
}

void settle(ch_actor* self) {
  auto& st = self->state;
  if (st.stopping && st.pending_io == 0 && !st.loading && !st.writes.busy() && inbound_drained(st))
    self->quit();
}

std::string public_url(const channels_state& st) {
  return st.opts ? st.opts->public_url : "";
}

// Stores a conversation in memory (new or changed), indexed by its contact: an inbound message
// and a workflow's reply look up the contact's conversations, not all of them.
void keep_conversation(channels_state& st, const domain::conversation& c) {
  auto [it, added] = st.conversations.insert_or_assign(c.id, c);
  if (added) st.by_contact[c.contact_id].push_back(c.id);
}

// The provider's id (a Telegram chat) of `contact` on `channel`, both ways.
void remember_identity(channels_state& st, std::int64_t channel, const std::string& external,
                       std::int64_t contact) {
  auto& owner = st.identities[{channel, external}];
  if (owner && owner != contact) st.chats.erase({channel, owner});
  owner = contact;
  st.chats[{channel, contact}] = external;
}

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

void attempt_send(ch_actor* self, persistence::queued_message m);

void schedule_send(ch_actor* self, const persistence::queued_message& m) {
  auto delay = std::max<std::int64_t>(0, (m.next_attempt_at - domain::now_micros()) / 1000);
  if (delay == 0) return attempt_send(self, m);
  // The whole message: its purpose is checked against the consents again when it is retried.
  self->delayed_send(self, std::chrono::milliseconds(delay), retry_atom::value, m);
}

// A contact's consents, oldest first (none: an empty history).
const std::vector<domain::consent>& consents_of(const channels_state& st, std::int64_t contact) {
  static const std::vector<domain::consent> none;
  auto it = st.consents.find(contact);
  return it == st.consents.end() ? none : it->second;
}

// Why the contact's consents refuse `purpose` on `channel`, if they do.
std::optional<std::string> consent_refusal(const channels_state& st, std::int64_t contact,
                                           domain::consent_purpose purpose, std::int64_t channel) {
  auto reason = domain::consent_refusal(consents_of(st, contact), purpose, channel);
  if (reason) return "consent: " + *reason;
  return std::nullopt;
}

// The conversations, identities and consents as Postgres has them (at load, and after a batch
// whose outcome is unknown). Consents only grow: those read join the ones in memory (which may
// hold one recorded after this read), oldest first.
void adopt_messaging(channels_state& st, const persistence::messaging_snapshot& snap) {
  st.conversations.clear();
  st.by_contact.clear();
  st.identities.clear();
  st.chats.clear();
  for (auto& c : snap.conversations) keep_conversation(st, c);
  for (auto& i : snap.identities) remember_identity(st, i.channel_id, i.external_id, i.contact_id);
  for (auto& c : snap.consents) {
    auto& held = st.consents[c.contact_id];
    if (std::none_of(held.begin(), held.end(), [&](auto& h) { return h.id == c.id; }))
      held.push_back(c);
  }
  for (auto& [contact, held] : st.consents)
    std::sort(held.begin(), held.end(), [](auto& a, auto& b) { return a.id < b.id; });
  for (auto [conversation, start] : snap.reminded)
    st.reminded[conversation] = std::max(st.reminded[conversation], start);
}

// A message on a conversation a reminder went out on that answers it ("1", "sim", "cancelar"):
// the patient's answer to the reminder, neither a STOP nor a question for an agent.
bool is_reminder_answer(const channels_state& st, std::int64_t conversation,
                        std::string_view text) {
  auto it = st.reminded.find(conversation);
  return it != st.reminded.end() && it->second > domain::now_micros() &&
         domain::read_reminder_answer(text) != domain::reminder_answer::none;
}

void read_messaging(ch_actor* self);

void load(ch_actor* self) {
  auto& st = self->state;
  if (st.loading || st.loaded) return;
  st.loading = true;
  // A predecessor's inbound batches settle first: the state read then includes them.
  after_settled<persistence::inbound_batch>(self, [self] { read_messaging(self); });
}

void read_messaging(ch_actor* self) {
  auto& st = self->state;
  db<persistence::messaging_snapshot>(
      self,
      [tid = st.env.tenant_id](persistence::pg_conn& c) {
        auto snap = persistence::load_messaging(c, tid);
        auto inbox = persistence::load_inbox(c, tid);
        snap.routes = inbox.routes();
        snap.unavailable = std::move(inbox.unavailable);
        return snap;
      },
      [self](domain::outcome<persistence::messaging_snapshot> r) {
        auto& st = self->state;
        st.loading = false;
        if (!r) return release_waiting(st.waiting, &r.error());
        for (auto& c : r->channels) st.channels[c.id] = std::move(c);
        adopt_messaging(st, *r);
        st.ai_channels.insert(r->ai_channels.begin(), r->ai_channels.end());
        st.inbox = {std::move(r->routes), std::move(r->unavailable)};
        if (!st.listeners_told) st.event_listeners = r->event_listeners;
        st.loaded = true;
        release_waiting(st.waiting, nullptr);
        for (auto& m : r->queued) schedule_send(self, m);
      });
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

void save_channel(ch_actor* self, domain::channel c, callback<std::string> reply) {
  db<domain::channel>(
      self, [c](persistence::pg_conn& conn) { return persistence::save_channel(conn, c); },
      [self, reply](domain::outcome<domain::channel> r) {
        if (!r) return reply(r.error());
        auto& st = self->state;
        st.channels[r->id] = *r;
        reply(json::serialize(domain::channel_to_json(*r, public_url(st))));
      });
}

// ---- inbound -------------------------------------------------------------------------------

// The inbound webhook secret is only ever compared: it is kept as a keyed hash.
constexpr std::string_view webhook_secret_purpose = persistence::sealed::channel_webhook_secret;

std::optional<std::string> hashed_secret(ch_actor* self, const std::optional<std::string>& plain) {
  if (!plain) return std::nullopt;
  auto& st = self->state;
  return st.env.pool->keys().hash(webhook_secret_purpose, st.env.tenant_id, *plain);
}

// A secret hashed under a key that is no longer the first (or stored before hashing) moves to
// the current key when it is next presented, the one moment its plaintext is at hand. The row
// changes only if it still holds the old hash, so a secret changed meanwhile is never undone.
void rehash_secret(ch_actor* self, std::int64_t id, std::string old_hash, std::string new_hash) {
  // One of the channels' writes, so a PATCH planned before it cannot write the old hash back.
  write_in_turn(
      self, callback<domain::done>([](domain::outcome<domain::done>) {}),
      [self, id, old_hash, new_hash](callback<domain::done> end) {
        db<bool>(
            self,
            [tid = self->state.env.tenant_id, id, old_hash, new_hash](persistence::pg_conn& c) {
              return persistence::replace_channel_secret(c, tid, id, old_hash, new_hash);
            },
            [self, id, old_hash, new_hash, end](domain::outcome<bool> r) {
              auto it = self->state.channels.find(id);
              if (r && *r && it != self->state.channels.end() &&
                  it->second.webhook_secret == old_hash)
                it->second.webhook_secret = new_hash;
              end(domain::done{});
            });
      });
}

std::string ack(const persistence::stored_inbound& ids, bool duplicate) {
  json::object o{{"status", "accepted"},
                 {"message_id", ids.message_id},
                 {"conversation_id", ids.conversation_id},
                 {"contact_id", ids.contact_id},
                 {"duplicate", duplicate}};
  return json::serialize(o);
}

// Answers everyone waiting on `key`: the first caller with `first`, the others as duplicates.
void answer_inbound(ch_actor* self, const std::pair<std::int64_t, std::string>& key,
                    const domain::outcome<persistence::stored_inbound>& r, bool first_duplicate) {
  auto& st = self->state;
  auto it = st.storing.find(key);
  if (it == st.storing.end()) return;
  auto waiters = std::move(it->second);
  st.storing.erase(it);
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    if (!r)
      waiters[i](r.error());
    else
      waiters[i](ack(*r, i > 0 || first_duplicate));
  }
}

// Who acts for an inbound message: the channel's webhook (docs/compliance.md "Audit trail").
domain::audit_context_ptr channel_webhook(std::int64_t channel_id) {
  auto ctx = std::make_shared<domain::audit_context>();
  ctx->actor = domain::audit_actor::webhook;
  ctx->actor_ref = "channel:" + std::to_string(channel_id);
  return ctx;
}

// An audit row of a conversation change, with the contact it concerns among its ids (so the
// contact's access history lists it).
domain::audit_record conversation_row(const domain::audit_context* who, const channels_state& st,
                                      const domain::conversation& conv, const char* action,
                                      std::vector<std::string> fields, int status) {
  auto r =
      domain::make_audit(who, st.env.tenant_id, "conversation",
                         conv.id ? std::optional<std::int64_t>(conv.id) : std::nullopt, action);
  r.fields = std::move(fields);
  r.status = status;
  r.ids = {conv.contact_id};
  return r;
}

// After an erasure: nothing of the contact stays in memory.
void forget_contact(channels_state& st, std::int64_t contact) {
  if (auto it = st.by_contact.find(contact); it != st.by_contact.end()) {
    for (auto id : it->second) st.conversations.erase(id);
    st.by_contact.erase(it);
  }
  std::erase_if(st.identities, [&](const auto& kv) { return kv.second == contact; });
  std::erase_if(st.chats, [&](const auto& kv) { return kv.first.second == contact; });
  st.consents.erase(contact);
}

domain::audit_record consent_row(const domain::audit_context* who, std::int64_t tenant,
                                 const domain::consent& c) {
  auto row = domain::make_audit(who, tenant, "contact", c.contact_id, "record_consent");
  row.fields = {"purpose", "granted", "channel", "source"};
  if (c.evidence) row.fields.emplace_back("evidence");
  row.status = 201;
  return row;
}

void conv_done(ch_actor* self) {
  self->state.conv.done();
}

// Runs `k` once every staged inbound message has committed (or failed).
void when_drained(ch_actor* self, continuation k) {
  if (inbound_drained(self->state)) return k();
  self->state.after_drain.push_back(std::move(k));
}

// Inside a conversation step: runs `k` on committed and current state, once the staged inbound
// messages have committed and, after a batch whose outcome is unknown, the state was read again;
// if that read fails, ends the step and answers `fail`.
void when_current(ch_actor* self, continuation k, std::function<void(const failure&)> fail) {
  when_drained(self, [self, k, fail] {
    if (!self->state.stale) return k();
    db<persistence::messaging_snapshot>(
        self,
        [tid = self->state.env.tenant_id](persistence::pg_conn& c) {
          return persistence::load_messaging(c, tid);
        },
        [self, k, fail](domain::outcome<persistence::messaging_snapshot> r) {
          if (!r) {
            conv_done(self);
            return fail(r.error());
          }
          adopt_messaging(self->state, *r);
          self->state.stale = false;
          k();
        });
  });
}

// Runs `k` as the next conversation step, on committed and current state (when_current). `k`
// ends with conv_done however it ends.
void conv_serial(ch_actor* self, std::function<void(const failure&)> fail, continuation k) {
  self->state.conv.run(
      [self, fail = std::move(fail), k = std::move(k)] { when_current(self, k, fail); });
}

// An inbound message's step: it runs while earlier messages are still staged (store_message
// computes from the staged state).
void conv_serial_inbound(ch_actor* self, continuation k) {
  self->state.conv.run(std::move(k));
}

// The contact's most recent open conversation on `channel` as the staged messages leave it.
std::optional<domain::conversation> open_conversation(const channels_state& st,
                                                      std::int64_t contact, std::int64_t channel) {
  const domain::conversation* best = nullptr;
  auto consider = [&](const domain::conversation& c) {
    if (c.channel_id == channel && c.status != domain::conversation_status::closed &&
        (!best || c.last_message_at > best->last_message_at))
      best = &c;
  };
  if (auto ids = st.by_contact.find(contact); ids != st.by_contact.end())
    for (auto id : ids->second) {
      auto staged = st.staged.find(id);
      consider(staged != st.staged.end() ? staged->second.conv : st.conversations.at(id));
    }
  for (auto& [id, s] : st.staged)
    if (s.conv.contact_id == contact && !st.conversations.count(id)) consider(s.conv);
  if (!best) return std::nullopt;
  return *best;
}

// The message.received event: the message and conversation ids first, then the channel, the
// contact (as stored), the message and the tenant.
std::string received_payload(std::int64_t tenant, std::int64_t message_id,
                             std::int64_t conversation_id, std::int64_t channel_id,
                             const domain::inbound_message& m, const domain::contact& contact) {
  json::object message{{"text", m.text}, {"external_message_id", m.external_message_id}};
  if (m.timestamp) message["timestamp"] = domain::format_rfc3339(m.timestamp);
  json::object payload;
  payload["message_id"] = message_id;
  payload["conversation_id"] = conversation_id;
  payload["channel_id"] = channel_id;
  payload["contact_id"] = contact.id;
  payload["message"] = std::move(message);
  payload["tenant_id"] = tenant;
  json::error_code ec;
  auto contact_json = crm::domain::parse_json(domain::encode_contact_full(contact, nullptr), ec);
  payload["contact"] = ec ? json::value(nullptr) : contact_json;
  return json::serialize(payload);
}

// After COMMIT of an inbound message: memory, automation, the agent, the callers.
void received(ch_actor* self, const std::pair<std::int64_t, std::string>& key,
              const persistence::stored_inbound& ids, const domain::conversation& conv,
              const std::string& text, int depth, bool answer, std::int64_t received_at) {
  auto& st = self->state;
  automation_counts().messages_received++;
  // An answer to a reminder (as decided when the message was stored, and kept in
  // reminder_answers until settled) goes to the schedule actor, which confirms or cancels and
  // answers.
  if (answer)
    answer_reminder(*st.env.rt->owner, st.env.tenant_id,
                    domain::patient_answer{ids.message_id, ids.contact_id, conv.id, key.first, text,
                                           received_at});
  // An auto-replying agent of the channel answers, unless a person has the conversation
  // (docs/ai.md). Channels no agent serves never wake the agent actor.
  if (!answer && !conv.ai_paused && st.ai_channels.count(key.first))
    ai_on_inbound(*st.env.rt->owner, st.env.tenant_id,
                  ai_inbound{conv.id, key.first, ids.contact_id, ids.message_id, text, depth});
  answer_inbound(self, key, ids, false);
}

void flush_inbound(ch_actor* self);

// Message and conversation ids are reserved ahead, a block at a time, and handed out inside
// conversation steps: a tenant's messages are numbered in the order this actor took them.
std::int64_t take(std::deque<std::int64_t>& ids) {
  auto id = ids.front();
  ids.pop_front();
  return id;
}

// True when a message id and a conversation id are reserved. Else reserves a block (inside a
// conversation step), then runs `retry`, or ends the step and answers `fail`; false.
bool ids_ready(ch_actor* self, continuation retry, std::function<void(const failure&)> fail) {
  auto& st = self->state;
  if (!st.message_ids.empty() && !st.conversation_ids.empty()) return true;
  db<persistence::messaging_ids>(
      self, [](persistence::pg_conn& c) { return persistence::reserve_messaging_ids(c, 64); },
      [self, retry, fail](domain::outcome<persistence::messaging_ids> r) {
        auto& st = self->state;
        if (!r) {
          conv_done(self);
          return fail(r.error());
        }
        st.message_ids.insert(st.message_ids.end(), r->messages.begin(), r->messages.end());
        st.conversation_ids.insert(st.conversation_ids.end(), r->conversations.begin(),
                                   r->conversations.end());
        retry();
      });
  return false;
}

// Stages a message into the open batch, with ids reserved ahead (inside conv_serial_inbound;
// the step ends here, before COMMIT: the next message is computed from the staged state).
void stage_message(ch_actor* self, std::pair<std::int64_t, std::string> key,
                   persistence::inbound_write w, domain::inbound_message m,
                   const domain::contact& contact, bool answer) {
  auto& st = self->state;
  if (!ids_ready(
          self,
          [self, key, w, m, contact, answer] {
            stage_message(self, key, std::move(w), m, contact, answer);
          },
          [self, key](const failure& f) { answer_inbound(self, key, f, false); }))
    return;
  auto& conv = w.conversation;
  if (conv.id == 0) conv.id = take(st.conversation_ids);
  persistence::stored_inbound ids{take(st.message_ids), conv.id, contact.id};

  auto& b = st.open;
  b.sql.tenant_id = st.env.tenant_id;
  if (auto [pos, added] = b.conversation_pos.try_emplace(conv.id, b.sql.conversations.size());
      added)
    b.sql.conversations.push_back(conv);
  else
    b.sql.conversations[pos->second] = conv;
  b.sql.messages.push_back({ids.message_id, conv.id, w.channel_id, w.text, w.external_message_id,
                            w.received_at, w.ai_pending, answer, contact.id, w.subject});
  if (w.external_id) {
    auto id_key = std::make_pair(w.channel_id, *w.external_id);
    if (auto [pos, added] = b.identity_pos.try_emplace(id_key, b.sql.identities.size()); added)
      b.sql.identities.push_back({w.channel_id, *w.external_id, contact.id});
    else
      b.sql.identities[pos->second].contact_id = contact.id;
    st.staged_ids[id_key] = {contact.id, b.seq};
  }
  if (st.event_listeners)
    b.sql.events.push_back(
        {"message.received",
         received_payload(st.env.tenant_id, ids.message_id, conv.id, w.channel_id, m, contact),
         w.depth});
  for (auto& row : w.audit) {
    if (row.resource == "conversation" && !row.resource_id) row.resource_id = conv.id;
    b.sql.audit.push_back(std::move(row));
  }
  st.staged[conv.id] = {conv, b.seq};
  b.on_commit.push_back([self, key, ids, conv, text = w.text, depth = w.depth, at = w.received_at,
                         answer] { received(self, key, ids, conv, text, depth, answer, at); });
  b.on_fail.push_back([self, key](const failure& f) { answer_inbound(self, key, f, false); });
  b.writes++;
  flush_inbound(self);
  conv_done(self);
}

// A message that withdraws consents (a STOP) is stored alone, on committed state (its consents
// decide how every later message of the contact is handled), and the next step waits for it.
void store_alone(ch_actor* self, std::pair<std::int64_t, std::string> key,
                 persistence::inbound_write w, domain::inbound_message m,
                 const domain::contact& contact) {
  auto& st = self->state;
  if (!ids_ready(
          self, [self, key, w, m, contact] { store_alone(self, key, w, m, contact); },
          [self, key](const failure& f) { answer_inbound(self, key, f, false); }))
    return;
  w.message_id = take(st.message_ids);
  if (w.conversation.id == 0) {
    w.conversation.id = take(st.conversation_ids);
    w.new_conversation = true;
  }
  if (st.event_listeners)
    w.event_payload = received_payload(st.env.tenant_id, w.message_id, w.conversation.id,
                                       w.channel_id, m, contact);
  db<persistence::inbound_written>(
      self, [w](persistence::pg_conn& c) { return persistence::store_inbound(c, w); },
      [self, key, external = w.external_id, contact_id = w.contact_id, text = w.text,
       depth = w.depth](domain::outcome<persistence::inbound_written> r) {
        auto& st = self->state;
        if (!r) {
          // The outcome unknown (the connection lost at COMMIT): read the state again first.
          if (r.error().code == errc::service_unavailable) st.stale = true;
          conv_done(self);
          return answer_inbound(self, key, r.error(), false);
        }
        if (!r->duplicate) {
          keep_conversation(st, r->conversation);
          for (auto& c : r->consents) st.consents[c.contact_id].push_back(c);
          if (external) remember_identity(st, key.first, *external, contact_id);
          // The workflow actor takes message.received from the outbox.
          st.env.rt->route(st.env.tenant_id, child_kind::workflows,
                           caf::make_message(outbox_atom::value));
          received(self, key, r->ids, r->conversation, text, depth, false, 0); // a STOP
        } else {
          answer_inbound(self, key, r->ids, true);
        }
        // Only now, with the conversation as this message left it, may the next one be stored.
        conv_done(self);
      });
}

// A new conversation on a team's channel: the team's, and the member who takes it
// (domain::pick_assignee), counting each member's open conversations, staged ones included.
void assign(channels_state& st, domain::conversation& conv, std::int64_t now) {
  auto route = st.inbox.routes.find(conv.channel_id);
  if (route == st.inbox.routes.end()) return;
  auto& r = route->second;
  conv.team_id = r.team_id;
  std::map<std::int64_t, std::int64_t> open;
  auto count = [&](const domain::conversation& c) {
    if (c.assignee_id && c.status != domain::conversation_status::closed) open[*c.assignee_id]++;
  };
  for (auto& [id, c] : st.conversations)
    if (!st.staged.count(id)) count(c);
  for (auto& [id, s] : st.staged) count(s.conv);
  auto& last = st.last_assigned[r.team_id];
  conv.assignee_id = domain::pick_assignee(r, st.inbox.unavailable, open, last);
  if (conv.assignee_id) last[*conv.assignee_id] = now;
}

// Inside conv_serial_inbound().
void store_message(ch_actor* self, std::int64_t channel_id, domain::inbound_message m,
                   const domain::contact& contact, int depth) {
  auto& st = self->state;
  auto key = std::make_pair(channel_id, m.external_message_id);
  auto open = open_conversation(st, contact.id, channel_id);
  // An e-mail answering a conversation of this contact on this channel joins it, closed or not.
  if (m.conversation_hint && (!open || open->id != *m.conversation_hint)) {
    auto staged = st.staged.find(*m.conversation_hint);
    auto held = st.conversations.find(*m.conversation_hint);
    const domain::conversation* hinted = staged != st.staged.end()        ? &staged->second.conv
                                         : held != st.conversations.end() ? &held->second
                                                                          : nullptr;
    if (hinted && hinted->contact_id == contact.id && hinted->channel_id == channel_id) {
      open = *hinted;
      domain::set_status(*open, domain::conversation_status::open, domain::now_micros());
    }
  }
  const bool answer = open && is_reminder_answer(st, open->id, m.text);
  const bool stop = !answer && domain::is_stop_request(m.text);
  // A STOP, and any message after a batch of unknown outcome, waits for committed (and, after
  // that, re-read) state.
  if ((stop && !inbound_drained(st)) || st.stale)
    return when_current(
        self,
        [self, channel_id, m, contact, depth] {
          store_message(self, channel_id, m, contact, depth);
        },
        [self, key](const failure& f) { answer_inbound(self, key, f, false); });
  auto now = domain::now_micros();
  domain::conversation conv;
  if (open) conv = *open;
  if (conv.id == 0) {
    conv.tenant_id = st.env.tenant_id;
    conv.channel_id = channel_id;
    conv.contact_id = contact.id;
    conv.created_at = now;
    assign(st, conv, now);
  }
  conv.unread_count++;
  conv.last_message_at = now;
  conv.last_inbound_at = now;
  conv.updated_at = std::max(now, conv.updated_at + 1);
  // An agent never reads a message of a contact who withdrew ai_processing, nor a "STOP": the
  // conversation goes to a person instead.
  const bool agent_serves = st.ai_channels.count(channel_id) > 0;
  if (!conv.ai_paused && agent_serves) {
    auto refused =
        consent_refusal(st, contact.id, domain::consent_purpose::ai_processing, channel_id);
    if (stop || refused) {
      conv.ai_paused = true;
      conv.status = domain::conversation_status::pending;
      conv.handoff_reason = stop ? std::string("the contact asked to stop messages") : *refused;
    }
  }

  persistence::inbound_write w;
  w.tenant_id = st.env.tenant_id;
  w.conversation = conv;
  w.channel_id = channel_id;
  w.contact_id = contact.id;
  w.text = m.text;
  w.external_message_id = m.external_message_id;
  w.received_at = now;
  w.subject = m.subject;
  w.external_id = m.contact.external_id;
  w.depth = depth;
  // "STOP" withdraws consent to every kind of message on this channel, with the message as
  // evidence, in the transaction that stores it.
  if (stop)
    for (auto purpose : domain::stop_withdraws) {
      domain::consent c;
      c.tenant_id = st.env.tenant_id;
      c.contact_id = contact.id;
      c.purpose = purpose;
      c.channel_id = channel_id;
      c.granted = false;
      c.source = "inbound_message";
      c.recorded_at = now;
      w.consents.push_back(std::move(c));
    }
  w.ai_pending = !conv.ai_paused && agent_serves && !answer;
  auto webhook = channel_webhook(channel_id);
  w.audit.push_back(conversation_row(webhook.get(), st, conv, "message_received", {"text"}, 202));
  if (!w.consents.empty()) {
    auto row = domain::make_audit(webhook.get(), st.env.tenant_id, "contact", contact.id,
                                  "record_consent");
    row.fields = {"purpose", "granted", "channel", "source"};
    w.audit.push_back(std::move(row));
    return store_alone(self, std::move(key), std::move(w), std::move(m), contact);
  }
  stage_message(self, std::move(key), std::move(w), std::move(m), contact, answer);
}

// Contact names hold at most 100 characters; a longer provider name is cut at a character
// boundary rather than refused (the message must not be lost over a display name).
std::string clip(std::string_view s) {
  return std::string(domain::utf8_prefix(s, 100));
}

// Inside conv_serial().
void match_then_store(ch_actor* self, std::int64_t channel_id, domain::inbound_message m,
                      int depth) {
  auto& st = self->state;
  auto key = std::make_pair(channel_id, m.external_message_id);
  contact_match_request req;
  if (m.contact.external_id) {
    auto id_key = std::make_pair(channel_id, *m.contact.external_id);
    if (auto staged = st.staged_ids.find(id_key); staged != st.staged_ids.end())
      req.known_id = staged->second.contact;
    else if (auto it = st.identities.find(id_key); it != st.identities.end())
      req.known_id = it->second;
  }
  req.phone = m.contact.phone;
  req.email = m.contact.email;
  auto& f = req.create;
  if (m.contact.name) {
    auto [first, last] = domain::split_name(*m.contact.name);
    f.first_name = clip(first);
    if (last) f.last_name = std::optional<std::string>(clip(*last));
  } else {
    f.first_name = clip(m.contact.phone   ? *m.contact.phone
                        : m.contact.email ? *m.contact.email
                                          : *m.contact.external_id);
  }
  if (m.contact.phone) f.phone = std::optional<std::string>(*m.contact.phone);
  if (m.contact.email) f.email = std::optional<std::string>(*m.contact.email);
  f.source = std::optional<domain::contact_source>(domain::contact_source::api);
  auto k = in_actor<domain::outcome<contact_match>>(
      self, [self, channel_id, key, m, depth](domain::outcome<contact_match> r) mutable {
        if (!r) {
          conv_done(self);
          return answer_inbound(self, key, r.error(), false);
        }
        store_message(self, channel_id, std::move(m), r->contact, depth);
      });
  // A contact created for the message is audited as made by the channel's webhook.
  domain::audit_scope scope(channel_webhook(channel_id));
  match_contact(*st.env.rt->owner, st.env.tenant_id, std::move(req),
                callback<contact_match>(std::move(k)));
}

// One inbound message, parsed: answered with its ack once committed (or as a duplicate).
void receive_one(ch_actor* self, std::int64_t channel_id, domain::inbound_message m, int depth,
                 callback<std::string> reply) {
  auto& st = self->state;
  auto key = std::make_pair(channel_id, m.external_message_id);
  if (auto w = st.storing.find(key); w != st.storing.end()) {
    w->second.push_back(std::move(reply));
    return;
  }
  st.storing[key].push_back(std::move(reply));
  db<std::optional<persistence::stored_inbound>>(
      self,
      // From `key`, not `m`: the next argument moves `m`, and may be made first.
      [channel_id, ext = key.second](persistence::pg_conn& c) {
        return persistence::find_inbound(c, channel_id, ext);
      },
      [self, channel_id, key, m = std::move(m),
       depth](domain::outcome<std::optional<persistence::stored_inbound>> r) mutable {
        if (!r) return answer_inbound(self, key, r.error(), false);
        if (*r) return answer_inbound(self, key, **r, true);
        conv_serial_inbound(self, [self, channel_id, m = std::move(m), depth] {
          match_then_store(self, channel_id, m, depth);
        });
      });
}

// A WhatsApp delivery status: the message moves on (never back). A status for an id no message
// of the channel has yet, while a send is in flight, may be for that send, whose id is not
// stored yet: 503, so the provider posts it again.
void apply_status(ch_actor* self, std::int64_t channel_id, domain::status_update u,
                  callback<domain::done> reply) {
  persistence::delivery_update d;
  d.channel_id = channel_id;
  d.provider_message_id = std::move(u.provider_message_id);
  d.status = std::string(domain::to_string(u.status));
  d.from = domain::delivery_predecessors(u.status);
  d.error = std::move(u.error);
  db<persistence::delivery_applied>(
      self,
      [tid = self->state.env.tenant_id, d](persistence::pg_conn& c) {
        return persistence::apply_delivery(c, tid, d);
      },
      [self, reply](domain::outcome<persistence::delivery_applied> r) {
        if (!r) return reply(r.error());
        if (*r == persistence::delivery_applied::unknown && !self->state.sending.empty())
          return reply(failure::of(errc::service_unavailable,
                                   "a status for a message being sent: post it again"));
        reply(domain::done{});
      });
}

// A WhatsApp webhook POST: its messages are stored as any inbound message is, its statuses
// applied; the answer comes once all are (Meta retries anything else, and a retry finds the
// messages stored already as duplicates).
void receive_whatsapp(ch_actor* self, const domain::channel& ch, const inbound_call& call,
                      callback<std::string> reply) {
  std::vector<domain::issue> issues;
  auto number = ch.config.if_contains("phone_number_id");
  auto batch = domain::whatsapp::parse_webhook(
      call.body, number && number->is_string() ? std::string_view(number->get_string()) : "",
      issues);
  if (!batch) return reply(failure::invalid(std::move(issues)));
  struct tally {
    json::array messages;
    std::size_t statuses = 0, ignored = 0, left = 0;
    std::optional<failure> failed;
    callback<std::string> reply;
  };
  auto t = std::make_shared<tally>();
  t->ignored = batch->ignored;
  t->left = batch->messages.size() + batch->statuses.size() + 1;
  t->reply = std::move(reply);
  auto one_done = [t] {
    if (--t->left > 0) return;
    if (t->failed) return t->reply(*t->failed);
    t->reply(json::serialize(json::object{{"status", "accepted"},
                                          {"messages", std::move(t->messages)},
                                          {"statuses", t->statuses},
                                          {"ignored", t->ignored}}));
  };
  for (auto& m : batch->messages)
    receive_one(self, ch.id, std::move(m), call.depth,
                callback<std::string>([t, one_done](domain::outcome<std::string> r) {
                  if (!r) {
                    if (!t->failed) t->failed = r.error();
                  } else {
                    t->messages.push_back(json::parse(*r));
                  }
                  one_done();
                }));
  for (auto& u : batch->statuses)
    apply_status(self, ch.id, std::move(u),
                 callback<domain::done>([t, one_done](domain::outcome<domain::done> r) {
                   if (!r && !t->failed) t->failed = r.error();
                   if (r) t->statuses++;
                   one_done();
                 }));
  one_done();
}

// A Twilio webhook POST: an incoming message, or a status callback of a message sent. Answered
// with the message's ack, {"status": "applied"} or {"status": "ignored"}.
void receive_sms(ch_actor* self, const domain::channel& ch, const inbound_call& call,
                 callback<std::string> reply) {
  std::vector<domain::issue> issues;
  auto sid = ch.config.if_contains("account_sid");
  auto w = domain::twilio::parse_webhook(
      call.form, sid && sid->is_string() ? std::string_view(sid->get_string()) : "", issues);
  if (!w) return reply(failure::invalid(std::move(issues)));
  if (w->message) return receive_one(self, ch.id, std::move(*w->message), call.depth, reply);
  if (!w->status) return reply(std::string(R"({"status":"ignored"})"));
  apply_status(self, ch.id, std::move(*w->status),
               callback<domain::done>([reply](domain::outcome<domain::done> r) {
                 if (!r) return reply(r.error());
                 reply(std::string(R"({"status":"applied"})"));
               }));
}

// An e-mail a Mailgun route forwarded: stored as any inbound message, joining the conversation
// it answers.
void receive_email(ch_actor* self, const domain::channel& ch, const inbound_call& call,
                   callback<std::string> reply) {
  std::vector<domain::issue> issues;
  auto mail = domain::email::parse_inbound(call.form, call.files, issues);
  if (!mail) return reply(failure::invalid(std::move(issues)));
  mail->message.subject = std::move(mail->subject);
  mail->message.conversation_hint = mail->conversation;
  receive_one(self, ch.id, std::move(mail->message), call.depth, std::move(reply));
}

void on_inbound(ch_actor* self, std::int64_t channel_id, inbound_call call,
                callback<std::string> reply) {
  auto& st = self->state;
  auto it = st.channels.find(channel_id);
  if (it == st.channels.end()) return reply(failure::of(errc::not_found, "channel not found"));
  auto& ch = it->second;
  if (call.kind == inbound_kind::whatsapp) {
    // Meta signs the body with the app's secret; the channel has no webhook_secret to present.
    if (ch.type != domain::channel_type::whatsapp)
      return reply(failure::of(errc::not_found, "not a WhatsApp channel"));
    auto secret = ch.config.if_contains("app_secret");
    if (!secret || !secret->is_string() ||
        !domain::whatsapp::signature_matches(std::string_view(secret->get_string()), call.body,
                                             call.secret))
      return reply(failure::of(errc::invalid_credentials, "missing or wrong X-Hub-Signature-256"));
    if (!ch.is_active) return reply(failure::of(errc::conflict, "the channel is inactive"));
    return receive_whatsapp(self, ch, call, std::move(reply));
  }
  if (call.kind == inbound_kind::sms) {
    if (ch.type != domain::channel_type::sms)
      return reply(failure::of(errc::not_found, "not an SMS channel"));
    auto token = ch.config.if_contains("auth_token");
    if (!token || !token->is_string() ||
        !domain::twilio::signature_matches(std::string_view(token->get_string()), call.url,
                                           call.form, call.secret))
      return reply(failure::of(errc::invalid_credentials, "missing or wrong X-Twilio-Signature"));
    if (!ch.is_active) return reply(failure::of(errc::conflict, "the channel is inactive"));
    return receive_sms(self, ch, call, std::move(reply));
  }
  if (call.kind == inbound_kind::email) {
    if (ch.type != domain::channel_type::email)
      return reply(failure::of(errc::not_found, "not an e-mail channel"));
    auto key = ch.config.if_contains("inbound_signing_key");
    auto field = [&](std::string_view name) {
      for (auto& [k, v] : call.form)
        if (k == name) return std::string_view(v);
      return std::string_view();
    };
    if (!key || !key->is_string() ||
        !domain::email::signature_matches(std::string_view(key->get_string()), field("timestamp"),
                                          field("token"), field("signature")))
      return reply(failure::of(errc::invalid_credentials, "missing or wrong Mailgun signature"));
    if (!ch.is_active) return reply(failure::of(errc::conflict, "the channel is inactive"));
    return receive_email(self, ch, call, std::move(reply));
  }
  // A channel without a secret never matches; the comparison is made all the same, so the
  // answer takes as long as for a wrong secret.
  auto& keys = st.env.pool->keys();
  auto match = keys.verify(webhook_secret_purpose, st.env.tenant_id, call.secret,
                           ch.webhook_secret.value_or(std::string()));
  if (match == domain::secret_keys::match::no || !ch.webhook_secret)
    return reply(failure::of(errc::invalid_credentials, "missing or wrong webhook secret"));
  if (match == domain::secret_keys::match::yes_rehash)
    rehash_secret(self, ch.id, *ch.webhook_secret,
                  keys.hash(webhook_secret_purpose, st.env.tenant_id, call.secret));
  if (!ch.is_active) return reply(failure::of(errc::conflict, "the channel is inactive"));
  std::vector<domain::issue> issues;
  std::optional<domain::inbound_message> m;
  if (call.kind == inbound_kind::telegram) {
    bool ignored = false;
    m = domain::parse_telegram_update(call.body, ignored, issues);
    if (ignored) return reply(std::string(R"({"status":"ignored"})"));
  } else {
    m = domain::parse_api_inbound(call.body, issues);
  }
  if (!m) return reply(failure::invalid(std::move(issues)));
  receive_one(self, channel_id, std::move(*m), call.depth, std::move(reply));
}

// Hands the open inbound batch to the group committer when none is in flight (docs/channels.md
// "Inbound group commit").
void flush_inbound(ch_actor* self) {
  flush_open_batch(
      self,
      [self](const inbound_open& done, const persistence::inbound_batch& sql) {
        auto& st = self->state;
        for (auto& c : sql.conversations) keep_conversation(st, c);
        for (auto& i : sql.identities)
          remember_identity(st, i.channel_id, i.external_id, i.contact_id);
        std::erase_if(st.staged, [&](const auto& kv) { return kv.second.seq == done.seq; });
        std::erase_if(st.staged_ids, [&](const auto& kv) { return kv.second.seq == done.seq; });
      },
      [self](const failure& f) {
        auto& st = self->state;
        st.staged.clear();
        st.staged_ids.clear();
        if (f.code == errc::service_unavailable) st.stale = true;
      },
      [self] {
        auto& st = self->state;
        flush_inbound(self);
        if (inbound_drained(st)) {
          auto waiting = std::move(st.after_drain);
          st.after_drain.clear();
          for (auto& k : waiting) k();
        }
        settle(self);
      });
}

// ---- outbound ------------------------------------------------------------------------------

void record(ch_actor* self, persistence::send_outcome o, persistence::queued_message m) {
  db<domain::done>(
      self,
      [tid = self->state.env.tenant_id, o](persistence::pg_conn& c) {
        persistence::record_send(c, tid, o);
        return domain::done{};
      },
      [self, o, m](domain::outcome<domain::done> r) mutable {
        auto& st = self->state;
        st.sending.erase(m.id);
        if (!r) {
          // Not recorded: it is still queued in Postgres; try the whole send again later.
          log_warn("tenant {}: message {} send outcome not stored ({})", st.env.tenant_id, m.id,
                   r.error().detail);
          if (!st.stopping) {
            m.next_attempt_at = domain::now_micros() + 5'000'000;
            schedule_send(self, m);
          }
          return;
        }
        if (o.status == "sent") automation_counts().messages_sent++;
        if (o.status == "failed") automation_counts().messages_failed++;
        if (o.status == "queued" && !st.stopping) {
          m.attempts = o.attempts;
          m.next_attempt_at = o.next_attempt_at;
          schedule_send(self, m);
        }
      });
}

// An e-mail: its thread (the contact's last mail in the conversation) is read first, so the
// reply answers it (In-Reply-To, References, "Re: " its subject); then the SMTP server takes it.
// `finish(sent, error, id, retry)` records the attempt; the mail's Message-ID is the message's
// external id.
template <class Finish>
void send_email(ch_actor* self, domain::outbound_message out, domain::channel channel,
                Finish finish) {
  auto& st = self->state;
  db<std::pair<std::string, std::string>>(
      self,
      [tid = st.env.tenant_id, conv = out.conversation_id](persistence::pg_conn& c) {
        return persistence::last_inbound_of(c, tid, conv);
      },
      [self, out, channel, finish](domain::outcome<std::pair<std::string, std::string>> r) {
        if (!r) return finish(false, r.error().detail, std::nullopt, true);
        auto plan = domain::email::plan_send(channel, out, {r->first, r->second});
        if (!plan.m) return finish(false, plan.error, std::nullopt, false);
        auto smtp = self->state.opts ? self->state.opts->smtp : nullptr;
        if (!smtp) return finish(false, "e-mail is not set up on this server", std::nullopt, false);
        auto& p = *plan.m;
        net::smtp_message mail;
        mail.host = p.host;
        mail.port = p.port;
        mail.security = p.security == "tls"    ? net::smtp_security::tls
                        : p.security == "none" ? net::smtp_security::none
                                               : net::smtp_security::starttls;
        mail.username = p.username;
        mail.password = p.password;
        mail.from = p.from;
        mail.from_name = p.from_name;
        mail.to = p.to;
        mail.subject = p.subject;
        mail.text = p.text;
        mail.html = p.html;
        mail.message_id = p.message_id;
        mail.in_reply_to = p.in_reply_to;
        mail.references = p.references;
        smtp->send(
            std::move(mail), in_actor<net::smtp_result>(self, [finish, id = p.message_id](
                                                                  net::smtp_result res) mutable {
              finish(res.sent, res.error, res.sent ? std::optional(id) : std::nullopt, res.retry);
            }));
      });
}

void attempt_send(ch_actor* self, persistence::queued_message m) {
  auto& st = self->state;
  if (st.stopping || st.sending.count(m.id)) return;
  st.sending.insert(m.id);
  auto fail_now = [self, m](std::string error) {
    persistence::send_outcome o;
    o.message_id = m.id;
    o.status = "failed";
    o.attempts = m.attempts + 1;
    o.error = std::move(error);
    record(self, o, m);
  };
  auto ch = st.channels.find(m.channel_id);
  if (ch == st.channels.end()) return fail_now("the channel was deleted");
  // Checked again as it leaves: a consent withdrawn since the message was queued wins.
  auto refused = consent_refusal(st, m.contact_id, m.purpose, m.channel_id);
  if (!refused && m.from_agent)
    refused =
        consent_refusal(st, m.contact_id, domain::consent_purpose::ai_processing, m.channel_id);
  if (refused) return fail_now(*refused);
  if (!st.opts || !st.opts->client) return fail_now("outbound HTTP is not set up");
  domain::outbound_message out;
  out.message_id = m.id;
  out.conversation_id = m.conversation_id;
  out.contact_id = m.contact_id;
  out.channel_id = m.channel_id;
  out.text = m.text;
  out.created_at = m.created_at;
  out.template_json = m.template_json;
  if (ch->second.type == domain::channel_type::sms)
    out.callback_url =
        public_url(st) + "/api/v1/channels/" + std::to_string(m.channel_id) + "/sms/webhook";
  if (auto chat = st.chats.find({m.channel_id, m.contact_id}); chat != st.chats.end())
    out.external_id = chat->second;
  auto channel = ch->second;
  // The contact's phone and e-mail come from the contacts actor, which owns them.
  auto k = in_actor<domain::outcome<std::vector<domain::contact>>>(
      self, [self, m, out, channel](domain::outcome<std::vector<domain::contact>> r) mutable {
        if (r && !r->empty()) {
          out.phone = r->front().phone;
          out.email = r->front().email;
        }
        auto& st = self->state;
        auto finish = [self, m](bool sent, std::string error, std::optional<std::string> id,
                                bool retry = true) {
          persistence::send_outcome o;
          o.message_id = m.id;
          o.attempts = m.attempts + 1;
          o.provider_message_id = std::move(id);
          if (sent) {
            o.status = "sent";
          } else {
            o.error = std::move(error);
            if (retry && o.attempts < max_send_attempts) {
              o.status = "queued";
              o.next_attempt_at = domain::now_micros() +
                                  retry_delays_ms[static_cast<std::size_t>(
                                      std::min<int>(o.attempts - 1, retry_delays_ms.size() - 1))] *
                                      1000;
            } else {
              o.status = "failed";
            }
          }
          record(self, o, m);
        };
        if (channel.type == domain::channel_type::email)
          return send_email(self, std::move(out), channel, finish);
        auto plan = domain::plan_outbound(channel, out, domain::now_seconds());
        // A channel that cannot send at all (no adapter, not configured) fails at once.
        if (!plan.request) {
          persistence::send_outcome o;
          o.message_id = m.id;
          o.status = "failed";
          o.attempts = m.attempts + 1;
          o.error = plan.error;
          return record(self, o, m);
        }
        net::client_request req;
        req.method = plan.request->method;
        req.url = plan.request->url;
        req.headers = plan.request->headers;
        req.body = plan.request->body;
        auto done = in_actor<net::client_response>(
            self, [finish, type = channel.type](net::client_response res) mutable {
              if (!res.ok) return finish(false, res.error, std::nullopt);
              auto result = domain::read_outbound_response(type, res.status, res.body);
              finish(result.sent, result.error, result.provider_message_id, result.retry);
            });
        st.opts->client->send(std::move(req), std::move(done));
      });
  fetch_contacts(*st.env.rt->owner, st.env.tenant_id, {m.contact_id},
                 callback<std::vector<domain::contact>>(std::move(k)));
}

// Inside conv_serial(): every way out calls conv_done.
void do_send(ch_actor* self, outbound_request req, callback<std::string> reply_to) {
  auto& st = self->state;
  if (!ids_ready(
          self, [self, req, reply_to] { do_send(self, req, reply_to); },
          [self, reply_to](const failure& f) { reply_to(f); }))
    return;
  auto reply = [self, reply_to](domain::outcome<std::string> r) {
    conv_done(self);
    reply_to(std::move(r));
  };
  auto missing = [self, reply_to](std::int64_t id) {
    conv_done(self);
    missing_conversation(self, id, reply_to);
  };
  const domain::conversation* conv = nullptr;
  domain::conversation opened; // a conversation this message opens
  if (req.conversation_id) {
    auto it = st.conversations.find(*req.conversation_id);
    if (it == st.conversations.end()) return missing(*req.conversation_id);
    conv = &it->second;
  } else if (req.contact_id) {
    conv = latest_conversation(st, *req.contact_id, req.channel_id, [](auto&) { return true; });
    if (!conv && req.open_conversation && req.channel_id) {
      // Written first by carecrm (an appointment's reminder to a patient who never wrote in):
      // only where the channel can reach the patient without a message of theirs.
      auto ch = st.channels.find(*req.channel_id);
      if (ch == st.channels.end()) return reply(failure::of(errc::not_found, "channel not found"));
      std::optional<std::string> chat;
      if (auto c = st.chats.find({*req.channel_id, *req.contact_id}); c != st.chats.end())
        chat = c->second;
      if (auto why = domain::cannot_write_first(ch->second, chat))
        return reply(failure::of(errc::not_found,
                                 "the contact has no conversation on the channel, and carecrm "
                                 "cannot open one: " +
                                     *why));
      auto now = domain::now_micros();
      opened.id = take(st.conversation_ids);
      opened.tenant_id = st.env.tenant_id;
      opened.channel_id = *req.channel_id;
      opened.contact_id = *req.contact_id;
      opened.created_at = now;
      opened.updated_at = now;
      conv = &opened;
    }
    if (!conv)
      return reply(failure::of(errc::not_found, "the contact has no conversation to answer in"));
  } else {
    return reply(failure::of(errc::not_found, "no conversation"));
  }
  auto ch = st.channels.find(conv->channel_id);
  if (ch == st.channels.end()) return reply(failure::of(errc::not_found, "channel not found"));
  if (!ch->second.is_active) return reply(failure::of(errc::conflict, "the channel is inactive"));
  if (auto refused = consent_refusal(st, conv->contact_id, req.purpose, conv->channel_id))
    return reply(failure::of(errc::conflict, *refused));
  auto now = domain::now_micros();
  if (!req.template_json.empty() && ch->second.type != domain::channel_type::whatsapp)
    return reply(failure::of(errc::conflict, "templates are sent on WhatsApp channels only"));
  if (ch->second.type == domain::channel_type::whatsapp && req.template_json.empty() &&
      domain::whatsapp::outside_window(conv->last_inbound_at, now))
    return reply(failure::of(errc::conflict,
                             "outside WhatsApp's 24-hour window (the contact last wrote more than "
                             "24 hours ago, or never): only an approved template may be sent"));
  persistence::outbound_write w;
  w.tenant_id = st.env.tenant_id;
  w.conversation = *conv;
  w.new_conversation = conv == &opened;
  if (w.conversation.status == domain::conversation_status::closed)
    domain::set_status(w.conversation, domain::conversation_status::open, now);
  if (req.sender_user_id) domain::person_replied(w.conversation, now);
  w.conversation.last_message_at = now;
  w.conversation.updated_at = std::max(now, conv->updated_at + 1);
  // A person answering takes the conversation back from the hand-off: agents may answer again.
  if (req.sender_user_id) w.conversation.ai_paused = false;
  w.text = std::move(req.text);
  w.sender_user_id = req.sender_user_id;
  w.purpose = req.purpose;
  w.created_at = now;
  w.message_id = take(st.message_ids);
  w.reminder = req.reminder;
  w.template_json = std::move(req.template_json);
  if (ch->second.type == domain::channel_type::sms)
    w.segments = domain::twilio::count_segments(w.text).count;
  w.audit.push_back(
      conversation_row(reply_to.who(), st, w.conversation, "send_message", {"text"}, 201));
  db<persistence::outbound_written>(
      self, [w](persistence::pg_conn& c) { return persistence::store_outbound(c, w); },
      [self, reply_to, reminder = w.reminder ? std::optional(w.reminder->start) : std::nullopt,
       conv_after = w.conversation](domain::outcome<persistence::outbound_written> r) {
        if (r && r->duplicate) {
          conv_done(self);
          return reply_to(failure::of(errc::conflict, std::string(reminder_sent_already)));
        }
        // The outcome unknown (the connection lost at COMMIT): the conversation, and a reminder's
        // row, may be stored or not; read the state again before the next step.
        if (!r && r.error().code == errc::service_unavailable) self->state.stale = true;
        if (r) keep_conversation(self->state, conv_after);
        if (r && reminder) {
          auto& latest = self->state.reminded[conv_after.id];
          latest = std::max(latest, *reminder);
        }
        conv_done(self);
        if (!r) return reply_to(r.error());
        reply_to(r->json);
        attempt_send(self, r->message);
      });
}

// ---- conversations -------------------------------------------------------------------------

// Inside conv_serial().
void save_conv(ch_actor* self, domain::conversation next, callback<std::string> reply,
               const char* action, std::vector<std::string> fields) {
  std::vector audit{
      conversation_row(reply.who(), self->state, next, action, std::move(fields), 200)};
  db<domain::done>(
      self,
      [next, audit = std::move(audit)](persistence::pg_conn& c) {
        persistence::save_conversation(c, next, audit);
        return domain::done{};
      },
      [self, next, reply](domain::outcome<domain::done> r) {
        if (r) keep_conversation(self->state, next);
        conv_done(self);
        if (!r) return reply(r.error());
        reply(json::serialize(domain::conversation_to_json(next)));
      });
}

// PATCH /conversations/{id}, inside conv_serial(): an assignee must be an active user of the
// tenant (looked up first), then the conversation as it is now gets the changes.
void patch_conversation(ch_actor* self, std::int64_t id, conversation_patch p,
                        callback<std::string> reply) {
  auto& st = self->state;
  if (!st.conversations.count(id)) {
    conv_done(self);
    return missing_conversation(self, id, reply);
  }
  auto apply = [self, id, p, reply] {
    auto& convs = self->state.conversations;
    auto it = convs.find(id);
    if (it == convs.end()) {
      conv_done(self);
      return reply(failure::of(errc::not_found, "conversation not found"));
    }
    auto next = it->second;
    auto now = domain::now_micros();
    if (p.status) domain::set_status(next, *p.status, now);
    if (p.assignee_id) next.assignee_id = *p.assignee_id;
    if (p.ai_paused) next.ai_paused = *p.ai_paused;
    next.updated_at = std::max(domain::now_micros(), next.updated_at + 1);
    std::vector<std::string> fields;
    if (p.status) fields.emplace_back("status");
    if (p.assignee_id) fields.emplace_back("assignee_id");
    if (p.ai_paused) fields.emplace_back("ai_paused");
    save_conv(self, std::move(next), reply, "update", std::move(fields));
  };
  if (!p.assignee_id || !*p.assignee_id) return apply();
  db<bool>(
      self,
      [tid = st.env.tenant_id, user = **p.assignee_id](persistence::pg_conn& c) {
        return persistence::active_user_of(c, tid, user);
      },
      [self, reply, apply](domain::outcome<bool> r) {
        if (r && *r) return apply();
        conv_done(self);
        if (!r) return reply(r.error());
        reply(failure::invalid({{{"body", "assignee_id"},
                                 "assignee_id must be an active user of the tenant",
                                 "value_error"}}));
      });
}

// ---- AI agents' replies ----------------------------------------------------------------------

// Inside conv_serial(): applies an agent's decision to the conversation as it is now.
void apply_agent_reply(ch_actor* self, agent_reply a, callback<std::string> reply_to) {
  auto& st = self->state;
  if (!ids_ready(
          self, [self, a, reply_to] { apply_agent_reply(self, a, reply_to); },
          [self, reply_to](const failure& f) { reply_to(f); }))
    return;
  auto reply = [self, reply_to](domain::outcome<std::string> r) {
    conv_done(self);
    reply_to(std::move(r));
  };
  auto it = st.conversations.find(a.conversation_id);
  if (it == st.conversations.end())
    return reply(failure::of(errc::not_found, "conversation not found"));
  auto& conv = it->second;
  auto ch = st.channels.find(conv.channel_id);
  // Consent withdrawn since the agent was asked (or never given, for a workflow's ai_reply):
  // nothing of its answer is sent and a person takes the conversation.
  auto refused =
      consent_refusal(st, conv.contact_id, domain::consent_purpose::ai_processing, conv.channel_id);
  if (!refused)
    refused = consent_refusal(st, conv.contact_id, domain::consent_purpose::treatment_communication,
                              conv.channel_id);
  if (refused) {
    a.text.reset();
    a.handoff_reason = *refused;
  }
  auto now = domain::now_micros();
  persistence::agent_reply_write w;
  w.tenant_id = st.env.tenant_id;
  w.agent_id = a.agent_id;
  w.conversation = conv;
  w.message_id = a.message_id;
  w.intent = a.intent;
  w.handoff = a.handoff_reason.has_value();
  w.handoff_reason = a.handoff_reason;
  w.passages = a.passages;
  w.provider = a.provider;
  w.prompt_tokens = a.prompt_tokens;
  w.completion_tokens = a.completion_tokens;
  w.latency_ms = a.latency_ms;
  w.error = a.error;
  w.created_at = now;
  w.depth = a.depth;
  w.auto_reply = a.auto_reply;
  {
    // The agent read the patient's message and decided: audited as the agent's doing.
    auto agent = std::make_shared<domain::audit_context>();
    agent->actor = domain::audit_actor::agent;
    agent->actor_ref = "agent:" + std::to_string(a.agent_id);
    auto row = conversation_row(agent.get(), st, conv,
                                a.handoff_reason ? "agent_handoff" : "agent_reply", {"text"}, 0);
    w.audit.push_back(std::move(row));
  }
  // Handed to a person since this message arrived: the agent no longer speaks in it.
  w.dropped = conv.ai_paused;
  auto& next = w.conversation;
  if (!w.dropped) {
    bool can_send = ch != st.channels.end() && ch->second.is_active;
    if (a.text && can_send) {
      w.texts.push_back(*a.text);
      next.last_message_at = now;
      if (next.status == domain::conversation_status::closed)
        next.status = domain::conversation_status::open;
    }
    if (a.handoff_reason) {
      next.status = domain::conversation_status::pending;
      next.ai_paused = true;
      next.handoff_reason = a.handoff_reason;
      if (a.assignee_id) next.assignee_id = a.assignee_id;
    }
    next.updated_at = std::max(now, conv.updated_at + 1);
    json::object payload{{"agent_id", a.agent_id},        {"conversation_id", conv.id},
                         {"channel_id", conv.channel_id}, {"contact_id", conv.contact_id},
                         {"message_id", a.message_id},    {"intent", a.intent},
                         {"handoff", w.handoff},          {"tenant_id", st.env.tenant_id}};
    payload["handoff_reason"] =
        a.handoff_reason ? json::value(*a.handoff_reason) : json::value(nullptr);
    payload["assignee_id"] = next.assignee_id ? json::value(*next.assignee_id) : json::value();
    json::array passages;
    for (auto p : a.passages) passages.push_back(p);
    payload["passages"] = std::move(passages);
    w.event_payload = json::serialize(payload);
  }
  for (std::size_t i = 0; i < w.texts.size(); ++i) w.message_ids.push_back(take(st.message_ids));
  db<persistence::agent_reply_written>(
      self, [w](persistence::pg_conn& c) { return persistence::store_agent_reply(c, w); },
      [self, reply, w](domain::outcome<persistence::agent_reply_written> r) {
        if (!r) return reply(r.error());
        if (r->duplicate)
          return reply(std::string(R"({"reply_id":null,"message_ids":[],"dropped":true})"));
        if (!w.dropped) {
          auto& st = self->state;
          keep_conversation(st, w.conversation);
          // ai.replied / ai.handoff wait in the outbox for webhook subscriptions.
          st.env.rt->route(st.env.tenant_id, child_kind::workflows,
                           caf::make_message(outbox_atom::value));
        }
        json::array ids;
        for (auto& m : r->messages) ids.push_back(m.id);
        reply(json::serialize(json::object{
            {"reply_id", r->reply_id}, {"message_ids", std::move(ids)}, {"dropped", w.dropped}}));
        for (auto& m : r->messages) attempt_send(self, m);
      });
}

caf::behavior channels_behavior(ch_actor* self, tenant_env env) {
  auto& st = self->state;
  st.env = env;
  st.opts = automation_options_of(*env.rt);
  auto measure = instrument(self, child_kind::channels);
  load(self); // queued outbound messages resume at once
  return {
      [self, measure](resume_atom, continuation& k) {
        auto _ = measure();
        k();
      },
      [self, measure](wake_atom) {
        auto _ = measure();
        when_loaded(
            self, [](const failure&) {}, [] {});
      },
      [self](retry_atom, persistence::queued_message& m) { attempt_send(self, std::move(m)); },
      [self, measure](list_atom, channel_filter& f, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, f, reply] {
          auto& st = self->state;
          reply(domain::render_newest_first(
              st.channels,
              [&f](const domain::channel& c) {
                return (!f.type || c.type == *f.type) &&
                       (!f.is_active || c.is_active == *f.is_active);
              },
              [&st](const domain::channel& c) {
                return domain::channel_to_json(c, public_url(st));
              },
              f.page, f.per_page));
        });
      },
      [self, measure](get_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          auto& st = self->state;
          auto it = st.channels.find(id);
          if (it == st.channels.end()) return missing_channel(self, id, reply);
          reply(json::serialize(domain::channel_to_json(it->second, public_url(st))));
        });
      },
      [self, measure](create_atom, domain::channel& c, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, c = std::move(c), reply]() mutable {
          write_in_turn(self, reply, [self, c = std::move(c)](callback<std::string> reply) mutable {
            c.id = 0;
            c.tenant_id = self->state.env.tenant_id;
            c.created_at = c.updated_at = domain::now_micros();
            c.webhook_secret = hashed_secret(self, c.webhook_secret);
            save_channel(self, std::move(c), reply);
          });
        });
      },
      [self, measure](update_atom, std::int64_t id, channel_patch& p,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, p = std::move(p), reply] {
          write_in_turn(self, reply, [self, id, p](callback<std::string> reply) {
            auto& st = self->state;
            auto it = st.channels.find(id);
            if (it == st.channels.end()) return missing_channel(self, id, reply);
            auto next = it->second;
            if (p.type && *p.type != next.type)
              return reply(failure::of(errc::conflict, "a channel's type cannot change"));
            if (p.config) {
              std::vector<domain::issue> issues;
              auto cfg = domain::parse_channel_config(next.type, *p.config, &next.config, issues);
              if (!cfg) return reply(failure::invalid(std::move(issues)));
              next.config = std::move(*cfg);
            }
            if (p.name) next.name = *p.name;
            if (p.webhook_secret) next.webhook_secret = hashed_secret(self, *p.webhook_secret);
            if (p.is_active) next.is_active = *p.is_active;
            next.updated_at = std::max(domain::now_micros(), it->second.updated_at + 1);
            save_channel(self, std::move(next), reply);
          });
        });
      },
      [self, measure](delete_atom, std::int64_t id, callback<domain::done>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          write_in_turn(self, reply, [self, id](callback<domain::done> reply) {
            if (!self->state.channels.count(id)) return missing_channel(self, id, reply);
            db<domain::done>(
                self,
                [tid = self->state.env.tenant_id, id](persistence::pg_conn& c) {
                  persistence::delete_channel(c, tid, id);
                  return domain::done{};
                },
                [self, id, reply](domain::outcome<domain::done> r) {
                  auto& st = self->state;
                  if (r) {
                    st.channels.erase(id);
                    std::erase_if(st.conversations,
                                  [id](auto& kv) { return kv.second.channel_id == id; });
                    for (auto& [contact, ids] : st.by_contact)
                      std::erase_if(ids,
                                    [&st](std::int64_t c) { return !st.conversations.count(c); });
                    std::erase_if(st.identities, [id](auto& kv) { return kv.first.first == id; });
                    std::erase_if(st.chats, [id](auto& kv) { return kv.first.first == id; });
                  }
                  reply(std::move(r));
                });
          });
        });
      },
      [self, measure](inbound_atom, std::int64_t channel_id, inbound_call& call,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply),
                    [self, channel_id, call = std::move(call), reply]() mutable {
                      on_inbound(self, channel_id, std::move(call), reply);
                    });
      },
      [self, measure](hub_atom, std::int64_t channel_id, hub_verification& v,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, channel_id, v, reply] {
          auto it = self->state.channels.find(channel_id);
          if (it == self->state.channels.end() || it->second.type != domain::channel_type::whatsapp)
            return reply(failure::of(errc::not_found, "no such WhatsApp channel"));
          auto token = it->second.config.if_contains("verify_token");
          if (!token || !token->is_string() ||
              !domain::whatsapp::verification_accepted(v.mode, v.token,
                                                       std::string_view(token->get_string())))
            return reply(failure::of(errc::insufficient_permissions,
                                     "hub.mode must be subscribe and hub.verify_token the "
                                     "channel's verify_token"));
          reply(v.challenge);
        });
      },
      [self, measure](tmpl_atom, std::int64_t channel_id, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, channel_id, reply] {
          auto& st = self->state;
          auto it = st.channels.find(channel_id);
          if (it == st.channels.end()) return missing_channel(self, channel_id, reply);
          if (it->second.type != domain::channel_type::whatsapp)
            return reply(failure::of(errc::conflict, "templates are WhatsApp's"));
          auto plan = domain::whatsapp::plan_list_templates(it->second);
          if (!plan.request) return reply(failure::of(errc::conflict, plan.error));
          if (!st.opts || !st.opts->client)
            return reply(failure::of(errc::service_unavailable, "outbound HTTP is not set up"));
          net::client_request req;
          req.method = plan.request->method;
          req.url = plan.request->url;
          req.headers = plan.request->headers;
          st.opts->client->send(
              std::move(req),
              in_actor<net::client_response>(self, [reply](net::client_response res) {
                if (!res.ok)
                  return reply(failure::of(errc::service_unavailable, "whatsapp: " + res.error));
                reply(domain::whatsapp::read_templates(res.status, res.body));
              }));
        });
      },
      [self, measure](conv_atom, list_atom, conversation_filter& f, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, f, reply] {
          std::vector<const domain::conversation*> found;
          for (auto& [id, c] : self->state.conversations) {
            if (f.status && c.status != *f.status) continue;
            if (f.channel_id && c.channel_id != *f.channel_id) continue;
            if (f.contact_id && c.contact_id != *f.contact_id) continue;
            if (f.assignee_id && c.assignee_id != f.assignee_id) continue;
            if (f.team_id && c.team_id != f.team_id) continue;
            found.push_back(&c);
          }
          std::sort(found.begin(), found.end(), [](auto a, auto b) {
            return a->last_message_at != b->last_message_at
                       ? a->last_message_at > b->last_message_at
                       : a->id > b->id;
          });
          std::vector<json::value> all;
          for (auto c : found) all.emplace_back(domain::conversation_to_json(*c));
          reply(domain::render_page_of(std::move(all), f.page, f.per_page));
        });
      },
      [self, measure](conv_atom, get_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          auto& convs = self->state.conversations;
          auto it = convs.find(id);
          if (it == convs.end()) return missing_conversation(self, id, reply);
          reply(json::serialize(domain::conversation_to_json(it->second)));
        });
      },
      [self, measure](conv_atom, update_atom, std::int64_t id, conversation_patch& p,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, p, reply] {
          conv_serial(self, fail_with(reply),
                      [self, id, p, reply] { patch_conversation(self, id, p, reply); });
        });
      },
      [self, measure](conv_atom, read_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          conv_serial(self, fail_with(reply), [self, id, reply] {
            auto& convs = self->state.conversations;
            auto it = convs.find(id);
            if (it == convs.end()) {
              conv_done(self);
              return missing_conversation(self, id, reply);
            }
            auto next = it->second;
            next.unread_count = 0;
            next.updated_at = std::max(domain::now_micros(), next.updated_at + 1);
            save_conv(self, std::move(next), reply, "mark_read", {"unread_count"});
          });
        });
      },
      [self, measure](msgs_atom, std::int64_t id, int page, int per_page,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, page, per_page, reply] {
          auto& st = self->state;
          if (!st.conversations.count(id)) return missing_conversation(self, id, reply);
          st.env.pool->run<std::string>(
              [tid = st.env.tenant_id, id, page, per_page](persistence::pg_conn& c) {
                return persistence::messages_page_json(c, tid, id, page, per_page);
              },
              [reply](domain::outcome<std::string> r) { reply(std::move(r)); });
        });
      },
      [self, measure](send_atom, outbound_request& req, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, req = std::move(req), reply]() mutable {
          conv_serial(self, fail_with(reply), [self, req, reply] { do_send(self, req, reply); });
        });
      },
      [self, measure](agent_atom, agent_reply& a, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, a = std::move(a), reply]() mutable {
          conv_serial(self, fail_with(reply),
                      [self, a, reply] { apply_agent_reply(self, a, reply); });
        });
      },
      [self, measure](consent_atom, domain::consent& c, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, c = std::move(c), reply]() mutable {
          auto& st = self->state;
          c.tenant_id = st.env.tenant_id;
          c.recorded_at = domain::now_micros();
          if (c.channel_id && !st.channels.count(*c.channel_id))
            return reply(failure::invalid({{{std::string("body"), std::string("channel")},
                                            "channel not found in this tenant",
                                            "value_error"}}));
          db<domain::consent>(
              self,
              [c, audit = std::vector{consent_row(reply.who(), self->state.env.tenant_id, c)}](
                  persistence::pg_conn& conn) {
                return persistence::insert_consent(conn, c, audit);
              },
              [self, reply](domain::outcome<domain::consent> r) {
                if (!r) return reply(r.error());
                // In memory before the answer: a send that follows it is checked against it.
                self->state.consents[r->contact_id].push_back(*r);
                reply(json::serialize(domain::consent_to_json(*r)));
              });
        });
      },
      [self, measure](erase_atom, std::int64_t contact, callback<std::int64_t>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, contact, reply] {
          conv_serial(self, fail_with(reply), [self, contact, reply] {
            db<std::int64_t>(
                self,
                [tid = self->state.env.tenant_id, contact](persistence::pg_conn& c) {
                  return persistence::erase_messaging(c, tid, contact);
                },
                [self, contact, reply](domain::outcome<std::int64_t> r) {
                  if (r) forget_contact(self->state, contact);
                  conv_done(self);
                  reply(std::move(r));
                });
          });
        });
      },
      [self, measure](allow_atom, std::int64_t contact, domain::consent_purpose purpose,
                      callback<domain::done>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, contact, purpose, reply] {
          auto& st = self->state;
          // Channel 0 has no records of its own: the "any" records decide there; then every
          // channel the contact has a record for.
          std::set<std::int64_t> channels{0};
          for (auto& c : consents_of(st, contact))
            if (c.channel_id) channels.insert(*c.channel_id);
          for (auto channel : channels)
            if (auto refused = consent_refusal(st, contact, purpose, channel))
              return reply(failure::of(errc::conflict, *refused));
          reply(domain::done{});
        });
      },
      [self, measure](consent_atom, get_atom, std::int64_t contact, std::int64_t id,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, contact, id, reply] {
          for (auto& c : consents_of(self->state, contact))
            if (c.id == id) return reply(json::serialize(domain::consent_to_json(c)));
          reply(failure::of(errc::not_found, "consent not found"));
        });
      },
      [self, measure](consent_atom, list_atom, std::int64_t contact, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, contact, reply] {
          auto& history = consents_of(self->state, contact);
          json::array items;
          for (auto c = history.rbegin(); c != history.rend(); ++c)
            items.push_back(domain::consent_to_json(*c));
          // What the history allows on a channel that has no record of its own.
          json::object allowed;
          for (auto p :
               {domain::consent_purpose::treatment_communication,
                domain::consent_purpose::appointment_reminders, domain::consent_purpose::marketing,
                domain::consent_purpose::ai_processing, domain::consent_purpose::data_sharing})
            allowed[domain::to_string(p)] = !domain::consent_refusal(history, p, 0);
          json::object o{{"contact_id", contact},
                         {"total", static_cast<std::int64_t>(items.size())}};
          o["items"] = std::move(items);
          o["allowed"] = std::move(allowed);
          reply(json::serialize(o));
        });
      },
      [self, measure](report_atom, std::int64_t from, std::int64_t to, std::string& group_by,
                      callback<std::string>& reply) {
        auto _ = measure();
        persistence::conversation_report_query q{from, to, std::move(group_by)};
        self->state.env.pool->run<std::string>(
            [tid = self->state.env.tenant_id, q](persistence::pg_conn& c) {
              return persistence::conversation_report(c, tid, q);
            },
            [reply](domain::outcome<std::string> r) { reply(std::move(r)); });
      },
      [self, measure](routes_atom, inbox_routes& r) {
        auto _ = measure();
        // After the load, whose read may predate this change.
        when_loaded(
            self, [](const failure&) {},
            [self, r = std::move(r)]() mutable { self->state.inbox = std::move(r); });
      },
      [self, measure](aichan_atom, std::vector<std::int64_t>& channels) {
        auto _ = measure();
        auto& st = self->state;
        st.ai_channels.clear();
        st.ai_channels.insert(channels.begin(), channels.end());
      },
      [self](listeners_atom, bool any) {
        self->state.event_listeners = any;
        self->state.listeners_told = true;
      },
      [self](stop_atom) {
        self->state.stopping = true;
        settle(self);
      },
  };
}

void send(runtime& rt, std::int64_t tenant, caf::message m) {
  rt.internals().route(tenant, child_kind::channels, std::move(m));
}

} // namespace

caf::actor spawn_channels(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(channels_behavior, env);
}

void list_channels(runtime& rt, std::int64_t tenant, channel_filter f,
                   callback<std::string> reply) {
  send(rt, tenant, caf::make_message(list_atom::value, std::move(f), std::move(reply)));
}
void get_channel(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  send(rt, tenant, caf::make_message(get_atom::value, id, std::move(reply)));
}
void create_channel(runtime& rt, std::int64_t tenant, domain::channel c,
                    callback<std::string> reply) {
  send(rt, tenant, caf::make_message(create_atom::value, std::move(c), std::move(reply)));
}
void update_channel(runtime& rt, std::int64_t tenant, std::int64_t id, channel_patch p,
                    callback<std::string> reply) {
  send(rt, tenant, caf::make_message(update_atom::value, id, std::move(p), std::move(reply)));
}
void delete_channel(runtime& rt, std::int64_t tenant, std::int64_t id,
                    callback<domain::done> reply) {
  send(rt, tenant, caf::make_message(delete_atom::value, id, std::move(reply)));
}
void receive_inbound(runtime& rt, std::int64_t tenant, std::int64_t channel_id, inbound_call call,
                     callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(inbound_atom::value, channel_id, std::move(call), std::move(reply)));
}
std::string public_base_url(runtime& rt) {
  auto o = automation_options_of(rt.internals());
  return o ? o->public_url : std::string();
}
void conversation_report(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t to,
                         std::string group_by, callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(report_atom::value, from, to, std::move(group_by), std::move(reply)));
}
void verify_hub(runtime& rt, std::int64_t tenant, std::int64_t channel_id, hub_verification v,
                callback<std::string> reply) {
  send(rt, tenant, caf::make_message(hub_atom::value, channel_id, std::move(v), std::move(reply)));
}
void list_templates(runtime& rt, std::int64_t tenant, std::int64_t channel_id,
                    callback<std::string> reply) {
  send(rt, tenant, caf::make_message(tmpl_atom::value, channel_id, std::move(reply)));
}
void list_conversations(runtime& rt, std::int64_t tenant, conversation_filter f,
                        callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(conv_atom::value, list_atom::value, std::move(f), std::move(reply)));
}
void get_conversation(runtime& rt, std::int64_t tenant, std::int64_t id,
                      callback<std::string> reply) {
  send(rt, tenant, caf::make_message(conv_atom::value, get_atom::value, id, std::move(reply)));
}
void update_conversation(runtime& rt, std::int64_t tenant, std::int64_t id, conversation_patch p,
                         callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(conv_atom::value, update_atom::value, id, std::move(p), std::move(reply)));
}
void mark_read(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  send(rt, tenant, caf::make_message(conv_atom::value, read_atom::value, id, std::move(reply)));
}
void list_messages(runtime& rt, std::int64_t tenant, std::int64_t conversation_id, int page,
                   int per_page, callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(msgs_atom::value, conversation_id, page, per_page, std::move(reply)));
}
void send_message(runtime& rt, std::int64_t tenant, outbound_request req,
                  callback<std::string> reply) {
  send(rt, tenant, caf::make_message(send_atom::value, std::move(req), std::move(reply)));
}
void deliver_agent_reply(runtime& rt, std::int64_t tenant, agent_reply r,
                         callback<std::string> reply) {
  send(rt, tenant, caf::make_message(agent_atom::value, std::move(r), std::move(reply)));
}
void erase_messaging(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                     callback<std::int64_t> reply) {
  send(rt, tenant, caf::make_message(erase_atom::value, contact_id, std::move(reply)));
}

void record_consent(runtime& rt, std::int64_t tenant, domain::consent c,
                    callback<std::string> reply) {
  send(rt, tenant, caf::make_message(consent_atom::value, std::move(c), std::move(reply)));
}
void get_consent(runtime& rt, std::int64_t tenant, std::int64_t contact_id, std::int64_t id,
                 callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(consent_atom::value, get_atom::value, contact_id, id, std::move(reply)));
}
void require_consent(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                     domain::consent_purpose purpose, callback<domain::done> reply) {
  send(rt, tenant, caf::make_message(allow_atom::value, contact_id, purpose, std::move(reply)));
}
void list_consents(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                   callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(consent_atom::value, list_atom::value, contact_id, std::move(reply)));
}
void set_routes(runtime& rt, std::int64_t tenant, std::map<std::int64_t, domain::team_route> routes,
                std::set<std::int64_t> unavailable) {
  send(rt, tenant,
       caf::make_message(routes_atom::value,
                         inbox_routes{std::move(routes), std::move(unavailable)}));
}
void set_ai_channels(runtime& rt, std::int64_t tenant, std::vector<std::int64_t> channels) {
  send(rt, tenant, caf::make_message(aichan_atom::value, std::move(channels)));
}

} // namespace crm::actors
