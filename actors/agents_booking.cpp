// The AI agents actor (actors/agents_internal.hpp): booking, moving and cancelling a patient's
// appointments through an agent with services (docs/ai.md "Booking" and "Tool calls"). The
// rules are the pure ones of domain/ai_booking.hpp and domain/ai_tools.hpp; every change goes
// through the schedule actor, as the API's do.
#include "actors/agents_internal.hpp"

namespace crm::actors::agents_impl {

namespace {

constexpr std::int64_t hour_us = std::int64_t{3600} * 1'000'000;
constexpr std::int64_t offer_window = 14 * 24 * hour_us; // slots offered: the next two weeks
constexpr std::int64_t offer_lifetime = 24 * hour_us;    // an offer not answered: forgotten

using offer_t = persistence::booking_offer;
using next_t = std::optional<ai::patient_appointment>;

decision booking_decision(std::string answer, ai::language lang,
                          ai::handoff_reason handoff = ai::handoff_reason::none) {
  decision d;
  d.answer = std::move(answer);
  d.intent = ai::intent::booking;
  d.lang = lang;
  d.handoff = handoff;
  return d;
}

decision booking_failed(ai::language lang, std::string why) {
  decision d = booking_decision(std::string(ai::phrase_handoff(lang)), lang,
                                ai::handoff_reason::provider_error);
  d.error = std::move(why);
  return d;
}

// Nothing to move or cancel: a person looks (the patient may have booked by phone).
decision no_appointment(ai::language lang) {
  return booking_decision(ai::no_appointment_text(lang), lang, ai::handoff_reason::no_answer);
}

bool may_book_service(const domain::ai_agent& a, std::int64_t service) {
  return std::find(a.service_ids.begin(), a.service_ids.end(), service) != a.service_ids.end();
}

offer_t offer_for(const agents_state& st, std::int64_t agent_id, const ai_inbound& m,
                  ai::offer_kind kind, std::vector<ai::offered_slot> slots, ai::language lang,
                  std::optional<std::int64_t> appointment) {
  const std::int64_t now = domain::now_micros();
  offer_t o{st.env.tenant_id,
            m.conversation_id,
            agent_id,
            m.contact_id,
            std::move(slots),
            now,
            now + offer_lifetime,
            lang,
            kind,
            appointment};
  return o;
}

// Keeps `o` for the conversation (replacing its offer), then `k` in the actor.
void keep_offer(agents_actor* self, offer_t o,
                std::function<void(domain::outcome<domain::done>)> k) {
  db<domain::done>(
      self,
      [o = std::move(o)](persistence::pg_conn& c) {
        persistence::save_offer(c, o);
        return domain::done{};
      },
      std::move(k));
}

// Drops the conversation's offer (it was used), then `k` in the actor.
void drop_offer_then(agents_actor* self, std::int64_t conversation, std::function<void()> k) {
  db<domain::done>(
      self,
      [tid = self->state.env.tenant_id, conversation](persistence::pg_conn& c) {
        persistence::drop_offer(c, tid, conversation);
        return domain::done{};
      },
      [k = std::move(k)](domain::outcome<domain::done>) { k(); });
}

// The next free times of `services` (the first that has any), in the actor.
void find_times(agents_actor* self, std::vector<std::int64_t> services,
                std::function<void(domain::outcome<std::vector<ai::offered_slot>>)> k) {
  auto& st = self->state;
  const std::int64_t now = domain::now_micros();
  offer_slots(*st.env.rt->owner, st.env.tenant_id, std::move(services), now, now + offer_window,
              ai::offered_slots_max,
              callback<std::vector<ai::offered_slot>>(
                  in_actor<domain::outcome<std::vector<ai::offered_slot>>>(self, std::move(k))));
}

// The patient's next appointment, in the actor.
void find_next(agents_actor* self, std::int64_t contact,
               std::function<void(domain::outcome<next_t>)> k) {
  auto& st = self->state;
  next_appointment(*st.env.rt->owner, st.env.tenant_id, contact,
                   callback<next_t>(in_actor<domain::outcome<next_t>>(self, std::move(k))));
}

// ---- the builtin agent: offers and the patient's number ------------------------------------

// Offers the next free slots of the agent's services, and keeps the offer for the patient's
// choice; `prefix` goes before it (a slot just taken).
void offer(agents_actor* self, const domain::ai_agent& a, const ai_inbound& m, ai::language lang,
           std::string prefix, std::function<void(decision)> done) {
  find_times(self, a.service_ids,
             [self, agent_id = a.id, m, lang, prefix,
              done](domain::outcome<std::vector<ai::offered_slot>> slots) {
               if (!slots) return done(booking_failed(lang, slots.error().detail));
               if (slots->empty())
                 return done(booking_decision(prefix + ai::no_slots_text(lang), lang,
                                              ai::handoff_reason::no_answer));
               keep_offer(self,
                          offer_for(self->state, agent_id, m, ai::offer_kind::book, *slots, lang,
                                    std::nullopt),
                          [done, lang, prefix, slots = *slots](domain::outcome<domain::done> kept) {
                            if (!kept) return done(booking_failed(lang, kept.error().detail));
                            done(booking_decision(prefix + ai::offer_text(slots, lang), lang));
                          });
             });
}

// Offers the times the patient's next appointment can move to.
void offer_move(agents_actor* self, const domain::ai_agent& a, const ai_inbound& m,
                ai::language lang, std::string prefix, std::function<void(decision)> done) {
  find_next(self, m.contact_id, [self, a, m, lang, prefix, done](domain::outcome<next_t> next) {
    if (!next) return done(booking_failed(lang, next.error().detail));
    if (!*next || !may_book_service(a, (*next)->slot.service_id)) return done(no_appointment(lang));
    const ai::patient_appointment current = **next;
    find_times(
        self, {current.slot.service_id},
        [self, agent_id = a.id, m, lang, prefix, current,
         done](domain::outcome<std::vector<ai::offered_slot>> slots) {
          if (!slots) return done(booking_failed(lang, slots.error().detail));
          if (slots->empty())
            return done(booking_decision(prefix + ai::no_slots_text(lang), lang,
                                         ai::handoff_reason::no_answer));
          keep_offer(
              self,
              offer_for(self->state, agent_id, m, ai::offer_kind::move, *slots, lang, current.id),
              [done, lang, prefix, current, slots = *slots](domain::outcome<domain::done> kept) {
                if (!kept) return done(booking_failed(lang, kept.error().detail));
                done(booking_decision(prefix + ai::move_offer_text(current.slot, slots, lang),
                                      lang));
              });
        });
  });
}

// Names the patient's next appointment and asks for "1" to cancel it.
void offer_cancel(agents_actor* self, const domain::ai_agent& a, const ai_inbound& m,
                  ai::language lang, std::function<void(decision)> done) {
  find_next(self, m.contact_id,
            [self, a, agent_id = a.id, m, lang, done](domain::outcome<next_t> next) {
              if (!next) return done(booking_failed(lang, next.error().detail));
              if (!*next || !may_book_service(a, (*next)->slot.service_id))
                return done(no_appointment(lang));
              const ai::patient_appointment current = **next;
              keep_offer(self,
                         offer_for(self->state, agent_id, m, ai::offer_kind::cancel, {current.slot},
                                   lang, current.id),
                         [done, lang, current](domain::outcome<domain::done> kept) {
                           if (!kept) return done(booking_failed(lang, kept.error().detail));
                           done(booking_decision(ai::cancel_offer_text(current.slot, lang), lang));
                         });
            });
}

// Books the slot the patient chose; a slot taken meanwhile is offered again.
void book_choice(agents_actor* self, std::int64_t agent_id, const ai_inbound& m,
                 ai::offered_slot slot, ai::language lang, std::function<void(decision)> done) {
  auto& st = self->state;
  domain::booking b;
  b.contact_id = m.contact_id;
  b.service_id = slot.service_id;
  b.calendar_id = slot.calendar_id;
  b.start = slot.start;
  b.notes = "booked by the assistant in conversation " + std::to_string(m.conversation_id);
  b.source = domain::appointment_source::ai;
  auto k = in_actor<domain::outcome<std::string>>(
      self, [self, agent_id, m, slot, lang, done](domain::outcome<std::string> booked) {
        auto& st = self->state;
        if (booked)
          return drop_offer_then(self, m.conversation_id, [done, slot, lang] {
            done(booking_decision(ai::booked_text(slot, lang), lang));
          });
        const auto it = st.agents.find(agent_id);
        if (booked.error().code == errc::conflict && it != st.agents.end())
          return offer(self, it->second.agent, m, lang, ai::slot_taken_text(lang) + "\n", done);
        done(booking_failed(lang, booked.error().detail));
      });
  book_appointment(*st.env.rt->owner, st.env.tenant_id, std::move(b),
                   callback<std::string>(std::move(k)));
}

// Whether the offer's appointment is still the patient's next one (it may have been moved,
// cancelled or passed since the offer).
bool still_next(const domain::outcome<next_t>& next, const offer_t& o) {
  return next && *next && o.appointment_id && (*next)->id == *o.appointment_id;
}

// Moves the patient's next appointment to the slot they chose; a slot taken meanwhile is
// offered again.
void move_choice(agents_actor* self, std::int64_t agent_id, const ai_inbound& m, offer_t o,
                 ai::offered_slot slot, ai::language lang, std::function<void(decision)> done) {
  find_next(self, m.contact_id,
            [self, agent_id, m, o, slot, lang, done](domain::outcome<next_t> next) {
              if (!still_next(next, o))
                return drop_offer_then(self, m.conversation_id,
                                       [done, lang] { done(no_appointment(lang)); });
              auto k = in_actor<domain::outcome<std::string>>(
                  self, [self, agent_id, m, slot, lang, done](domain::outcome<std::string> moved) {
                    if (moved)
                      return drop_offer_then(self, m.conversation_id, [done, slot, lang] {
                        done(booking_decision(ai::moved_text(slot, lang), lang));
                      });
                    const auto it = self->state.agents.find(agent_id);
                    if (moved.error().code == errc::conflict && it != self->state.agents.end())
                      return offer_move(self, it->second.agent, m, lang,
                                        ai::slot_taken_text(lang) + "\n", done);
                    done(booking_failed(lang, moved.error().detail));
                  });
              reschedule_appointment(*self->state.env.rt->owner, self->state.env.tenant_id,
                                     *o.appointment_id, slot.start, slot.calendar_id,
                                     callback<std::string>(std::move(k)));
            });
}

// Cancels the patient's next appointment, once they answered "1" to its offer.
void cancel_choice(agents_actor* self, const ai_inbound& m, offer_t o, ai::language lang,
                   std::function<void(decision)> done) {
  find_next(self, m.contact_id, [self, m, o, lang, done](domain::outcome<next_t> next) {
    if (!still_next(next, o))
      return drop_offer_then(self, m.conversation_id, [done, lang] { done(no_appointment(lang)); });
    const ai::offered_slot slot = (*next)->slot;
    auto k = in_actor<domain::outcome<std::string>>(
        self, [self, m, slot, lang, done](domain::outcome<std::string> cancelled) {
          if (!cancelled) return done(booking_failed(lang, cancelled.error().detail));
          drop_offer_then(self, m.conversation_id, [done, slot, lang] {
            done(booking_decision(ai::cancelled_text(slot, lang), lang));
          });
        });
    cancel_appointment(*self->state.env.rt->owner, self->state.env.tenant_id, *o.appointment_id,
                       "cancelled by the patient through the assistant",
                       callback<std::string>(std::move(k)), domain::appointment_source::ai);
  });
}

// The builtin agent: a choice of its open offer (a number alone, which no screen rule can
// match and which the intent model would only guess at), or, after the screen, a request to
// book, move or cancel; anything else is decided as always, the screen's hand-offs first.
void decide_builtin_booking(agents_actor* self, const domain::ai_agent& a, const ai_inbound& m,
                            const std::optional<offer_t>& open,
                            std::function<void(decision)> done) {
  if (open) {
    const std::size_t n = open->kind == ai::offer_kind::cancel ? 1 : open->slots.size();
    if (auto k = ai::parse_choice(m.text, n); k && *k <= open->slots.size()) {
      // The patient's own words rarely say a language ("2"): the offer's does.
      const ai::language lang = a.reply_language.value_or(open->lang);
      switch (open->kind) {
      case ai::offer_kind::book: return book_choice(self, a.id, m, open->slots[*k - 1], lang, done);
      case ai::offer_kind::move:
        return move_choice(self, a.id, m, *open, open->slots[*k - 1], lang, done);
      case ai::offer_kind::cancel: return cancel_choice(self, m, *open, lang, done);
      }
    }
  }
  const ai::verdict v = ai::screen(m.text, domain::rules_of(a));
  if (v.handoff == ai::handoff_reason::none) {
    const ai::language lang = a.reply_language.value_or(v.lang);
    switch (ai::booking_request_of(m.text)) {
    case ai::booking_request::book: return offer(self, a, m, lang, "", done);
    case ai::booking_request::move: return offer_move(self, a, m, lang, "", done);
    case ai::booking_request::cancel: return offer_cancel(self, a, m, lang, done);
    case ai::booking_request::none: break;
    }
  }
  decide(self, a.id, m.text, std::make_pair(m.conversation_id, m.message_id), std::move(done));
}

// ---- a model's tool calls (docs/ai.md "Tool calls") ----------------------------------------

struct tool_context {
  std::int64_t agent_id = 0;
  ai_inbound message;
  std::optional<offer_t> earlier; // the offer kept before this message
  ai::language lang = ai::language::en;
  std::string confirmation; // what was booked, moved or cancelled (one a message), as said
  bool acted() const { return !confirmation.empty(); }
  // The offer this turn kept (times, or an appointment to cancel): the patient must see it.
  std::optional<ai::offer_kind> shown_kind;
  std::vector<ai::offered_slot> shown;
  std::optional<ai::offered_slot> shown_current;
};
using tool_context_ptr = std::shared_ptr<tool_context>;
using result_fn = std::function<void(std::string)>;

void find_slots_tool(agents_actor* self, tool_context_ptr c, ai::tool_args args, result_fn k) {
  const auto it = self->state.agents.find(c->agent_id);
  if (it == self->state.agents.end()) return k(ai::tool_error("the assistant was deleted"));
  const domain::ai_agent a = it->second.agent;
  const auto offer_times = [self, c, a, k](std::vector<std::int64_t> services,
                                           std::optional<ai::patient_appointment> current) {
    find_times(self, std::move(services),
               [self, c, current, k](domain::outcome<std::vector<ai::offered_slot>> slots) {
                 if (!slots) return k(ai::tool_error(slots.error().detail));
                 const std::optional<ai::offered_slot> shown =
                     current ? std::optional<ai::offered_slot>(current->slot) : std::nullopt;
                 if (slots->empty()) return k(ai::slots_result({}, shown, c->lang));
                 const ai::offer_kind kind = current ? ai::offer_kind::move : ai::offer_kind::book;
                 keep_offer(
                     self,
                     offer_for(self->state, c->agent_id, c->message, kind, *slots, c->lang,
                               current ? std::optional<std::int64_t>(current->id) : std::nullopt),
                     [k, c, kind, shown, slots = *slots](domain::outcome<domain::done> kept) {
                       if (!kept) return k(ai::tool_error(kept.error().detail));
                       c->shown_kind = kind;
                       c->shown = slots;
                       c->shown_current = shown;
                       k(ai::slots_result(slots, shown, c->lang));
                     });
               });
  };
  if (!args.reschedule)
    return offer_times(args.service_id ? std::vector<std::int64_t>{*args.service_id}
                                       : a.service_ids,
                       std::nullopt);
  find_next(self, c->message.contact_id, [a, k, offer_times](domain::outcome<next_t> next) {
    if (!next) return k(ai::tool_error(next.error().detail));
    if (!*next) return k(ai::tool_error("the patient has no upcoming appointment"));
    if (!may_book_service(a, (*next)->slot.service_id))
      return k(ai::tool_error("the patient's next appointment is for a service this assistant "
                              "may not book: a person will help"));
    offer_times({(*next)->slot.service_id}, **next);
  });
}

// The schedule actor's answer to a change a tool asked for (`what`: "booked", "moved",
// "cancelled"): done, it is the turn's one change, said as `confirmation`, and the offer it
// came from is dropped (a repeat of the turn finds nothing to act on); refused, the model is
// told why (a time taken meanwhile, for a booking or a move, as such).
callback<std::string> on_change(agents_actor* self, tool_context_ptr c, ai::offered_slot slot,
                                const char* what, std::string confirmation, result_fn k) {
  const bool time_taken_is_conflict = std::string_view(what) != "cancelled";
  return callback<std::string>(in_actor<domain::outcome<std::string>>(
      self, [self, c, slot, what, confirmation, time_taken_is_conflict,
             k](domain::outcome<std::string> r) {
        if (!r)
          return k(ai::tool_error(time_taken_is_conflict && r.error().code == errc::conflict
                                      ? "that time was just taken: call find_slots again"
                                      : r.error().detail));
        c->confirmation = confirmation;
        drop_offer_then(self, c->message.conversation_id,
                        [k, c, slot, what] { k(ai::done_result(what, slot, c->lang)); });
      }));
}

void book_tool(agents_actor* self, tool_context_ptr c, const ai::tool_args& args, result_fn k) {
  const ai::offered_slot slot = c->earlier->slots[args.option - 1];
  domain::booking b;
  b.contact_id = c->message.contact_id;
  b.service_id = slot.service_id;
  b.calendar_id = slot.calendar_id;
  b.start = slot.start;
  b.notes = "booked by the assistant in conversation " + std::to_string(c->message.conversation_id);
  b.source = domain::appointment_source::ai;
  book_appointment(*self->state.env.rt->owner, self->state.env.tenant_id, std::move(b),
                   on_change(self, c, slot, "booked", ai::booked_text(slot, c->lang), k));
}

void reschedule_tool(agents_actor* self, tool_context_ptr c, const ai::tool_args& args,
                     result_fn k) {
  const ai::offered_slot slot = c->earlier->slots[args.option - 1];
  find_next(self, c->message.contact_id, [self, c, slot, k](domain::outcome<next_t> next) {
    if (!still_next(next, *c->earlier))
      return k(ai::tool_error("the appointment those times were for is no longer the patient's "
                              "next one: call find_slots with reschedule true again"));
    reschedule_appointment(*self->state.env.rt->owner, self->state.env.tenant_id,
                           *c->earlier->appointment_id, slot.start, slot.calendar_id,
                           on_change(self, c, slot, "moved", ai::moved_text(slot, c->lang), k));
  });
}

// Cancelling takes two messages, as with the builtin agent: the first call (the patient asks)
// names the appointment and keeps it as the conversation's offer; the call after the patient
// confirmed, in a later message, cancels that appointment if it is still their next one.
void cancel_tool(agents_actor* self, tool_context_ptr c, const ai::tool_args& args,
                 ai::cancel_step step, result_fn k) {
  find_next(self, c->message.contact_id, [self, c, args, step, k](domain::outcome<next_t> next) {
    if (!next) return k(ai::tool_error(next.error().detail));
    if (!*next) return k(ai::tool_error("the patient has no upcoming appointment"));
    const auto it = self->state.agents.find(c->agent_id);
    if (it == self->state.agents.end() ||
        !may_book_service(it->second.agent, (*next)->slot.service_id))
      return k(ai::tool_error("the patient's next appointment is for a service this assistant "
                              "may not change: a person will help"));
    if (args.appointment_id && *args.appointment_id != (*next)->id)
      return k(ai::tool_error("only the patient's next appointment can be cancelled"));
    const ai::patient_appointment current = **next;
    if (step == ai::cancel_step::ask)
      return keep_offer(self,
                        offer_for(self->state, c->agent_id, c->message, ai::offer_kind::cancel,
                                  {current.slot}, c->lang, current.id),
                        [k, c, current](domain::outcome<domain::done> kept) {
                          if (!kept) return k(ai::tool_error(kept.error().detail));
                          c->shown_kind = ai::offer_kind::cancel;
                          c->shown = {current.slot};
                          k(ai::ask_result(current.slot, c->lang));
                        });
    if (!still_next(next, *c->earlier))
      return k(ai::tool_error("the appointment the patient confirmed is no longer their next "
                              "one: nothing was cancelled"));
    cancel_appointment(
        *self->state.env.rt->owner, self->state.env.tenant_id, current.id,
        "cancelled by the patient through the assistant",
        on_change(self, c, current.slot, "cancelled", ai::cancelled_text(current.slot, c->lang), k),
        domain::appointment_source::ai);
  });
}

// Runs one call: read, checked by the rules of domain/ai_tools.hpp, then carried out.
void run_tool(agents_actor* self, tool_context_ptr c, const domain::tool_call& call, result_fn k) {
  auto read = ai::read_tool_call(call.name, call.arguments);
  if (auto* why = std::get_if<std::string>(&read)) return k(ai::tool_error(*why));
  const ai::tool_args args = std::get<ai::tool_args>(read);
  const auto it = self->state.agents.find(c->agent_id);
  if (it == self->state.agents.end()) return k(ai::tool_error("the assistant was deleted"));
  const ai::tool_turn turn{c->message.text, &it->second.agent.service_ids,
                           c->earlier ? std::optional<ai::offer_kind>(c->earlier->kind)
                                      : std::nullopt,
                           c->earlier ? &c->earlier->slots : nullptr};
  if (auto why = ai::tool_refusal(args, turn)) return k(ai::tool_error(*why));
  if (c->acted() && args.which != ai::tool::find_slots)
    return k(ai::tool_error("one change a message: this one already made one"));
  switch (args.which) {
  case ai::tool::find_slots: return find_slots_tool(self, c, args, std::move(k));
  case ai::tool::book_appointment: return book_tool(self, c, args, std::move(k));
  case ai::tool::reschedule_appointment: return reschedule_tool(self, c, args, std::move(k));
  case ai::tool::cancel_appointment:
    return cancel_tool(self, c, args, ai::cancel_step_of(turn), std::move(k));
  }
}

// The model's answer after its tool calls, made to say what the patient must know: an offer
// this turn kept is listed as carecrm numbered it (the model may have left it out or numbered
// it otherwise), an offer the patient will not see (the turn handed off) is dropped, and what
// was done is said even when the turn ends in a hand-off.
void finish_tool_turn(agents_actor* self, const tool_context& c, decision d,
                      std::function<void(decision)> done) {
  if (c.acted() || c.shown_kind) d.intent = ai::intent::booking;
  if (d.handoff == ai::handoff_reason::none && c.shown_kind) {
    const bool listed = std::all_of(c.shown.begin(), c.shown.end(), [&](const auto& s) {
      return d.answer.find(ai::slot_label(s.local_start, c.lang)) != std::string::npos;
    });
    if (!listed) {
      d.answer += "\n\n";
      d.answer += *c.shown_kind == ai::offer_kind::cancel
                      ? ai::cancel_offer_text(c.shown[0], c.lang)
                  : c.shown_current ? ai::move_offer_text(*c.shown_current, c.shown, c.lang)
                                    : ai::offer_text(c.shown, c.lang);
    }
  }
  if (c.acted() && d.handoff != ai::handoff_reason::none)
    d.answer = c.confirmation + "\n\n" + d.answer;
  if (d.handoff != ai::handoff_reason::none && c.shown_kind && !c.acted())
    return drop_offer_then(self, c.message.conversation_id,
                           [d = std::move(d), done]() mutable { done(std::move(d)); });
  done(std::move(d));
}

} // namespace

bool books(const domain::ai_agent& a) {
  return !a.service_ids.empty();
}

void decide_in_conversation(agents_actor* self, std::int64_t agent_id, const ai_inbound& m,
                            std::function<void(decision)> done) {
  auto& st = self->state;
  const auto it = st.agents.find(agent_id);
  const auto conversation = std::make_pair(m.conversation_id, m.message_id);
  if (it == st.agents.end() || !books(it->second.agent))
    return decide(self, agent_id, m.text, conversation, std::move(done));
  db<std::optional<offer_t>>(
      self,
      [tid = st.env.tenant_id, conv = m.conversation_id](persistence::pg_conn& c) {
        return persistence::open_offer(c, tid, conv, domain::now_micros());
      },
      [self, agent_id, m, conversation, done](domain::outcome<std::optional<offer_t>> open) {
        auto& st = self->state;
        const auto it = st.agents.find(agent_id);
        if (it == st.agents.end()) return decide(self, agent_id, m.text, conversation, done);
        const domain::ai_agent& a = it->second.agent;
        std::optional<offer_t> earlier;
        if (open && *open && (*open)->agent_id == agent_id && (*open)->contact_id == m.contact_id)
          earlier = **open;
        if (a.provider == domain::ai_provider::builtin)
          return decide_builtin_booking(self, a, m, earlier, done);
        auto c = std::make_shared<tool_context>();
        c->agent_id = agent_id;
        c->message = m;
        c->earlier = std::move(earlier);
        c->lang = a.reply_language.value_or(ai::screen(m.text, domain::rules_of(a)).lang);
        const bool choice =
            c->earlier && (c->earlier->kind == ai::offer_kind::cancel
                               ? ai::confirms_cancel(m.text)
                               : ai::named_option(m.text, c->earlier->slots).has_value());
        decide(
            self, agent_id, m.text, conversation,
            [self, c, done](decision d) { finish_tool_turn(self, *c, std::move(d), done); },
            [self, c](const domain::tool_call& call, result_fn k) {
              run_tool(self, c, call, std::move(k));
            },
            choice);
      });
}

} // namespace crm::actors::agents_impl
