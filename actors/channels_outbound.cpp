// The channel actor's outbound side (docs/channels.md): messages stored queued, then sent
// through the channel's adapter (HTTP providers, SMTP) with their attempts recorded and retried;
// and the AI agents' decisions applied in the conversation's order (docs/ai.md).
#include "actors/channels_internal.hpp"

#include "domain/media.hpp"

namespace crm::actors::channels_impl {

// ---- outbound ------------------------------------------------------------------------------

void provider_send(ch_actor* self, persistence::queued_message m, domain::outbound_message out,
                   domain::channel channel);
void start_send(ch_actor* self, persistence::queued_message m);
void leave_window(ch_actor* self, const persistence::queued_message& m);

namespace {
// --outbound-report-wait, in µs.
std::int64_t report_wait_us(const channels_state& st) {
  return static_cast<std::int64_t>((st.opts ? st.opts->report_wait : 600) * 1e6);
}
} // namespace

void record(ch_actor* self, persistence::send_outcome o, persistence::queued_message m) {
  db<domain::done>(
      self,
      [tid = self->state.env.tenant_id, o](persistence::pg_conn& c) {
        persistence::record_send(c, tid, o);
        return domain::done{};
      },
      [self, o, m](domain::outcome<domain::done> r) mutable {
        auto& st = self->state;
        if (!r) {
          // Not recorded: the outcome is stored again in a while, never the send made again
          // (the provider may have the message). Stopped meanwhile, the mark claim_send left
          // tells the next load that the outcome is unknown.
          log_warn("tenant {}: message {} send outcome not stored ({})", st.env.tenant_id, m.id,
                   r.error().detail);
          if (!st.stopping)
            self->delayed_send(self, std::chrono::seconds(5), record_atom::value, o, m);
          else
            send_over(self, m);
          return;
        }
        send_over(self, m);
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
        for (auto& f : p.attachments)
          mail.attachments.push_back({f.filename, f.content_type, f.data});
        smtp->send(
            std::move(mail), in_actor<net::smtp_result>(self, [finish, id = p.message_id](
                                                                  net::smtp_result res) mutable {
              finish(res.sent, res.error, res.sent ? std::optional(id) : std::nullopt, res.retry);
            }));
      });
}

// An attempt's outcome: sent, queued again (another attempt may pass, and attempts are left),
// or failed.
void attempted(ch_actor* self, const persistence::queued_message& m, bool sent, std::string error,
               std::optional<std::string> id, bool retry) {
  leave_window(self, m);
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
      o.next_attempt_at =
          domain::now_micros() + retry_delays_ms[static_cast<std::size_t>(
                                     std::min<int>(o.attempts - 1, retry_delays_ms.size() - 1))] *
                                     1000;
    } else {
      o.status = "failed";
    }
  }
  record(self, o, m);
}

// The mark that the message is being sent is committed, then `go` runs; a message no longer
// queued (a provider's report named it meanwhile, or it failed) is not sent.
template <class Go>
void claimed(ch_actor* self, const persistence::queued_message& m, Go go) {
  auto& st = self->state;
  // Should the outcome be lost, the sweeper need not wake the tenant for a message that waits
  // for its provider's report before then.
  std::int64_t wake_at = 0;
  if (auto ch = st.channels.find(m.channel_id);
      ch != st.channels.end() &&
      domain::after_unknown_send(ch->second.type) == domain::unknown_send::await_report)
    wake_at = domain::now_micros() + report_wait_us(st);
  db<bool>(
      self,
      [tid = st.env.tenant_id, id = m.id, wake_at](persistence::pg_conn& c) {
        return persistence::claim_send(c, tid, id, wake_at);
      },
      [self, m = m, go = std::move(go)](domain::outcome<bool> r) mutable {
        auto& st = self->state;
        if (r && *r) return go();
        send_over(self, m);
        if (r) return; // settled elsewhere
        log_warn("tenant {}: message {} not sent now ({})", st.env.tenant_id, m.id,
                 r.error().detail);
        if (st.stopping) return;
        m.next_attempt_at = domain::now_micros() + 5'000'000;
        schedule_send(self, m);
      });
}

// The message leaves: the contact's phone and e-mail are read, the send is marked, then the
// provider is called.
void send_to_contact(ch_actor* self, persistence::queued_message m, domain::outbound_message out,
                     domain::channel channel) {
  auto& st = self->state;
  // The contact's phone and e-mail come from the contacts actor, which owns them.
  auto k = in_actor<domain::outcome<std::vector<domain::contact>>>(
      self, [self, m, out, channel](domain::outcome<std::vector<domain::contact>> r) mutable {
        if (r && !r->empty()) {
          out.phone = r->front().phone;
          out.email = r->front().email;
        }
        claimed(self, m, [self, m, out = std::move(out), channel = std::move(channel)]() mutable {
          provider_send(self, std::move(m), std::move(out), std::move(channel));
        });
      });
  fetch_contacts(*st.env.rt->owner, st.env.tenant_id, {m.contact_id},
                 callback<std::vector<domain::contact>>(std::move(k)));
}

