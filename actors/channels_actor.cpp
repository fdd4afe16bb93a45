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
#include "actors/channels_internal.hpp"

#include "domain/media.hpp"

namespace crm::actors::channels_impl {

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
  auto [it, added] = st.conversations.try_emplace(c.id, c);
  st.open_load.change(added ? nullptr : &it->second, &c);
  if (added)
    st.by_contact[c.contact_id].push_back(c.id);
  else
    it->second = c;
}

// The provider's id (a Telegram chat) of `contact` on `channel`, both ways.
void remember_identity(channels_state& st, std::int64_t channel, const std::string& external,
                       std::int64_t contact) {
  auto& owner = st.identities[{channel, external}];
  if (owner && owner != contact) st.chats.erase({channel, owner});
  owner = contact;
  st.chats[{channel, contact}] = external;
}

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
  st.open_load.clear();
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
        resume_queued(self, std::move(r->queued));
        for (auto& m : r->media) fetch_media(self, m);
      });
}

// A channel as the API shows it, with the team its conversations go to (the inbox actor's routes).
json::object channel_json(const channels_state& st, const domain::channel& c) {
  auto o = domain::channel_to_json(c, public_url(st));
  auto route = st.inbox.routes.find(c.id);
  o["team_id"] =
      route != st.inbox.routes.end() ? json::value(route->second.team_id) : json::value();
  return o;
}

void save_channel(ch_actor* self, domain::channel c, callback<std::string> reply) {
  db<domain::channel>(
      self, [c](persistence::pg_conn& conn) { return persistence::save_channel(conn, c); },
      [self, reply](domain::outcome<domain::channel> r) {
        if (!r) return reply(r.error());
        auto& st = self->state;
        st.channels[r->id] = *r;
        reply(json::serialize(channel_json(st, *r)));
      });
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
    for (auto id : it->second)
      if (auto c = st.conversations.find(id); c != st.conversations.end()) {
        st.open_load.change(&c->second, nullptr);
        st.conversations.erase(c);
      }
    st.by_contact.erase(it);
  }
  std::erase_if(st.identities, [&](const auto& kv) { return kv.second == contact; });
  std::erase_if(st.chats, [&](const auto& kv) { return kv.first.second == contact; });
  st.consents.erase(contact);
}

// A contact merged into another (its rows already name the survivor): its conversations,
// provider ids and consents are the survivor's. Consents keep their order by time, so the
// latest word on a purpose, whoever's record it was given on, still decides.
void move_contact(channels_state& st, std::int64_t from, std::int64_t into) {
  if (auto it = st.by_contact.find(from); it != st.by_contact.end()) {
    auto ids = std::move(it->second);
    st.by_contact.erase(it);
    for (auto id : ids) {
      if (auto c = st.conversations.find(id); c != st.conversations.end())
        c->second.contact_id = into;
      st.by_contact[into].push_back(id);
    }
  }
  for (auto& [key, owner] : st.identities)
    if (owner == from) owner = into;
  std::vector<std::pair<std::int64_t, std::string>> chats;
  for (auto it = st.chats.begin(); it != st.chats.end();) {
    if (it->first.second != from) {
      ++it;
      continue;
    }
    chats.emplace_back(it->first.first, it->second);
    it = st.chats.erase(it);
  }
  for (auto& [channel, external] : chats) st.chats.emplace(std::pair{channel, into}, external);
  if (auto k = st.consents.find(from); k != st.consents.end()) {
    auto moved = std::move(k->second);
    st.consents.erase(k);
    auto& mine = st.consents[into];
    for (auto& c : moved) {
      c.contact_id = into;
      mine.push_back(std::move(c));
    }
    std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) {
      return a.recorded_at != b.recorded_at ? a.recorded_at < b.recorded_at : a.id < b.id;
    });
  }
}

domain::audit_record consent_row(const domain::audit_context* who, std::int64_t tenant,
                                 const domain::consent& c) {
  auto row = domain::make_audit(who, tenant, "contact", c.contact_id, "record_consent");
  row.fields = {"purpose", "granted", "channel", "source"};
  if (c.evidence) row.fields.emplace_back("evidence");
  row.status = 201;
  return row;
}

namespace {
std::size_t type_of(const channels_state& st, std::int64_t channel_id) {
  auto it = st.channels.find(channel_id);
  auto t = it == st.channels.end() ? 0 : static_cast<std::size_t>(it->second.type);
  return t < inbox_meter::types ? t : 0;
}
} // namespace

void count_opened(const channels_state& st, const domain::conversation& c) {
  inbox_counts().opened[type_of(st, c.channel_id)]++;
}

void count_change(const channels_state& st, const domain::conversation& before,
                  const domain::conversation& after) {
  auto& m = inbox_counts();
  auto t = type_of(st, after.channel_id);
  if (!before.first_response_at && after.first_response_at)
    m.first_response[t].observe(after.first_response_at - after.created_at);
  if (!before.resolved_at && after.resolved_at)
    m.resolution[t].observe(after.resolved_at - after.created_at);
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
          // A batch that did commit left its files pending: fetched now (not twice at once).
          for (auto& m : r->media) fetch_media(self, m);
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
  // Two message ids: an inbound message may take a second for its after-hours reply.
  if (st.message_ids.size() >= 2 && !st.conversation_ids.empty()) return true;
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
        if (r) {
          auto& st = self->state;
          if (auto before = st.conversations.find(next.id); before != st.conversations.end())
            count_change(st, before->second, next);
          keep_conversation(st, next);
        }
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
    if (p.labels) next.labels = domain::label_set(*p.labels);
    if (p.priority) next.priority = *p.priority;
    next.updated_at = std::max(domain::now_micros(), next.updated_at + 1);
    std::vector<std::string> fields;
    if (p.status) fields.emplace_back("status");
    if (p.assignee_id) fields.emplace_back("assignee_id");
    if (p.ai_paused) fields.emplace_back("ai_paused");
    if (p.labels) fields.emplace_back("labels");
    if (p.priority) fields.emplace_back("priority");
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

} // namespace crm::actors::channels_impl

