// The AI agents actor (actors/agents_internal.hpp): deciding on a message with the builtin
// provider or a model, and the conversations' lines that keep their messages in order.
#include "actors/agents_internal.hpp"

namespace crm::actors::agents_impl {

// ---- deciding --------------------------------------------------------------------------------

std::size_t provider_index(domain::ai_provider p) {
  return p == domain::ai_provider::builtin ? 0 : 1;
}

void count(const decision& d) {
  auto& m = ai_counts();
  auto p = provider_index(d.provider);
  auto i = static_cast<std::size_t>(d.intent);
  if (i < ai_meter::intents) m.replies[p][i]++;
  auto r = static_cast<std::size_t>(d.handoff);
  if (d.handoff != ai::handoff_reason::none && r < ai_meter::reasons) m.handoffs[r]++;
  m.latency_micros[p] += static_cast<std::uint64_t>(d.latency_ms * 1000);
  m.latency_count[p]++;
}

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

decision decide_builtin(const agents_state& st, const agent_entry& e, std::string_view message) {
  auto started = std::chrono::steady_clock::now();
  auto text_of = [&st](std::int64_t id) -> const std::string* {
    auto it = st.passages.find(id);
    return it == st.passages.end() ? nullptr : &it->second.text;
  };
  auto a = ai::answer_builtin(e.index, text_of, message, domain::rules_of(e.agent));
  decision d;
  d.answer = std::move(a.answer);
  d.intent = a.kind;
  d.passages = std::move(a.passages);
  if (!d.passages.empty()) {
    // The console shows each cited passage's score: the same search again (microseconds).
    auto hits = e.index.search(message, 8);
    for (auto id : d.passages) {
      double score = 0;
      for (auto& h : hits)
        if (h.passage_id == id) score = h.score;
      d.scores.push_back(score);
    }
  }
  d.handoff = a.handoff;
  d.lang = a.lang;
  d.provider = domain::ai_provider::builtin;
  d.latency_ms = elapsed_ms(started);
  return d;
}

// Whether the screen alone decides (the model never sees such a message).
bool screened_out(ai::handoff_reason r) {
  return r == ai::handoff_reason::urgent || r == ai::handoff_reason::clinical ||
         r == ai::handoff_reason::keyword || r == ai::handoff_reason::complaint;
}

decision handoff_on_failure(const domain::ai_agent& a, ai::language lang, ai::intent intent,
                            std::string error) {
  decision d;
  d.answer = std::string(ai::phrase_handoff(lang));
  d.intent = intent;
  d.handoff = ai::handoff_reason::provider_error;
  d.lang = lang;
  d.provider = a.provider;
  d.error = std::move(error);
  return d;
}

bool retryable(const net::client_response& r) {
  return !r.ok || r.status == 429 || r.status >= 500;
}

std::chrono::milliseconds backoff(const net::client_response& r, int attempt) {
  // Retry-After is not exposed by the client: the backoff doubles from 0.5 s.
  (void)r;
  return std::chrono::milliseconds(500 << (attempt - 1));
}

// Calls the model, retrying 429, 5xx and failed connections; `done` runs in the actor.
void call_model(agents_actor* self, net::client_request req, int attempt,
                std::function<void(net::client_response)> done) {
  auto& st = self->state;
  if (!st.opts || !st.opts->client) {
    net::client_response r;
    r.error = "outbound HTTP is not set up";
    return done(std::move(r));
  }
  auto copy = req;
  auto k = in_actor<net::client_response>(
      self, [self, req = std::move(req), attempt, done](net::client_response r) mutable {
        bool ok = r.ok && r.status >= 200 && r.status < 300;
        if (ok || attempt >= max_model_attempts || !retryable(r) || self->state.stopping)
          return done(std::move(r));
        auto delay = backoff(r, attempt);
        self->state.pending_io++;
        self->delayed_send(self, delay, resume_atom::value,
                           continuation{[self, req = std::move(req), attempt, done]() mutable {
                             self->state.pending_io--;
                             call_model(self, std::move(req), attempt + 1, std::move(done));
                           }});
      });
  st.opts->client->send(std::move(copy), std::move(k));
}

// The openai_compatible provider: the screen first, then the model with the best passages and
// the conversation's history, then the screen again on what the model said.
void decide_model(agents_actor* self, const agent_entry& e, std::string message,
                  std::vector<domain::chat_turn> history, std::function<void(decision)> done) {
  auto started = std::chrono::steady_clock::now();
  auto& st = self->state;
  auto rules = domain::rules_of(e.agent);
  auto screened = decide_builtin(st, e, message);
  if (screened_out(screened.handoff)) {
    screened.provider = e.agent.provider;
    return done(std::move(screened));
  }
  auto verdict = ai::screen(message, rules);
  std::vector<domain::cited_passage> cited;
  std::vector<std::int64_t> ids;
  std::vector<double> scores;
  for (auto& h : e.index.search(message, model_passages)) {
    auto p = st.passages.find(h.passage_id);
    if (p == st.passages.end()) continue;
    cited.push_back({h.passage_id, ai::passage{p->second.title, p->second.text}.searched()});
    ids.push_back(h.passage_id);
    scores.push_back(h.score);
  }
  net::client_request req;
  req.method = "POST";
  auto base = e.agent.base_url.value_or("");
  while (!base.empty() && base.back() == '/') base.pop_back();
  req.url = base + "/chat/completions";
  req.headers.push_back({"Content-Type", "application/json"});
  if (e.agent.stream) req.headers.push_back({"Accept", "text/event-stream"});
  if (e.agent.api_key) req.headers.push_back({"Authorization", "Bearer " + *e.agent.api_key});
  req.body = domain::chat_completion_request(e.agent, cited, history, message);
  if (st.opts)
    req.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(st.opts->ai_timeout * 1000));
  auto agent = e.agent;
  auto intent = verdict.intent.kind;
  auto lang = verdict.lang;
  call_model(self, std::move(req), 1,
             [agent, intent, lang, ids, scores, started, rules, done](net::client_response r) {
               auto& m = ai_counts();
               auto fail = [&](std::string why) {
                 m.calls_failed[1]++;
                 auto d = handoff_on_failure(agent, lang, intent, std::move(why));
                 d.latency_ms = elapsed_ms(started);
                 done(std::move(d));
               };
               if (!r.ok) return fail("the provider could not be reached: " + r.error);
               if (r.status < 200 || r.status >= 300)
                 return fail("the provider answered HTTP " + std::to_string(r.status));
               auto answer = domain::read_chat_completion(r.body);
               if (!answer) return fail("the provider's answer could not be read");
               m.calls_ok[1]++;
               decision d;
               d.provider = agent.provider;
               d.intent = intent;
               d.lang = lang;
               d.prompt_tokens = answer->prompt_tokens;
               d.completion_tokens = answer->completion_tokens;
               d.passages = ids;
               d.scores = scores;
               auto trimmed = ai::fold(answer->content);
               // What the model says is screened too, by the rules (the trained model knows
               // patients' messages, not answers): it never gives clinical advice.
               auto after = ai::classify(answer->content);
               bool clinical_answer = !after.rule.empty() && (after.kind == ai::intent::urgent ||
                                                              after.kind == ai::intent::clinical);
               if (trimmed.empty()) {
                 d.handoff = ai::handoff_reason::provider_error;
                 d.error = "the provider's answer was empty";
               } else if (answer->content.find("[HANDOFF]") != std::string::npos) {
                 d.handoff = ai::handoff_reason::no_answer;
               } else if (clinical_answer) {
                 d.handoff = ai::handoff_reason::clinical;
                 d.error = "the model's answer was clinical: not sent";
               }
               if (d.handoff != ai::handoff_reason::none) {
                 d.answer = std::string(ai::phrase_handoff(lang));
                 d.passages.clear();
                 d.scores.clear();
               } else {
                 d.answer = answer->content;
               }
               d.latency_ms = elapsed_ms(started);
               done(std::move(d));
             });
}