// The provider is called (SMTP for e-mail), and the attempt recorded.
void provider_send(ch_actor* self, persistence::queued_message m, domain::outbound_message out,
                   domain::channel channel) {
  auto& st = self->state;
  auto finish = [self, m](bool sent, std::string error, std::optional<std::string> id,
                          bool retry = true) {
    attempted(self, m, sent, std::move(error), std::move(id), retry);
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
}

void resume_queued(ch_actor* self, std::vector<persistence::queued_message> queued) {
  auto& st = self->state;
  for (auto& m : queued) {
    if (m.unknown_since == 0) {
      schedule_send(self, m);
      continue;
    }
    auto ch = st.channels.find(m.channel_id);
    // (A deleted channel: the attempt fails it as it would any message of that channel.)
    auto rule = ch == st.channels.end() ? domain::unknown_send::send_again
                                        : domain::after_unknown_send(ch->second.type);
    switch (rule) {
    case domain::unknown_send::send_again:
      log_info("tenant {}: message {}: the outcome of its last attempt was lost; sent again "
               "under the same id, which its receiver can tell",
               st.env.tenant_id, m.id);
      schedule_send(self, m);
      break;
    case domain::unknown_send::await_report: {
      m.next_attempt_at = std::max(m.next_attempt_at, m.unknown_since + report_wait_us(st));
      log_info("tenant {}: message {}: the outcome of its last attempt was lost; sent again in "
               "{} s unless the provider reports it first",
               st.env.tenant_id, m.id, (m.next_attempt_at - domain::now_micros()) / 1'000'000);
      schedule_send(self, m);
      break;
    }
    case domain::unknown_send::give_up: {
      persistence::send_outcome o;
      o.message_id = m.id;
      o.status = "failed";
      o.attempts = m.attempts + 1;
      o.error = "the outcome of the last attempt is unknown (carecrm stopped while the provider "
                "was being called); not sent again, so that it cannot arrive twice";
      record(self, std::move(o), std::move(m)); // not in the window: nothing was sent
      break;
    }
    }
  }
}

// The provider has answered (or the attempt ended before reaching it): the channel's window
// takes its next message while this one's outcome is being recorded, so a slot is held for the
// claim and the call, not for the commit after them (docs/channels.md "Pace").
void leave_window(ch_actor* self, const persistence::queued_message& m) {
  auto& st = self->state;
  if (st.in_window.erase(m.id) == 0 || st.stopping) return;
  auto next = st.window.finish(m.channel_id);
  if (!next) return;
  auto held = st.held_sends.extract(*next);
  if (held.empty()) return; // (never: each waiting id is held)
  start_send(self, std::move(held.mapped()));
}

void send_over(ch_actor* self, const persistence::queued_message& m) {
  leave_window(self, m);
  self->state.sending.erase(m.id);
}

void attempt_send(ch_actor* self, persistence::queued_message m) {
  auto& st = self->state;
  if (st.stopping || st.sending.count(m.id) || st.held_sends.count(m.id)) return;
  // At most sends_per_channel of a channel in flight: the rest wait their turn, in order.
  if (!st.window.admit(m.channel_id, m.id)) {
    auto id = m.id;
    st.held_sends.emplace(id, std::move(m));
    return;
  }
  start_send(self, std::move(m));
}

// An attempt admitted by the window: checked, then its files read, then sent.
void start_send(ch_actor* self, persistence::queued_message m) {
  auto& st = self->state;
  st.sending.insert(m.id);
  st.in_window.insert(m.id);
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
  if (m.files == 0) return send_to_contact(self, std::move(m), std::move(out), std::move(channel));
  // Its files: e-mail carries their bytes; the others give the provider a capability URL to
  // fetch each from (docs/channels.md "Media").
  const bool email = channel.type == domain::channel_type::email;
  db<std::vector<persistence::outbound_file>>(
      self,
      [tid = st.env.tenant_id, id = m.id, email](persistence::pg_conn& c) {
        return persistence::outbound_files(c, tid, id, email);
      },
      [self, m, out, channel,
       email](domain::outcome<std::vector<persistence::outbound_file>> r) mutable {
        if (!r) return attempted(self, m, false, r.error().detail, std::nullopt, true);
        auto& st = self->state;
        for (auto& f : *r) {
          domain::outbound_message::file file;
          if (!email) {
            domain::media::link_claim claim{st.env.tenant_id, m.id, f.n,
                                            domain::now_micros() + domain::media::link_lifetime_us};
            auto payload = domain::media::link_payload(claim);
            file.url = public_url(st) + "/api/v1/media/" +
                       domain::media::link_token(
                           payload, st.env.pool->keys().hash(domain::media::link_purpose,
                                                             st.env.tenant_id, payload));
          }
          file.content_type = std::move(f.content_type);
          file.filename = std::move(f.filename);
          file.data = std::move(f.data);
          out.files.push_back(std::move(file));
        }
        // Sent without text, the file names are how staff read it, not what the patient gets.
        std::vector<domain::media_ref> named;
        for (auto& f : out.files) named.push_back({"", f.content_type, f.filename, std::nullopt});
        if (out.text == domain::media::described(named)) out.text.clear();
        send_to_contact(self, std::move(m), std::move(out), std::move(channel));
      });
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
      if (auto why = domain::cannot_write_first(ch->second, chat, !req.template_json.empty()))
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
  if (auto why = domain::media::cannot_send(ch->second.type, req.media, req.text,
                                            !req.template_json.empty()))
    return reply(failure::of(errc::conflict, *why));
  if (req.text.empty()) req.text = domain::media::described(req.media);
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
  w.media = std::move(req.media);
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
        if (r) {
          auto& st = self->state;
          if (auto before = st.conversations.find(conv_after.id); before != st.conversations.end())
            count_change(st, before->second, conv_after);
          keep_conversation(st, conv_after);
        }
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
  // The assistant's numbered offer supersedes a reminder's pending answer on this conversation:
  // the patient's next "1" or "2" is for the assistant, not the reminder (docs/ai.md).
  if (a.intent == "booking" && a.text && !a.handoff_reason) st.reminded.erase(conv.id);
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

} // namespace crm::actors::channels_impl