namespace crm::actors {
namespace {

using namespace channels_impl;

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
      [self](record_atom, persistence::send_outcome& o, persistence::queued_message& m) {
        record(self, std::move(o), std::move(m));
      },
      [self](media_atom, persistence::pending_media& m) { fetch_media(self, std::move(m)); },
      [self, measure](media_atom, std::string& payload, std::string& mac, std::int64_t message_id,
                      int n, callback<attachment>& reply) {
        auto _ = measure();
        auto& keys = self->state.env.pool->keys();
        if (!domain::secret_keys::is_hashed(mac) ||
            keys.verify(domain::media::link_purpose, self->state.env.tenant_id, payload, mac) ==
                domain::secret_keys::match::no)
          return reply(failure::of(errc::not_found, "no such file"));
        self->send(self, media_atom::value, read_atom::value, message_id, n, std::move(reply));
      },
      [self, measure](media_atom, read_atom, std::int64_t message_id, int n,
                      callback<attachment>& reply) {
        auto _ = measure();
        db<std::optional<persistence::attachment_file>>(
            self,
            [tid = self->state.env.tenant_id, message_id, n](persistence::pg_conn& c) {
              return persistence::read_attachment(c, tid, message_id, n);
            },
            [self, message_id,
             reply](domain::outcome<std::optional<persistence::attachment_file>> r) {
              if (!r) return reply(r.error());
              if (!*r)
                return reply_missing(
                    self,
                    [message_id](persistence::pg_conn& c) {
                      return persistence::tenant_of_message(c, message_id);
                    },
                    "attachment", reply);
              auto& f = **r;
              if (f.status == "pending")
                return reply(failure::of(errc::conflict,
                                         "the file is being fetched from the provider: try again "
                                         "shortly"));
              if (f.status != "stored")
                return reply(failure::of(errc::conflict,
                                         "the file was not kept: " + f.error.value_or(f.status)));
              reply(
                  attachment{std::move(f.content_type), std::move(f.filename), std::move(f.data)});
            });
      },
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
              [&st](const domain::channel& c) { return channel_json(st, c); }, f.page, f.per_page));
        });
      },
      [self, measure](get_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          auto& st = self->state;
          auto it = st.channels.find(id);
          if (it == st.channels.end()) return missing_channel(self, id, reply);
          reply(json::serialize(channel_json(st, it->second)));
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
            if (p.business_hours) next.business_hours = *p.business_hours;
            if (p.time_zone) next.time_zone = *p.time_zone;
            if (p.after_hours_reply) next.after_hours_reply = *p.after_hours_reply;
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
          for (auto& [id, c] : self->state.conversations)
            if (f.matches(c)) found.push_back(&c);
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
          if (!req.fill_for_contact)
            return conv_serial(self, fail_with(reply),
                               [self, req, reply] { do_send(self, req, reply); });
          // A canned response: its placeholders are filled from the conversation's contact,
          // which the contacts actor owns, before the message takes its turn.
          auto& convs = self->state.conversations;
          auto it = req.conversation_id ? convs.find(*req.conversation_id) : convs.end();
          if (it == convs.end())
            return missing_conversation(self, req.conversation_id.value_or(0), reply);
          auto k = in_actor<domain::outcome<std::vector<domain::contact>>>(
              self, [self, req, reply](domain::outcome<std::vector<domain::contact>> r) mutable {
                if (!r) return reply(r.error());
                if (r->empty()) return reply(failure::of(errc::not_found, "contact not found"));
                req.text = domain::fill_for_contact(req.text, r->front());
                req.fill_for_contact = false;
                conv_serial(self, fail_with(reply),
                            [self, req, reply] { do_send(self, req, reply); });
              });
          fetch_contacts(*self->state.env.rt->owner, self->state.env.tenant_id,
                         {it->second.contact_id},
                         callback<std::vector<domain::contact>>(std::move(k)));
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
      [self, measure](moved_atom, std::int64_t from, std::int64_t into) {
        auto _ = measure();
        auto& st = self->state;
        if (!st.loaded && !st.loading) return; // a load reads the rows as they are now
        when_loaded(
            self, [](const failure&) {},
            [self, from, into] {
              conv_serial(
                  self, [](const failure&) {},
                  [self, from, into] {
                    move_contact(self->state, from, into);
                    conv_done(self);
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
void read_attachment(runtime& rt, std::int64_t tenant, std::int64_t message_id, int n,
                     callback<attachment> reply) {
  send(rt, tenant,
       caf::make_message(media_atom::value, read_atom::value, message_id, n, std::move(reply)));
}
void read_linked_attachment(runtime& rt, std::int64_t tenant, std::int64_t message_id, int n,
                            std::string payload, std::string mac, callback<attachment> reply) {
  send(rt, tenant,
       caf::make_message(media_atom::value, std::move(payload), std::move(mac), message_id, n,
                         std::move(reply)));
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
void move_contact_messaging(runtime& rt, std::int64_t tenant, std::int64_t from,
                            std::int64_t into) {
  send(rt, tenant, caf::make_message(moved_atom::value, from, into));
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