// `k` runs in the actor with the conversation's last turns before `message_id` (none for the
// console or when Postgres cannot answer: the model then sees only the message).
void with_history(agents_actor* self, std::optional<std::pair<std::int64_t, std::int64_t>> at,
                  std::function<void(std::vector<domain::chat_turn>)> k) {
  if (!at) return k({});
  db<std::vector<domain::chat_turn>>(
      self,
      [tid = self->state.env.tenant_id, at](persistence::pg_conn& c) {
        return persistence::recent_turns(c, tid, at->first, at->second, history_turns);
      },
      [k](domain::outcome<std::vector<domain::chat_turn>> r) {
        k(r ? std::move(*r) : std::vector<domain::chat_turn>{});
      });
}

// The decision on a message whose agent was deleted before it could decide: a person answers.
decision agent_gone() {
  decision d;
  d.answer = std::string(ai::phrase_handoff(ai::language::en));
  d.handoff = ai::handoff_reason::provider_error;
  d.error = "the agent was deleted";
  return d;
}

// Decides on `message` with agent `agent_id` (in the actor, maybe later).
void decide(agents_actor* self, std::int64_t agent_id, std::string message,
            std::optional<std::pair<std::int64_t, std::int64_t>> conversation,
            std::function<void(decision)> done) {
  auto& st = self->state;
  auto it = st.agents.find(agent_id);
  if (it == st.agents.end()) {
    return done(agent_gone());
  }
  auto counted = [done](decision d) {
    count(d);
    done(std::move(d));
  };
  if (it->second.agent.provider == domain::ai_provider::builtin)
    return counted(decide_builtin(st, it->second, message));
  with_history(self, conversation,
               [self, agent_id, message, counted](std::vector<domain::chat_turn> history) {
                 auto& st = self->state;
                 auto it = st.agents.find(agent_id);
                 if (it == st.agents.end()) {
                   return counted(agent_gone());
                 }
                 decide_model(self, it->second, message, std::move(history), counted);
               });
}

