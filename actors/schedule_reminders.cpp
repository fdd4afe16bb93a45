// The schedule actor's reminders and the patients' answers to them (docs/appointments.md
// "Reminders", "Answers"): each reminder sent once through the patient's channel, and each
// answer counted once, even across restarts.
#include "actors/channels.hpp"
#include "actors/contacts.hpp"
#include "actors/schedule_internal.hpp"
#include "domain/clock.hpp"
#include "domain/consent.hpp"
#include "domain/validation.hpp"
#include "domain/whatsapp.hpp"
#include "persistence/log.hpp"
#include "persistence/pg_pool.hpp"

namespace crm::actors::schedule_detail {
namespace {

// Who sends a reminder, in the audit trail.
domain::audit_context_ptr reminder_sender() {
  auto ctx = std::make_shared<domain::audit_context>();
  ctx->actor = domain::audit_actor::system;
  ctx->actor_ref = "appointment_reminder";
  return ctx;
}

// The patient answering on a channel, in the audit trail (as the channel's inbound webhook).
domain::audit_context_ptr patient_on(std::int64_t channel) {
  auto ctx = std::make_shared<domain::audit_context>();
  ctx->actor = domain::audit_actor::webhook;
  ctx->actor_ref = "channel:" + std::to_string(channel);
  return ctx;
}

void reminder_done(schedule_actor* self, const domain::reminder_key& key) {
  auto& s = self->state.store;
  s.reminders_out.erase(key);
  s.reminders_done.insert(key);
}

// Recorded as skipped, with why (no consent, no conversation, an inactive channel).
void skip_reminder(schedule_actor* self, domain::reminder_key key, std::string reason) {
  auto tenant = self->state.env.tenant_id;
  db<domain::reminder_key>(
      self,
      [tenant, key, reason](persistence::pg_conn& c) {
        return persistence::skip_reminder(c, tenant, key, reason);
      },
      [self, key](domain::outcome<domain::reminder_key> r) {
        if (r) return reminder_done(self, key);
        self->state.store.reminders_out.erase(key); // a later tick tries again
      });
}

// Renders the reminder with the patient's first name and queues it on the patient's
// conversation of the rule's channel; the channels actor records it as sent in the message's
// own transaction, once.
void send_reminder(schedule_actor* self, domain::due_reminder d) {
  auto& st = self->state;
  st.store.reminders_out.insert(d.key);
  auto tenant = st.env.tenant_id;
  auto on_contact = in_actor<domain::outcome<std::vector<domain::contact>>>(
      self, [self, tenant, d](domain::outcome<std::vector<domain::contact>> r) {
        auto& st = self->state;
        // Not answered: a later tick tries again (gone: so is the appointment). Stopping: the
        // next actor sends it. Cancelled or moved meanwhile: not this reminder any more.
        auto a = st.store.appointments.find(d.key.appointment_id);
        bool still = a != st.store.appointments.end() && a->second.start == d.key.start &&
                     (a->second.status == domain::appointment_status::booked ||
                      a->second.status == domain::appointment_status::confirmed);
        if (!r || r->empty() || st.stopping || !still) {
          st.store.reminders_out.erase(d.key);
          return;
        }
        actors::outbound_request req;
        req.contact_id = d.contact_id;
        req.channel_id = d.rule.channel_id;
        const domain::reminder_values values{d.start_local, r->front().first_name, d.service_name,
                                             d.calendar_name};
        req.text = domain::render_reminder(d.rule.text, values);
        // On WhatsApp, the approved template with its parameters filled the same way.
        if (auto tm = domain::whatsapp::template_from_json(d.rule.template_json)) {
          for (auto& p : tm->parameters)
            p = std::string(domain::utf8_prefix(domain::render_reminder(p, values),
                                                domain::whatsapp::template_parameter_max));
          req.template_json = domain::whatsapp::template_to_json(*tm);
        }
        req.purpose = domain::consent_purpose::appointment_reminders;
        req.reminder = d.key;
        req.open_conversation = true;
        auto on_sent =
            in_actor<domain::outcome<std::string>>(self, [self, d](domain::outcome<std::string> m) {
              using domain::errc;
              if (m) return reminder_done(self, d.key);
              auto& f = m.error();
              if (f.code == errc::conflict && f.detail == reminder_sent_already)
                return reminder_done(self, d.key);
              if (f.code == errc::conflict || f.code == errc::not_found)
                return skip_reminder(self, d.key, f.detail);
              self->state.store.reminders_out.erase(d.key); // unavailable: later
            });
        domain::audit_scope scope(reminder_sender());
        send_message(*st.env.rt->owner, tenant, std::move(req),
                     callback<std::string>(std::move(on_sent)));
      });
  fetch_contacts(*st.env.rt->owner, tenant, {d.contact_id},
                 callback<std::vector<domain::contact>>(std::move(on_contact)));
}

} // namespace

// Of the reminders of one appointment that are due at once (booked late, or a restart), only
// the one nearest its start is sent; the earlier ones are recorded as skipped.
void send_due_reminders(schedule_actor* self) {
  auto now = domain::now_micros();
  self->state.store.forget_past_reminders(now);
  for (auto& d : self->state.store.due_reminders(now)) {
    if (!d.superseded) {
      send_reminder(self, d);
    } else {
      self->state.store.reminders_out.insert(d.key);
      skip_reminder(self, d.key, "superseded by a later reminder of the same appointment");
    }
  }
}

namespace {

// How often, and how long apart, a patient's answer is tried again when Postgres or the actor's
// load is unavailable (after that it waits in reminder_answers for the sweeper's wake).
constexpr int answer_attempts = 5;
constexpr auto answer_retry = std::chrono::seconds(2);

// Settles an answer that changes nothing; `reply` gets `ack` when this call settled it, and an
// empty text (nothing more is said) when it was settled already.
void settle_answer(schedule_actor* self, std::int64_t message_id, std::string ack,
                   callback<std::string> reply) {
  auto tenant = self->state.env.tenant_id;
  db<bool>(
      self,
      [tenant, message_id](persistence::pg_conn& c) {
        return persistence::settle_reminder_answer(c, tenant, message_id);
      },
      [reply, ack = std::move(ack)](domain::outcome<bool> r) {
        if (!r) return reply(r.error());
        reply(*r ? ack : std::string());
      });
}

// "cancel" with nothing left to cancel is the STOP it is everywhere else: consent to every kind
// of message on the channel is withdrawn (recorded before the answer is settled: a second try
// records it again, harmlessly), and nothing is said.
void stop_on_answer(schedule_actor* self, const domain::patient_answer& m,
                    callback<std::string> reply) {
  auto left = std::make_shared<std::size_t>(std::size(domain::stop_withdraws));
  auto failed = std::make_shared<std::optional<domain::failure>>();
  auto on_recorded = [self, left, failed, reply,
                      id = m.message_id](domain::outcome<std::string> r) {
    if (!r && !*failed) *failed = r.error();
    if (--*left > 0) return;
    if (*failed) return reply(**failed);
    settle_answer(self, id, std::string(), reply);
  };
  domain::audit_scope scope(patient_on(m.channel_id));
  for (auto purpose : domain::stop_withdraws) {
    domain::consent c;
    c.tenant_id = self->state.env.tenant_id;
    c.contact_id = m.contact_id;
    c.purpose = purpose;
    c.channel_id = m.channel_id;
    c.granted = false;
    c.source = "inbound_message";
    c.recorded_at = domain::now_micros();
    record_consent(
        *self->state.env.rt->owner, c.tenant_id, std::move(c),
        callback<std::string>(in_actor<domain::outcome<std::string>>(self, on_recorded)));
  }
}

} // namespace

// The patient's answer: the contact's next live appointment (when the answer came) confirmed or
// cancelled in its turn (source patient_reply), the answer settled in the same transaction,
// then the acknowledgement on the conversation the answer came in on. Settling is what makes an
// answer count once: a second try (the sweeper's, after a crash) finds it settled.
void answer_reminder_in_turn(schedule_actor* self, domain::patient_answer m, int attempt) {
  using domain::errc;
  auto tenant = self->state.env.tenant_id;
  auto acknowledge = [self, tenant, m, attempt](domain::outcome<std::string> ack) {
    if (!ack) {
      auto& f = ack.error();
      if (f.code == errc::service_unavailable) {
        if (attempt < answer_attempts && !self->state.stopping)
          self->delayed_send(self, answer_retry * attempt, answer_atom::value, m, attempt + 1);
        else
          log_warn("tenant {}: a patient's answer to a reminder (message {}) waits: {}", tenant,
                   m.message_id, f.detail);
        return;
      }
      if (f.detail == persistence::answer_settled_already) return;
      // Refused (a race with staff): settled, and nothing is said.
      log_info("tenant {}: a patient's answer to a reminder (message {}) was refused: {}", tenant,
               m.message_id, f.detail);
      return settle_answer(self, m.message_id, std::string(),
                           callback<std::string>([](domain::outcome<std::string>) {}));
    }
    if (self->state.stopping || ack->empty()) return;
    actors::outbound_request req;
    req.conversation_id = m.conversation_id;
    req.text = std::move(*ack);
    send_message(*self->state.env.rt->owner, tenant, std::move(req),
                 callback<std::string>([](domain::outcome<std::string>) {}));
  };
  domain::audit_scope scope(patient_on(m.channel_id));
  callback<std::string> reply(in_actor<domain::outcome<std::string>>(self, acknowledge));
  write<schedule_aggregate, std::string>(self, reply, [self, m](callback<std::string> reply) {
    using step = domain::answer_plan::step;
    auto& s = self->state.store;
    auto plan = s.plan_answer(m, domain::now_micros());
    if (!plan) return reply(plan.error());
    if (plan->what == step::stop) return stop_on_answer(self, m, reply);
    if (plan->what == step::settle)
      return settle_answer(self, m.message_id, std::move(plan->ack), reply);
    auto change = with_event(s, domain::outcome<appointment>(std::move(plan->change)), plan->event);
    auto save = save_appointment(reply, plan->action, {"status"}, 200, m.message_id);
    db<committed>(
        self, [save, p = std::move(*change)](persistence::pg_conn& c) { return save(c, p); },
        [self, reply, ack = std::move(plan->ack)](domain::outcome<committed> r) {
          if (!r) return reply(r.error());
          applied(self, std::move(*r));
          reply(ack);
        });
  });
}

// The answers stored and not settled (a crash between the message's commit and the change's,
// or Postgres away through every retry), each answered now: on spawn, and when the sweeper wakes
// this actor.
void answer_left_answers(schedule_actor* self) {
  if (self->state.stopping) return;
  auto tenant = self->state.env.tenant_id;
  db<std::vector<domain::patient_answer>>(
      self,
      [tenant](persistence::pg_conn& c) {
        return persistence::pending_reminder_answers(c, tenant);
      },
      [self](domain::outcome<std::vector<domain::patient_answer>> r) {
        if (!r || self->state.stopping) return;
        for (auto& a : *r) answer_reminder_in_turn(self, std::move(a));
      });
}

} // namespace crm::actors::schedule_detail
