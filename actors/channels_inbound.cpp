// The channel actor's inbound pipeline (docs/channels.md "Inbound group commit"): each
// provider's webhook checked and parsed, the sender matched to a contact, the message staged with
// its conversation, identity, event and audit rows into the tenant's open batch, and the callers
// answered after COMMIT.
#include "actors/channels_internal.hpp"

namespace crm::actors::channels_impl {

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
  const bool opened = conv.id == 0;
  if (opened) conv.id = take(st.conversation_ids);
  persistence::stored_inbound ids{take(st.message_ids), conv.id, contact.id};

  auto& b = st.open;
  b.sql.tenant_id = st.env.tenant_id;
  if (auto [pos, added] = b.conversation_pos.try_emplace(conv.id, b.sql.conversations.size());
      added)
    b.sql.conversations.push_back(conv);
  else
    b.sql.conversations[pos->second] = conv;
  b.sql.messages.push_back({ids.message_id, conv.id, w.channel_id, w.text, w.external_message_id,
                            w.received_at, w.ai_pending, answer, contact.id, w.subject, w.media});
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
  std::optional<persistence::queued_message> reply;
  if (w.after_hours_reply) {
    persistence::reply_row r;
    auto& q = r.message;
    q.id = take(st.message_ids);
    q.conversation_id = conv.id;
    q.channel_id = w.channel_id;
    q.contact_id = contact.id;
    q.text = *w.after_hours_reply;
    q.created_at = q.next_attempt_at = w.received_at;
    auto ch = st.channels.find(w.channel_id);
    if (ch != st.channels.end() && ch->second.type == domain::channel_type::sms)
      r.segments = domain::twilio::count_segments(q.text).count;
    b.sql.replies.push_back(r);
    // Sent by carecrm itself (no person, no agent).
    b.sql.audit.push_back(conversation_row(nullptr, st, conv, "after_hours_reply", {"text"}, 201));
    reply = q;
  }
  st.staged[conv.id] = {conv, b.seq};
  b.on_commit.push_back([self, key, ids, conv, text = w.text, depth = w.depth, at = w.received_at,
                         answer, reply, opened, media = pending_refs(w.channel_id, w.media)] {
    if (opened) count_opened(self->state, conv);
    fetch_media_of(self, ids.message_id, media);
    received(self, key, ids, conv, text, depth, answer, at);
    if (reply) attempt_send(self, *reply);
  });
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
       media = pending_refs(w.channel_id, w.media),
       depth = w.depth](domain::outcome<persistence::inbound_written> r) {
        auto& st = self->state;
        if (!r) {
          // The outcome unknown (the connection lost at COMMIT): read the state again first.
          if (r.error().code == errc::service_unavailable) st.stale = true;
          conv_done(self);
          return answer_inbound(self, key, r.error(), false);
        }
        if (!r->duplicate) {
          if (!st.conversations.count(r->conversation.id)) count_opened(st, r->conversation);
          fetch_media_of(self, r->ids.message_id, media);
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
// (domain::pick_assignee), by each member's open conversations, staged ones included.
void assign(channels_state& st, domain::conversation& conv, std::int64_t now) {
  auto route = st.inbox.routes.find(conv.channel_id);
  if (route == st.inbox.routes.end()) return;
  auto& r = route->second;
  conv.team_id = r.team_id;
  // The committed counts (kept as conversations change), with the staged conversations'
  // changes on top: O(assignees + staged), not O(conversations).
  auto open = st.open_load.of_assignees();
  for (auto& [id, s] : st.staged) {
    auto held = st.conversations.find(id);
    domain::open_load::adjust(open, held == st.conversations.end() ? nullptr : &held->second,
                              &s.conv);
  }
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
  w.media = m.media;
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
  // Outside the channel's business hours the patient is told so, once per conversation per
  // closed period: not for a STOP, an answer to a reminder (answered itself), a message an agent
  // will answer, or a contact whose consents refuse messages on the channel.
  if (!stop && !answer && !w.ai_pending) {
    auto ch = st.channels.find(channel_id);
    if (ch != st.channels.end() && ch->second.is_active)
      if (auto period = domain::after_hours_period(ch->second, conv, now);
          period &&
          !consent_refusal(st, contact.id, domain::consent_purpose::treatment_communication,
                           channel_id)) {
        conv.after_hours_for = *period;
        w.conversation.after_hours_for = *period;
        w.after_hours_reply = ch->second.after_hours_reply;
      }
  }
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
  d.message_id = u.message_id;
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
  w->status->message_id = domain::twilio::status_callback_ref(call.url);
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

} // namespace crm::actors::channels_impl