// ---- booking (docs/ai.md "Booking") ---------------------------------------------------------

constexpr std::int64_t hour_us = std::int64_t{3600} * 1'000'000;
constexpr std::int64_t offer_window = 14 * 24 * hour_us; // slots offered: the next two weeks
constexpr std::int64_t offer_lifetime = 24 * hour_us;    // an offer not answered: forgotten

bool books(const domain::ai_agent& a) {
  return a.provider == domain::ai_provider::builtin && !a.service_ids.empty();
}

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

// Offers the next free slots of the agent's services, and keeps the offer for the patient's
// choice; `prefix` goes before it (a slot just taken).
void offer(agents_actor* self, const domain::ai_agent& a, const ai_inbound& m, ai::language lang,
           std::string prefix, std::function<void(decision)> done) {
  auto& st = self->state;
  const std::int64_t now = domain::now_micros();
  auto k = in_actor<domain::outcome<std::vector<ai::offered_slot>>>(
      self, [self, agent_id = a.id, m, lang, prefix, now,
             done](domain::outcome<std::vector<ai::offered_slot>> slots) {
        if (!slots) return done(booking_failed(lang, slots.error().detail));
        if (slots->empty())
          return done(booking_decision(prefix + ai::no_slots_text(lang), lang,
                                       ai::handoff_reason::no_answer));
        persistence::booking_offer o{self->state.env.tenant_id,
                                     m.conversation_id,
                                     agent_id,
                                     m.contact_id,
                                     *slots,
                                     now,
                                     now + offer_lifetime,
                                     lang};
        db<domain::done>(
            self,
            [o](persistence::pg_conn& c) {
              persistence::save_offer(c, o);
              return domain::done{};
            },
            [done, lang, prefix, slots = *slots](domain::outcome<domain::done> saved) {
              if (!saved) return done(booking_failed(lang, saved.error().detail));
              done(booking_decision(prefix + ai::offer_text(slots, lang), lang));
            });
      });
  offer_slots(*st.env.rt->owner, st.env.tenant_id, a.service_ids, now, now + offer_window,
              ai::offered_slots_max, callback<std::vector<ai::offered_slot>>(std::move(k)));
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
        if (booked) {
          return db<domain::done>(
              self,
              [tid = st.env.tenant_id, conv = m.conversation_id](persistence::pg_conn& c) {
                persistence::drop_offer(c, tid, conv);
                return domain::done{};
              },
              [done, slot, lang](domain::outcome<domain::done>) {
                done(booking_decision(ai::booked_text(slot, lang), lang));
              });
        }
        const auto it = st.agents.find(agent_id);
        if (booked.error().code == errc::conflict && it != st.agents.end())
          return offer(self, it->second.agent, m, lang, ai::slot_taken_text(lang) + "\n", done);
        done(booking_failed(lang, booked.error().detail));
      });
  book_appointment(*st.env.rt->owner, st.env.tenant_id, std::move(b),
                   callback<std::string>(std::move(k)));
}

