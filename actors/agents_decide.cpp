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

// One turn of the openai_compatible provider: what the request holds, the rounds of tool
// calls so far, and the usage summed over the calls.
struct model_turn {
  domain::ai_agent agent;
  std::string message;
  std::vector<domain::chat_turn> history;
  std::vector<domain::cited_passage> cited;
  std::vector<std::int64_t> ids;
  std::vector<double> scores;
  ai::intent intent = ai::intent::other;
  ai::language lang = ai::language::en;
  std::chrono::steady_clock::time_point started;
  tool_runner tools;
  domain::chat_tools chat;
  std::optional<int> prompt_tokens, completion_tokens;
  std::function<void(decision)> done;
};
using model_turn_ptr = std::shared_ptr<model_turn>;

constexpr std::size_t max_tool_rounds = 3;

void ask_model(agents_actor* self, model_turn_ptr t);

void add_usage(std::optional<int>& sum, std::optional<int> more) {
  if (more) sum = sum.value_or(0) + *more;
}

// What the model said, screened: it never gives clinical advice, and [HANDOFF] hands off.
void finish_model_turn(const model_turn& t, const domain::chat_completion& answer) {
  decision d;
  d.provider = t.agent.provider;
  d.intent = t.intent;
  d.lang = t.lang;
  d.prompt_tokens = t.prompt_tokens;
  d.completion_tokens = t.completion_tokens;
  d.passages = t.ids;
  d.scores = t.scores;
  auto trimmed = ai::fold(answer.content);
  // What the model says is screened too, by the rules (the trained model knows patients'
  // messages, not answers): it never gives clinical advice.
  auto after = ai::classify(answer.content);
  bool clinical_answer = !after.rule.empty() &&
                         (after.kind == ai::intent::urgent || after.kind == ai::intent::clinical);
  if (trimmed.empty()) {
    d.handoff = ai::handoff_reason::provider_error;
    d.error = "the provider's answer was empty";
  } else if (answer.content.find("[HANDOFF]") != std::string::npos) {
    d.handoff = ai::handoff_reason::no_answer;
  } else if (clinical_answer) {
    d.handoff = ai::handoff_reason::clinical;
    d.error = "the model's answer was clinical: not sent";
  }
  if (d.handoff != ai::handoff_reason::none) {
    d.answer = std::string(ai::phrase_handoff(t.lang));
    d.passages.clear();
    d.scores.clear();
  } else {
    d.answer = answer.content;
  }
  d.latency_ms = elapsed_ms(t.started);
  t.done(std::move(d));
}

// Runs the calls of one answer in order, then asks the model again with their results.
void run_tool_calls(agents_actor* self, model_turn_ptr t, std::vector<domain::tool_call> calls,
                    std::vector<std::string> results) {
  if (results.size() == calls.size()) {
    t->chat.rounds.push_back({std::move(calls), std::move(results)});
    return ask_model(self, std::move(t));
  }
  if (self->state.stopping) return; // the turn is dropped; its message stays waiting
  const domain::tool_call call = calls[results.size()];
  t->tools(call, [self, t, calls = std::move(calls),
                  results = std::move(results)](std::string result) mutable {
    results.push_back(std::move(result));
    if (self->state.stopping) return; // the turn is dropped; its message stays waiting
    run_tool_calls(self, t, std::move(calls), std::move(results));
  });
}