// A message in a conversation: an agent that books (builtin, with services) takes a choice of
// its open offer (a number alone, which no screen rule can match and which the intent model
// would only guess at), or, after the screen, a request to book; anything else is decided as
// always, the screen's hand-offs first.
void decide_in_conversation(agents_actor* self, std::int64_t agent_id, const ai_inbound& m,
                            std::function<void(decision)> done) {
  auto& st = self->state;
  const auto it = st.agents.find(agent_id);
  const auto conversation = std::make_pair(m.conversation_id, m.message_id);
  if (it == st.agents.end() || !books(it->second.agent))
    return decide(self, agent_id, m.text, conversation, std::move(done));
  db<std::optional<persistence::booking_offer>>(
      self,
      [tid = st.env.tenant_id, conv = m.conversation_id](persistence::pg_conn& c) {
        return persistence::open_offer(c, tid, conv, domain::now_micros());
      },
      [self, agent_id, m, conversation,
       done](domain::outcome<std::optional<persistence::booking_offer>> open) {
        auto& st = self->state;
        const auto it = st.agents.find(agent_id);
        if (it == st.agents.end()) return decide(self, agent_id, m.text, conversation, done);
        const domain::ai_agent& a = it->second.agent;
        if (open && *open && (*open)->agent_id == agent_id && (*open)->contact_id == m.contact_id) {
          if (auto k = ai::parse_choice(m.text, (*open)->slots.size())) {
            // The patient's own words rarely say a language ("2"): the offer's does.
            const ai::language lang = a.reply_language.value_or((*open)->lang);
            return book_choice(self, agent_id, m, (*open)->slots[*k - 1], lang, done);
          }
        }
        const ai::verdict v = ai::screen(m.text, domain::rules_of(a));
        if (v.handoff == ai::handoff_reason::none && ai::asks_to_book(m.text))
          return offer(self, a, m, v.lang, "", done);
        decide(self, agent_id, m.text, conversation, done);
      });
}

// ---- conversations ---------------------------------------------------------------------------

agent_reply to_agent_reply(const domain::ai_agent& a, const ai_inbound& m, const decision& d,
                           bool auto_reply) {
  agent_reply r;
  r.auto_reply = auto_reply;
  r.agent_id = a.id;
  r.conversation_id = m.conversation_id;
  r.message_id = m.message_id;
  if (!d.answer.empty()) r.text = d.answer;
  r.intent = ai::intent_name(d.intent);
  if (d.handoff != ai::handoff_reason::none) {
    r.handoff_reason = ai::handoff_reason_name(d.handoff);
    r.assignee_id = a.handoff_assignee_id;
  }
  r.passages = d.passages;
  r.provider = domain::to_string(d.provider);
  r.prompt_tokens = d.prompt_tokens;
  r.completion_tokens = d.completion_tokens;
  r.latency_ms = d.latency_ms;
  r.error = d.error;
  r.depth = m.depth;
  return r;
}

void next_in_line(agents_actor* self, std::int64_t conversation_id);

// Sends the decision to the channel actor, which applies it in the conversation's order.
void deliver(agents_actor* self, const domain::ai_agent& a, const ai_inbound& m, decision d,
             bool auto_reply, callback<std::string> then) {
  deliver_agent_reply(*self->state.env.rt->owner, self->state.env.tenant_id,
                      to_agent_reply(a, m, d, auto_reply), std::move(then));
}

void run_line(agents_actor* self, std::int64_t conversation_id) {
  auto& st = self->state;
  auto& line = st.lines[conversation_id];
  if (line.busy || line.queue.empty()) {
    if (!line.busy && line.queue.empty()) st.lines.erase(conversation_id);
    return;
  }
  line.busy = true;
  auto p = std::move(line.queue.front());
  line.queue.pop_front();
  decide_in_conversation(self, p.agent_id, p.message,
                         [self, conversation_id, done = std::move(p.done)](decision d) {
                           done(std::move(d));
                           next_in_line(self, conversation_id);
                         });
}

void next_in_line(agents_actor* self, std::int64_t conversation_id) {
  auto it = self->state.lines.find(conversation_id);
  if (it == self->state.lines.end()) return;
  it->second.busy = false;
  run_line(self, conversation_id);
}

// Answers `m` with agent `a`: a screened hand-off at once, anything else in the
// conversation's line. `then` gets the channel actor's answer.
void answer_message(agents_actor* self, std::int64_t agent_id, ai_inbound m, bool auto_reply,
                    std::function<void(const decision&, domain::outcome<std::string>)> then) {
  auto& st = self->state;
  auto it = st.agents.find(agent_id);
  if (it == st.agents.end()) return;
  auto finish = [self, agent_id, m, auto_reply, then](decision d) {
    auto& st = self->state;
    auto it = st.agents.find(agent_id);
    domain::ai_agent a;
    if (it != st.agents.end()) a = it->second.agent;
    a.id = agent_id;
    auto k = in_actor<domain::outcome<std::string>>(
        self, [d, then](domain::outcome<std::string> r) { then(d, std::move(r)); });
    deliver(self, a, m, d, auto_reply, callback<std::string>(std::move(k)));
  };
  // A builtin agent decides at once, unless it books: booking reads and writes, so the
  // conversation's messages take their turn, and a choice of its offer comes before the
  // screen's intent model (decide_in_conversation); the screen's rules still hand off first.
  const domain::ai_agent& a = it->second.agent;
  if (!books(a)) {
    auto v = ai::screen(m.text, domain::rules_of(a));
    if (screened_out(v.handoff) || a.provider == domain::ai_provider::builtin)
      return decide(self, agent_id, m.text, std::nullopt, finish);
  }
  auto& line = st.lines[m.conversation_id];
  line.queue.push_back(pending_message{agent_id, m, finish});
  run_line(self, m.conversation_id);
}

const agent_entry* auto_agent_of(const agents_state& st, std::int64_t channel_id) {
  for (auto& [id, e] : st.agents)
    if (e.agent.is_active && e.agent.auto_reply &&
        std::find(e.agent.channel_ids.begin(), e.agent.channel_ids.end(), channel_id) !=
            e.agent.channel_ids.end())
      return &e;
  return nullptr;
}

json::value passages_json(const agents_state& st, const decision& d) {
  json::array out;
  for (std::size_t i = 0; i < d.passages.size(); ++i) {
    auto p = st.passages.find(d.passages[i]);
    if (p == st.passages.end()) continue;
    json::object o{{"id", d.passages[i]}, {"document_id", p->second.document_id}};
    auto doc = st.documents.find(p->second.document_id);
    o["title"] = doc == st.documents.end() ? json::value(nullptr) : json::value(doc->second.title);
    o["text"] = p->second.text;
    if (i < d.scores.size())
      o["score"] = d.scores[i];
    else
      o["score"] = nullptr;
    out.push_back(std::move(o));
  }
  return out;
}

json::object decision_json(const agents_state& st, const decision& d) {
  json::object o{{"answer", d.answer},
                 {"intent", ai::intent_name(d.intent)},
                 {"passages", passages_json(st, d)},
                 {"handoff", d.handoff != ai::handoff_reason::none},
                 {"language", ai::language_name(d.lang)},
                 {"provider", domain::to_string(d.provider)}};
  o["handoff_reason"] = d.handoff == ai::handoff_reason::none
                            ? json::value(nullptr)
                            : json::value(ai::handoff_reason_name(d.handoff));
  if (d.prompt_tokens || d.completion_tokens)
    o["usage"] = json::object{
        {"prompt_tokens", d.prompt_tokens ? json::value(*d.prompt_tokens) : json::value()},
        {"completion_tokens",
         d.completion_tokens ? json::value(*d.completion_tokens) : json::value()}};
  else
    o["usage"] = nullptr;
  return o;
}

void log_unstored(std::int64_t tenant, std::int64_t message_id,
                  const domain::outcome<std::string>& r) {
  if (!r)
    log_warn("tenant {}: the AI decision on message {} was not stored ({}); it stays waiting",
             tenant, message_id, r.error().detail);
}

// An inbound message for the auto-replying agent of its channel (once per incarnation).
void auto_answer(agents_actor* self, const ai_inbound& m) {
  auto& st = self->state;
  if (!st.taken.insert(m.message_id).second) return;
  if (st.taken.size() > 100'000) st.taken.clear(); // the store refuses a second decision anyway
  auto agent = auto_agent_of(st, m.channel_id);
  if (!agent) return;
  answer_message(
      self, agent->agent.id, m, true,
      [tid = st.env.tenant_id, id = m.message_id](const decision&, domain::outcome<std::string> r) {
        log_unstored(tid, id, r);
      });
}

void take_up_pending(agents_actor* self, std::vector<persistence::pending_inbound> pending) {
  auto& st = self->state;
  for (auto& p : pending) {
    if (!auto_agent_of(st, p.channel_id)) {
      // The channel has no auto-replying agent any more: nobody is to answer it.
      db<domain::done>(
          self,
          [tid = st.env.tenant_id, id = p.message_id](persistence::pg_conn& c) {
            persistence::forget_pending_ai(c, tid, id);
            return domain::done{};
          },
          [](domain::outcome<domain::done>) {});
      continue;
    }
    auto_answer(self, ai_inbound{p.conversation_id, p.channel_id, p.contact_id, p.message_id,
                                 std::move(p.text), 0});
  }
}

} // namespace crm::actors::agents_impl