void ask_model(agents_actor* self, model_turn_ptr t) {
  auto& st = self->state;
  net::client_request req;
  req.method = "POST";
  auto base = t->agent.base_url.value_or("");
  while (!base.empty() && base.back() == '/') base.pop_back();
  req.url = base + "/chat/completions";
  req.headers.push_back({"Content-Type", "application/json"});
  if (t->agent.stream) req.headers.push_back({"Accept", "text/event-stream"});
  if (t->agent.api_key) req.headers.push_back({"Authorization", "Bearer " + *t->agent.api_key});
  req.body = domain::chat_completion_request(t->agent, t->cited, t->history, t->message, t->chat);
  if (st.opts)
    req.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(st.opts->ai_timeout * 1000));
  call_model(self, std::move(req), 1, [self, t](net::client_response r) {
    auto& m = ai_counts();
    auto fail = [&](std::string why) {
      m.calls_failed[1]++;
      auto d = handoff_on_failure(t->agent, t->lang, t->intent, std::move(why));
      d.prompt_tokens = t->prompt_tokens;
      d.completion_tokens = t->completion_tokens;
      d.latency_ms = elapsed_ms(t->started);
      t->done(std::move(d));
    };
    if (!r.ok) return fail("the provider could not be reached: " + r.error);
    if (r.status < 200 || r.status >= 300)
      return fail("the provider answered HTTP " + std::to_string(r.status));
    auto answer = domain::read_chat_completion(r.body);
    if (!answer) return fail("the provider's answer could not be read");
    m.calls_ok[1]++;
    add_usage(t->prompt_tokens, answer->prompt_tokens);
    add_usage(t->completion_tokens, answer->completion_tokens);
    if (answer->tool_calls.empty()) return finish_model_turn(*t, *answer);
    if (!t->tools) return fail("the model called a tool, and none was offered");
    if (answer->tool_calls.size() > ai::tool_calls_max)
      return fail("the model called " + std::to_string(answer->tool_calls.size()) +
                  " tools in one answer");
    if (t->chat.rounds.size() >= max_tool_rounds)
      return fail("the model kept calling tools after " + std::to_string(max_tool_rounds) +
                  " rounds");
    run_tool_calls(self, t, std::move(answer->tool_calls), {});
  });
}

// The openai_compatible provider: the screen first, then the model with the best passages and
// the conversation's history (and, with `tools`, the booking functions, each call run and its
// result given back, up to three rounds), then the screen again on what the model said.
void decide_model(agents_actor* self, const agent_entry& e, std::string message,
                  std::vector<domain::chat_turn> history, std::function<void(decision)> done,
                  tool_runner tools, bool choice) {
  auto started = std::chrono::steady_clock::now();
  auto& st = self->state;
  auto rules = domain::rules_of(e.agent);
  auto screened = decide_builtin(st, e, message);
  const bool model_guess =
      screened.handoff != ai::handoff_reason::keyword && ai::classify(message).rule.empty();
  if (screened_out(screened.handoff) && !(choice && model_guess)) {
    screened.provider = e.agent.provider;
    return done(std::move(screened));
  }
  auto verdict = ai::screen(message, rules);
  auto t = std::make_shared<model_turn>();
  for (auto& h : e.index.search(message, model_passages)) {
    auto p = st.passages.find(h.passage_id);
    if (p == st.passages.end()) continue;
    t->cited.push_back({h.passage_id, ai::passage{p->second.title, p->second.text}.searched()});
    t->ids.push_back(h.passage_id);
    t->scores.push_back(h.score);
  }
  t->agent = e.agent;
  t->message = std::move(message);
  t->history = std::move(history);
  t->intent = verdict.intent.kind;
  t->lang = verdict.lang;
  t->started = started;
  t->done = std::move(done);
  if (tools) {
    t->tools = std::move(tools);
    t->chat.definitions = ai::booking_tool_definitions();
    t->chat.rules = ai::booking_tool_rules();
  }
  ask_model(self, std::move(t));
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
            std::function<void(decision)> done, tool_runner tools, bool choice) {
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
               [self, agent_id, message, counted, tools = std::move(tools),
                choice](std::vector<domain::chat_turn> history) {
                 auto& st = self->state;
                 auto it = st.agents.find(agent_id);
                 if (it == st.agents.end()) {
                   return counted(agent_gone());
                 }
                 decide_model(self, it->second, message, std::move(history), counted, tools,
                              choice);
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
