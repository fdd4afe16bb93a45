// The agent actor of one tenant (docs/ai.md): the only writer of its AI agents and knowledge
// documents, the owner of each agent's retrieval index, and of the replies in flight.
//
// - Agents, documents and passages load on first use; each agent's BM25 index is built from
//   its passages then, and changed only after a document's COMMIT.
// - Writes run one at a time (an agent deleted while a document of it is being stored cannot
//   leave the index holding passages of nothing).
// - A message to answer is screened first (urgent, clinical, a hand-off keyword, a complaint):
//   a hand-off goes to the channel actor at once, never behind a slow model. Other messages of
//   one conversation go to the provider one at a time, in order. The channel actor applies
//   every decision in the conversation's order and drops a reply to a conversation that was
//   handed to a person meanwhile.
#include "actors/agents.hpp"

#include "actors/async_io.hpp"
#include "actors/channels.hpp"
#include "actors/contacts.hpp"
#include "actors/system.hpp"
#include "actors/workflows.hpp"
#include "actors/writer.hpp"
#include "domain/clock.hpp"
#include "domain/json_parse.hpp"
#include "domain/page_json.hpp"
#include "net/http_client.hpp"
#include "persistence/ai_repo.hpp"
#include "persistence/channel_repo.hpp"
#include "persistence/contact_repo.hpp"
#include "persistence/log.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::actors::agent_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::document_input> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::ai_inbound> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::draft_request> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<std::int64_t>> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<bool>> : std::true_type {};
} // namespace caf

namespace crm::actors {
namespace {

namespace json = boost::json;
namespace ai = domain::ai;
using domain::errc;
using domain::failure;

using delete_atom = caf::atom_constant<caf::atom("delete")>;
using doc_atom = caf::atom_constant<caf::atom("doc")>;
using replies_atom = caf::atom_constant<caf::atom("replies")>;
using chat_atom = caf::atom_constant<caf::atom("chat")>;
using inbound_atom = caf::atom_constant<caf::atom("inbound")>;
using reply_atom = caf::atom_constant<caf::atom("reply")>;
using summary_atom = caf::atom_constant<caf::atom("summary")>;
using draft_atom = caf::atom_constant<caf::atom("draft")>;

constexpr int max_model_attempts = 3;
constexpr std::size_t model_passages = 5;
constexpr int history_turns = 10;

struct stored_passage {
  std::int64_t document_id = 0;
  std::string text;  // what an answer quotes
  std::string title; // searched with the text
};

struct agent_entry {
  domain::ai_agent agent;
  ai::knowledge_index index;
  std::set<std::int64_t> documents;
};

// One decision on a message, by any provider.
struct decision {
  std::string answer;
  ai::intent intent = ai::intent::other;
  std::vector<std::int64_t> passages;
  std::vector<double> scores;
  ai::handoff_reason handoff = ai::handoff_reason::none;
  ai::language lang = ai::language::en;
  domain::ai_provider provider = domain::ai_provider::builtin;
  std::optional<int> prompt_tokens, completion_tokens;
  double latency_ms = 0;
  std::optional<std::string> error;
};

// A conversation's messages waiting for the provider, answered one at a time.
struct pending_message {
  std::int64_t agent_id = 0;
  ai_inbound message;
  std::function<void(decision)> done;
};
struct conversation_line {
  bool busy = false;
  std::deque<pending_message> queue;
};

struct agents_state {
  tenant_env env;
  const automation_options* opts = nullptr;
  bool loaded = false;
  bool loading = false;
  bool stopping = false;
  waiting_list waiting;

  std::map<std::int64_t, agent_entry> agents;
  std::map<std::int64_t, domain::ai_document> documents;
  std::unordered_map<std::int64_t, stored_passage> passages;

  one_at_a_time writes;
  std::map<std::int64_t, conversation_line> lines;
  // Inbound messages taken up by this incarnation (from the channel actor, or left waiting in
  // ai_pending by an earlier one): each is decided on once.
  std::set<std::int64_t> taken;

  int pending_io = 0;
  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
};

using agents_actor = caf::stateful_actor<agents_state>;

void settle(agents_actor* self) {
  auto& st = self->state;
  if (st.stopping && st.pending_io == 0 && !st.loading && !st.writes.busy()) self->quit();
}

// ---- loading and the index -------------------------------------------------------------------

void index_document(agents_state& st, const domain::ai_document& d) {
  auto a = st.agents.find(d.agent_id);
  if (a == st.agents.end()) return;
  a->second.documents.insert(d.id);
  // In the document's order: a passage is searched with its neighbours (passage_context).
  std::vector<ai::passage> ps;
  std::vector<std::int64_t> ids;
  for (auto pid : d.passage_ids)
    if (auto p = st.passages.find(pid); p != st.passages.end()) {
      ps.push_back({p->second.title, p->second.text});
      ids.push_back(pid);
    }
  for (std::size_t i = 0; i < ps.size(); ++i)
    a->second.index.add(ids[i], ps[i].text, ai::passage_context(ps, i));
}

void unindex_passages(agents_state& st, std::int64_t agent_id,
                      const std::vector<std::int64_t>& ids) {
  auto a = st.agents.find(agent_id);
  for (auto pid : ids) {
    if (a != st.agents.end()) a->second.index.remove(pid);
    st.passages.erase(pid);
  }
}

void take_up_pending(agents_actor* self, std::vector<persistence::pending_inbound> pending);

struct ai_loaded {
  persistence::ai_snapshot snapshot;
  std::vector<persistence::pending_inbound> pending;
};

void load(agents_actor* self) {
  auto& st = self->state;
  if (st.loading || st.loaded) return;
  st.loading = true;
  db<ai_loaded>(
      self,
      [tid = st.env.tenant_id](persistence::pg_conn& c) {
        return ai_loaded{persistence::load_ai(c, tid), persistence::pending_ai(c, tid)};
      },
      [self](domain::outcome<ai_loaded> loaded) {
        auto& st = self->state;
        st.loading = false;
        if (!loaded) return release_waiting(st.waiting, &loaded.error());
        auto& r = loaded->snapshot;
        for (auto& a : r.agents) st.agents[a.id].agent = std::move(a);
        for (auto& p : r.passages)
          st.passages[p.id] =
              stored_passage{p.document_id, std::move(p.passage.text), std::move(p.passage.title)};
        for (auto& d : r.documents) {
          index_document(st, d);
          st.documents[d.id] = std::move(d);
        }
        st.loaded = true;
        // What an earlier incarnation left undecided goes first, before any new message.
        take_up_pending(self, std::move(loaded->pending));
        release_waiting(st.waiting, nullptr);
      });
}

template <class T>
void missing_agent(agents_actor* self, std::int64_t id, callback<T> reply) {
  reply_not_held(
      self->state.env,
      [id](persistence::pg_conn& c) { return persistence::tenant_of_agent(c, id); },
      failure::of(errc::not_found, "agent not found"), std::move(reply));
}

// `ours`: the document is this tenant's, under another agent: 404 without a lookup.
template <class T>
void missing_document(agents_actor* self, std::int64_t id, callback<T> reply, bool ours) {
  if (ours) return reply(failure::of(errc::not_found, "document not found"));
  reply_not_held(
      self->state.env,
      [id](persistence::pg_conn& c) { return persistence::tenant_of_document(c, id); },
      failure::of(errc::not_found, "document not found"), std::move(reply));
}

std::string agent_json(const agents_state& st, const agent_entry& e) {
  std::int64_t passages = 0;
  for (auto d : e.documents)
    if (auto it = st.documents.find(d); it != st.documents.end())
      passages += static_cast<std::int64_t>(it->second.passage_ids.size());
  return json::serialize(
      domain::agent_to_json(e.agent, static_cast<std::int64_t>(e.documents.size()), passages));
}

domain::issue body_issue(std::string field, std::string msg) {
  return {{std::string("body"), std::move(field)}, std::move(msg), "value_error"};
}

// Merges `p` into `a` and checks what needs no I/O: provider settings, and that no other
// active auto-replying agent serves one of the channels (a conflict: 409).
std::optional<failure> merge(const agents_state& st, domain::ai_agent& a, const agent_patch& p) {
  // The API key travels to base_url with every request: a new address needs the key again,
  // so whoever may edit an agent cannot send its key to a server of their own.
  if (a.id != 0 && p.base_url && *p.base_url != a.base_url && a.api_key && !p.api_key)
    return failure::invalid({body_issue("api_key", "base_url changes: send the api_key again")});
  if (p.name) a.name = *p.name;
  if (p.instructions) a.instructions = *p.instructions;
  if (p.provider) a.provider = *p.provider;
  if (p.model) a.model = *p.model;
  if (p.base_url) a.base_url = *p.base_url;
  if (p.api_key) a.api_key = *p.api_key;
  if (p.channel_ids) a.channel_ids = *p.channel_ids;
  if (p.auto_reply) a.auto_reply = *p.auto_reply;
  if (p.handoff_keywords) a.handoff_keywords = *p.handoff_keywords;
  if (p.reply_language) a.reply_language = *p.reply_language;
  if (p.emergency_message) a.emergency_message = *p.emergency_message;
  if (p.handoff_assignee_id) a.handoff_assignee_id = *p.handoff_assignee_id;
  if (p.stream) a.stream = *p.stream;
  if (p.is_active) a.is_active = *p.is_active;
  if (a.provider == domain::ai_provider::openai_compatible) {
    std::vector<domain::issue> issues;
    if (!a.model)
      issues.push_back(body_issue("model", "model is required for the openai_compatible provider"));
    if (!a.base_url)
      issues.push_back(
          body_issue("base_url", "base_url is required for the openai_compatible provider"));
    if (!issues.empty()) return failure::invalid(std::move(issues));
  }
  if (a.auto_reply && a.is_active) {
    for (auto& [id, other] : st.agents) {
      if (id == a.id || !other.agent.auto_reply || !other.agent.is_active) continue;
      for (auto ch : a.channel_ids)
        if (std::find(other.agent.channel_ids.begin(), other.agent.channel_ids.end(), ch) !=
            other.agent.channel_ids.end())
          return failure::of(errc::conflict,
                             "channel " + std::to_string(ch) +
                                 " is already answered by the auto-replying agent " +
                                 std::to_string(id));
    }
  }
  return std::nullopt;
}

// The channel actor stores messages of these channels as waiting for an agent.
void announce_channels(agents_actor* self) {
  auto& st = self->state;
  std::set<std::int64_t> channels;
  for (auto& [id, e] : st.agents)
    if (e.agent.is_active && e.agent.auto_reply)
      channels.insert(e.agent.channel_ids.begin(), e.agent.channel_ids.end());
  set_ai_channels(*st.env.rt->owner, st.env.tenant_id,
                  std::vector<std::int64_t>(channels.begin(), channels.end()));
}

// In its turn among the writes (actors/writer.hpp): the channels and the assignee are checked in
// Postgres, then the agent is merged again with the state as it is now and saved.
void save_agent(agents_actor* self, std::optional<std::int64_t> id, agent_patch p,
                callback<std::string> reply) {
  auto& st = self->state;
  if (id && !st.agents.count(*id)) return missing_agent(self, *id, reply);
  std::vector<std::int64_t> channels = p.channel_ids.value_or(std::vector<std::int64_t>{});
  std::optional<std::int64_t> assignee;
  if (p.handoff_assignee_id && *p.handoff_assignee_id) assignee = **p.handoff_assignee_id;
  struct found {
    std::vector<std::int64_t> channels;
    bool assignee_ok = true;
  };
  db<found>(
      self,
      [tid = st.env.tenant_id, channels, assignee](persistence::pg_conn& c) {
        found f;
        if (!channels.empty()) f.channels = persistence::tenant_channels(c, tid, channels);
        if (assignee) f.assignee_ok = persistence::active_user_of(c, tid, *assignee);
        return f;
      },
      [self, id, p, channels, reply](domain::outcome<found> r) {
        if (!r) return reply(r.error());
        std::vector<domain::issue> issues;
        for (std::size_t i = 0; i < channels.size(); ++i)
          if (std::find(r->channels.begin(), r->channels.end(), channels[i]) == r->channels.end())
            issues.push_back(
                {{std::string("body"), std::string("channel_ids"), static_cast<std::int64_t>(i)},
                 "channel not found in this tenant",
                 "value_error"});
        if (!r->assignee_ok)
          issues.push_back(body_issue("handoff_assignee_id",
                                      "handoff_assignee_id must be an active user of the tenant"));
        if (!issues.empty()) return reply(failure::invalid(std::move(issues)));
        auto& st = self->state;
        domain::ai_agent next;
        auto now = domain::now_micros();
        if (id) {
          auto it = st.agents.find(*id);
          if (it == st.agents.end()) return reply(failure::of(errc::not_found, "agent not found"));
          next = it->second.agent;
          next.updated_at = std::max(now, next.updated_at + 1);
        } else {
          next.tenant_id = st.env.tenant_id;
          next.created_at = next.updated_at = now;
        }
        if (auto f = merge(st, next, p)) return reply(*f);
        db<domain::ai_agent>(
            self, [next](persistence::pg_conn& c) { return persistence::save_agent(c, next); },
            [self, reply](domain::outcome<domain::ai_agent> saved) {
              if (!saved) return reply(saved.error());
              auto& e = self->state.agents[saved->id];
              e.agent = *saved;
              announce_channels(self);
              reply(agent_json(self->state, e));
            });
      });
}

void remove_agent(agents_actor* self, std::int64_t id, callback<domain::done> reply) {
  auto& st = self->state;
  if (!st.agents.count(id)) return missing_agent(self, id, reply);
  db<domain::done>(
      self,
      [tid = st.env.tenant_id, id](persistence::pg_conn& c) {
        persistence::delete_agent(c, tid, id);
        return domain::done{};
      },
      [self, id, reply](domain::outcome<domain::done> r) {
        if (r) {
          auto& st = self->state;
          auto it = st.agents.find(id);
          if (it != st.agents.end()) {
            for (auto d : it->second.documents) {
              if (auto doc = st.documents.find(d); doc != st.documents.end()) {
                for (auto pid : doc->second.passage_ids) st.passages.erase(pid);
                st.documents.erase(doc);
              }
            }
            st.agents.erase(it);
            announce_channels(self);
          }
        }
        reply(std::move(r));
      });
}

// In its turn among the writes.
void store_document(agents_actor* self, std::int64_t agent_id, std::optional<std::int64_t> doc_id,
                    document_input in, callback<std::string> reply) {
  auto& st = self->state;
  if (!st.agents.count(agent_id)) return missing_agent(self, agent_id, reply);
  persistence::document_write w;
  auto now = domain::now_micros();
  if (doc_id) {
    auto it = st.documents.find(*doc_id);
    if (it == st.documents.end() || it->second.agent_id != agent_id)
      return missing_document(self, *doc_id, reply, it != st.documents.end());
    w.doc = it->second;
    w.doc.updated_at = std::max(now, w.doc.updated_at + 1);
  } else {
    // Bounded per agent and per tenant (docs/ai.md): every document is held in memory and
    // indexed, so an unbounded count is memory anyone with the manager role could take.
    std::size_t of_agent = 0;
    for (auto& [id, d] : st.documents) of_agent += d.agent_id == agent_id ? 1 : 0;
    if (of_agent >= domain::ai_documents_per_agent_max ||
        st.documents.size() >= domain::ai_documents_per_tenant_max) {
      return reply(failure::of(
          errc::conflict,
          of_agent >= domain::ai_documents_per_agent_max
              ? "this agent has " + std::to_string(domain::ai_documents_per_agent_max) +
                    " knowledge documents, the most it may have: delete or merge some first"
              : "this tenant has " + std::to_string(domain::ai_documents_per_tenant_max) +
                    " knowledge documents, the most it may have: delete or merge some first"));
    }
    w.doc.tenant_id = st.env.tenant_id;
    w.doc.agent_id = agent_id;
    w.doc.created_at = w.doc.updated_at = now;
  }
  w.doc.title = std::move(in.title);
  w.doc.kind = in.kind;
  w.content = std::move(in.content);
  w.passages = std::move(in.passages);
  auto texts = w.passages;
  db<persistence::document_written>(
      self,
      [w = std::move(w)](persistence::pg_conn& c) { return persistence::save_document(c, w); },
      [self, agent_id, texts = std::move(texts),
       reply](domain::outcome<persistence::document_written> r) {
        if (!r) return reply(r.error());
        auto& st = self->state;
        unindex_passages(st, agent_id, r->old_passages);
        for (std::size_t i = 0; i < r->doc.passage_ids.size() && i < texts.size(); ++i)
          st.passages[r->doc.passage_ids[i]] =
              stored_passage{r->doc.id, texts[i].text, texts[i].title};
        index_document(st, r->doc);
        st.documents[r->doc.id] = r->doc;
        reply(json::serialize(domain::document_to_json(r->doc, nullptr)));
      });
}

void remove_document(agents_actor* self, std::int64_t agent_id, std::int64_t doc_id,
                     callback<domain::done> reply) {
  auto& st = self->state;
  auto it = st.documents.find(doc_id);
  if (!st.agents.count(agent_id)) return missing_agent(self, agent_id, reply);
  if (it == st.documents.end() || it->second.agent_id != agent_id)
    return missing_document(self, doc_id, reply, it != st.documents.end());
  db<std::vector<std::int64_t>>(
      self,
      [tid = st.env.tenant_id, doc_id](persistence::pg_conn& c) {
        return persistence::delete_document(c, tid, doc_id);
      },
      [self, agent_id, doc_id, reply](domain::outcome<std::vector<std::int64_t>> r) {
        if (!r) return reply(r.error());
        auto& st = self->state;
        if (auto it = st.documents.find(doc_id); it != st.documents.end()) {
          unindex_passages(st, agent_id, it->second.passage_ids);
          st.documents.erase(it);
        }
        if (auto a = st.agents.find(agent_id); a != st.agents.end())
          a->second.documents.erase(doc_id);
        reply(domain::done{});
      });
}

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

// Decides on `message` with agent `agent_id` (in the actor, maybe later).
void decide(agents_actor* self, std::int64_t agent_id, std::string message,
            std::optional<std::pair<std::int64_t, std::int64_t>> conversation,
            std::function<void(decision)> done) {
  auto& st = self->state;
  auto it = st.agents.find(agent_id);
  if (it == st.agents.end()) {
    decision d;
    d.answer = std::string(ai::phrase_handoff(ai::language::en));
    d.handoff = ai::handoff_reason::provider_error;
    d.error = "the agent was deleted";
    return done(std::move(d));
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
                   decision d;
                   d.answer = std::string(ai::phrase_handoff(ai::language::en));
                   d.handoff = ai::handoff_reason::provider_error;
                   d.error = "the agent was deleted";
                   return counted(std::move(d));
                 }
                 decide_model(self, it->second, message, std::move(history), counted);
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
  decide(self, p.agent_id, p.message.text,
         std::make_pair(p.message.conversation_id, p.message.message_id),
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
  auto v = ai::screen(m.text, domain::rules_of(it->second.agent));
  if (screened_out(v.handoff) || it->second.agent.provider == domain::ai_provider::builtin)
    return decide(self, agent_id, m.text, std::nullopt, finish);
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

// ---- drafts for staff ------------------------------------------------------------------------

// The agent that drafts in a conversation on `channel_id` when none is named: the channel's
// auto-replying agent, else an active agent serving the channel, else the tenant's only
// active agent.
const agent_entry* drafting_agent(const agents_state& st, std::int64_t channel_id) {
  if (const agent_entry* a = auto_agent_of(st, channel_id)) return a;
  const agent_entry* only = nullptr;
  std::size_t active = 0;
  for (auto& [id, e] : st.agents) {
    if (!e.agent.is_active) continue;
    const auto& ch = e.agent.channel_ids;
    if (std::find(ch.begin(), ch.end(), channel_id) != ch.end()) return &e;
    ++active;
    only = &e;
  }
  return active == 1 ? only : nullptr;
}

// The agent's decision on the conversation's message, for a person to edit and send: the same
// screen, knowledge and provider as an auto-reply, nothing sent and nothing stored.
void draft(agents_actor* self, draft_request q, callback<std::string> reply) {
  auto& st = self->state;
  if (q.agent_id && !st.agents.count(*q.agent_id)) return missing_agent(self, *q.agent_id, reply);
  db<persistence::draft_target>(
      self,
      [tid = st.env.tenant_id, q](persistence::pg_conn& c) {
        return persistence::find_draft_target(c, tid, q.conversation_id, q.message_id);
      },
      [self, q, reply](domain::outcome<persistence::draft_target> t) {
        using found = persistence::draft_target::found;
        if (!t) return reply(t.error());
        auto& st = self->state;
        switch (t->state) {
        case found::no_conversation:
          return reply_not_held(
              st.env,
              [id = q.conversation_id](persistence::pg_conn& c) {
                return persistence::tenant_of_conversation(c, id);
              },
              failure::of(errc::not_found, "conversation not found"), reply);
        case found::not_its_message:
          return reply(failure::invalid(
              {body_issue("message_id", "not a message the contact sent in this conversation")}));
        case found::nothing_to_answer:
          return reply(failure::of(errc::conflict,
                                   "the conversation holds no message from the contact to answer"));
        case found::ok: break;
        }
        const agent_entry* e = nullptr;
        if (q.agent_id) {
          const auto it = st.agents.find(*q.agent_id);
          if (it == st.agents.end()) return missing_agent(self, *q.agent_id, reply);
          e = &it->second;
        } else {
          e = drafting_agent(st, t->channel_id);
        }
        if (e == nullptr)
          return reply(failure::of(errc::conflict, "no active agent serves this conversation's "
                                                   "channel: name one with agent_id"));
        if (!e->agent.is_active) return reply(failure::of(errc::conflict, "the agent is inactive"));
        // A contact who withdrew ai_processing is read by no agent, for a draft neither.
        require_consent(*st.env.rt->owner, st.env.tenant_id, t->contact_id,
                        domain::consent_purpose::ai_processing,
                        callback<domain::done>(in_actor<domain::outcome<domain::done>>(
                            self, [self, agent_id = e->agent.id, target = std::move(*t),
                                   reply](domain::outcome<domain::done> allowed) {
                              if (!allowed) return reply(allowed.error());
                              decide(self, agent_id, target.text,
                                     std::make_pair(target.conversation_id, target.message_id),
                                     [self, agent_id, target, reply](decision d) {
                                       json::object o = decision_json(self->state, d);
                                       o.erase("answer");
                                       o["draft"] = d.handoff == ai::handoff_reason::none
                                                        ? json::value(d.answer)
                                                        : json::value(nullptr);
                                       o["conversation_id"] = target.conversation_id;
                                       o["message_id"] = target.message_id;
                                       o["agent_id"] = agent_id;
                                       reply(json::serialize(o));
                                     });
                            })));
      });
}

// ---- the contact summary ---------------------------------------------------------------------

std::string summary_text(const domain::contact& c, const persistence::contact_messages& m) {
  std::string s = c.first_name;
  if (c.last_name) s += " " + *c.last_name;
  s += " (contact " + std::to_string(c.id) + ", status " + std::string(domain::to_string(c.status));
  if (c.source) s += ", source " + std::string(domain::to_string(*c.source));
  s += ").";
  if (!c.tags.empty()) {
    s += " Tags:";
    for (std::size_t i = 0; i < c.tags.size(); ++i) s += (i ? ", " : " ") + c.tags[i];
    s += ".";
  }
  if (c.phone) s += " Phone " + *c.phone + ".";
  if (c.email) s += " E-mail " + *c.email + ".";
  s += " " + std::to_string(m.conversation_count) + " conversation(s), " +
       std::to_string(m.message_count) + " message(s)";
  if (m.last_message_at) s += ", the last at " + domain::format_rfc3339(*m.last_message_at);
  s += ".";
  if (!m.recent_inbound.empty()) {
    s += " Most recent messages from the contact:";
    for (auto& t : m.recent_inbound) s += " \"" + t + "\"";
  }
  return s;
}

void summarize(agents_actor* self, std::int64_t contact_id, callback<std::string> reply) {
  auto& st = self->state;
  auto k = in_actor<domain::outcome<std::vector<domain::contact>>>(
      self, [self, contact_id, reply](domain::outcome<std::vector<domain::contact>> r) {
        if (!r) return reply(r.error());
        if (r->empty())
          return reply_not_held(
              self->state.env,
              [contact_id](persistence::pg_conn& c) {
                return persistence::tenant_of(c, persistence::record_kind::contact, contact_id);
              },
              failure::of(errc::not_found, "contact not found"), reply);
        auto contact = r->front();
        db<persistence::contact_messages>(
            self,
            [tid = self->state.env.tenant_id, contact_id](persistence::pg_conn& c) {
              return persistence::messages_of_contact(c, tid, contact_id);
            },
            [contact, reply](domain::outcome<persistence::contact_messages> m) {
              if (!m) return reply(m.error());
              json::object o{{"contact_id", contact.id},
                             {"summary", summary_text(contact, *m)},
                             {"conversation_count", m->conversation_count},
                             {"message_count", m->message_count},
                             {"provider", "builtin"},
                             {"generated_at", domain::format_rfc3339(domain::now_micros())}};
              reply(json::serialize(o));
            });
      });
  fetch_contacts(*st.env.rt->owner, st.env.tenant_id, {contact_id},
                 callback<std::vector<domain::contact>>(std::move(k)));
}

// ---- behaviour -------------------------------------------------------------------------------

caf::behavior agents_behavior(agents_actor* self, tenant_env env) {
  auto& st = self->state;
  st.env = env;
  st.opts = automation_options_of(*env.rt);
  auto measure = instrument(self, child_kind::agents);
  return {
      [self, measure](resume_atom, continuation& k) {
        auto _ = measure();
        k();
      },
      [self, measure](list_atom, std::optional<bool> active, int page, int per_page,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, active, page, per_page, reply] {
          auto& st = self->state;
          std::vector<json::value> all;
          for (auto& [id, e] : st.agents) {
            if (active && e.agent.is_active != *active) continue;
            json::error_code ec;
            all.push_back(crm::domain::parse_json(agent_json(st, e), ec));
          }
          reply(domain::render_page_of(std::move(all), page, per_page));
        });
      },
      [self, measure](get_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          auto& st = self->state;
          auto it = st.agents.find(id);
          if (it == st.agents.end()) return missing_agent(self, id, reply);
          reply(agent_json(st, it->second));
        });
      },
      [self, measure](create_atom, agent_patch& p, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, p, reply] {
          write_in_turn(self, reply, [self, p](callback<std::string> reply) {
            save_agent(self, std::nullopt, p, reply);
          });
        });
      },
      [self, measure](update_atom, std::int64_t id, agent_patch& p, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, p, reply] {
          write_in_turn(self, reply, [self, id, p](callback<std::string> reply) {
            save_agent(self, id, p, reply);
          });
        });
      },
      [self, measure](delete_atom, std::int64_t id, callback<domain::done>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          write_in_turn(self, reply, [self, id](callback<domain::done> reply) {
            remove_agent(self, id, reply);
          });
        });
      },
      [self, measure](doc_atom, list_atom, std::int64_t agent_id, int page, int per_page,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, agent_id, page, per_page, reply] {
          auto& st = self->state;
          auto a = st.agents.find(agent_id);
          if (a == st.agents.end()) return missing_agent(self, agent_id, reply);
          std::vector<json::value> all;
          for (auto d : a->second.documents)
            if (auto it = st.documents.find(d); it != st.documents.end())
              all.push_back(domain::document_to_json(it->second, nullptr));
          reply(domain::render_page_of(std::move(all), page, per_page));
        });
      },
      [self, measure](doc_atom, get_atom, std::int64_t agent_id, std::int64_t doc_id,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, agent_id, doc_id, reply] {
          auto& st = self->state;
          if (!st.agents.count(agent_id)) return missing_agent(self, agent_id, reply);
          auto it = st.documents.find(doc_id);
          if (it == st.documents.end() || it->second.agent_id != agent_id)
            return missing_document(self, doc_id, reply, it != st.documents.end());
          auto doc = it->second;
          st.env.pool->run<std::optional<std::string>>(
              [tid = st.env.tenant_id, doc_id](persistence::pg_conn& c) {
                return persistence::document_content(c, tid, doc_id);
              },
              [doc, reply](domain::outcome<std::optional<std::string>> r) {
                if (!r) return reply(r.error());
                if (!*r) return reply(failure::of(errc::not_found, "document not found"));
                reply(json::serialize(domain::document_to_json(doc, &**r)));
              });
        });
      },
      [self, measure](doc_atom, update_atom, std::int64_t agent_id,
                      std::optional<std::int64_t> doc_id, document_input& in,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply),
                    [self, agent_id, doc_id, in = std::move(in), reply]() mutable {
                      write_in_turn(self, reply,
                                    [self, agent_id, doc_id,
                                     in = std::move(in)](callback<std::string> reply) {
                                      store_document(self, agent_id, doc_id, in, reply);
                                    });
                    });
      },
      [self, measure](doc_atom, delete_atom, std::int64_t agent_id, std::int64_t doc_id,
                      callback<domain::done>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, agent_id, doc_id, reply] {
          write_in_turn(self, reply, [self, agent_id, doc_id](callback<domain::done> reply) {
            remove_document(self, agent_id, doc_id, reply);
          });
        });
      },
      [self, measure](replies_atom, std::int64_t agent_id, int page, int per_page,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, agent_id, page, per_page, reply] {
          auto& st = self->state;
          if (!st.agents.count(agent_id)) return missing_agent(self, agent_id, reply);
          st.env.pool->run<std::string>(
              [tid = st.env.tenant_id, agent_id, page, per_page](persistence::pg_conn& c) {
                return persistence::replies_page_json(c, tid, agent_id, page, per_page);
              },
              [reply](domain::outcome<std::string> r) { reply(std::move(r)); });
        });
      },
      [self, measure](chat_atom, std::int64_t agent_id, std::string& message,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, agent_id, message, reply] {
          auto& st = self->state;
          if (!st.agents.count(agent_id)) return missing_agent(self, agent_id, reply);
          decide(self, agent_id, message, std::nullopt, [self, reply](decision d) {
            reply(json::serialize(decision_json(self->state, d)));
          });
        });
      },
      [self, measure](inbound_atom, ai_inbound& m) {
        auto _ = measure();
        when_loaded(
            self, [](const failure&) {}, [self, m] { auto_answer(self, m); });
      },
      [self, measure](wake_atom) {
        auto _ = measure();
        // The sweeper found messages waiting for an agent: loading takes them up.
        when_loaded(
            self, [](const failure&) {}, [] {});
      },
      [self, measure](reply_atom, std::optional<std::int64_t> agent_id, ai_inbound& m,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, agent_id, m, reply] {
          auto& st = self->state;
          std::int64_t id = 0;
          if (agent_id) {
            if (!st.agents.count(*agent_id))
              return reply(failure::of(errc::not_found, "agent " + std::to_string(*agent_id) +
                                                            " not found in this tenant"));
            id = *agent_id;
          } else if (auto a = auto_agent_of(st, m.channel_id)) {
            id = a->agent.id;
          } else {
            return reply(failure::of(errc::not_found,
                                     "no active auto-replying agent serves the message's channel"));
          }
          answer_message(
              self, id, m, false, [reply](const decision& d, domain::outcome<std::string> r) {
                if (!r) return reply(r.error());
                json::error_code ec;
                auto stored = crm::domain::parse_json(*r, ec);
                json::object o{{"answer", d.answer},
                               {"intent", ai::intent_name(d.intent)},
                               {"handoff", d.handoff != ai::handoff_reason::none}};
                o["handoff_reason"] = d.handoff == ai::handoff_reason::none
                                          ? json::value(nullptr)
                                          : json::value(ai::handoff_reason_name(d.handoff));
                if (!ec && stored.is_object())
                  for (auto& [k, v] : stored.get_object()) o[k] = v;
                reply(json::serialize(o));
              });
        });
      },
      [self, measure](draft_atom, draft_request& q, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, q, reply] { draft(self, q, reply); });
      },
      [self, measure](summary_atom, std::int64_t contact_id, callback<std::string>& reply) {
        auto _ = measure();
        summarize(self, contact_id, reply);
      },
      [self](stop_atom) {
        self->state.stopping = true;
        settle(self);
      },
  };
}

} // namespace

caf::actor spawn_agents(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(agents_behavior, env);
}

void list_agents(runtime& rt, std::int64_t tenant, std::optional<bool> is_active, int page,
                 int per_page, callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, list_atom::value, is_active, page, per_page,
                           std::move(reply));
}
void get_agent(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, get_atom::value, id, std::move(reply));
}
void create_agent(runtime& rt, std::int64_t tenant, agent_patch p, callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, create_atom::value, std::move(p), std::move(reply));
}
void update_agent(runtime& rt, std::int64_t tenant, std::int64_t id, agent_patch p,
                  callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, update_atom::value, id, std::move(p), std::move(reply));
}
void delete_agent(runtime& rt, std::int64_t tenant, std::int64_t id, callback<domain::done> reply) {
  tell<child_kind::agents>(rt, tenant, delete_atom::value, id, std::move(reply));
}
void list_documents(runtime& rt, std::int64_t tenant, std::int64_t agent_id, int page, int per_page,
                    callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, doc_atom::value, list_atom::value, agent_id, page, per_page,
                           std::move(reply));
}
void get_document(runtime& rt, std::int64_t tenant, std::int64_t agent_id, std::int64_t document_id,
                  callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, doc_atom::value, get_atom::value, agent_id, document_id,
                           std::move(reply));
}
void save_document(runtime& rt, std::int64_t tenant, std::int64_t agent_id,
                   std::optional<std::int64_t> document_id, document_input d,
                   callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, doc_atom::value, update_atom::value, agent_id, document_id,
                           std::move(d), std::move(reply));
}
void delete_document(runtime& rt, std::int64_t tenant, std::int64_t agent_id,
                     std::int64_t document_id, callback<domain::done> reply) {
  tell<child_kind::agents>(rt, tenant, doc_atom::value, delete_atom::value, agent_id, document_id,
                           std::move(reply));
}
void list_replies(runtime& rt, std::int64_t tenant, std::int64_t agent_id, int page, int per_page,
                  callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, replies_atom::value, agent_id, page, per_page,
                           std::move(reply));
}
void chat(runtime& rt, std::int64_t tenant, std::int64_t agent_id, std::string message,
          callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, chat_atom::value, agent_id, std::move(message),
                           std::move(reply));
}
void draft_reply(runtime& rt, std::int64_t tenant, draft_request q, callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, draft_atom::value, std::move(q), std::move(reply));
}
void ai_on_inbound(runtime& rt, std::int64_t tenant, ai_inbound m) {
  tell<child_kind::agents>(rt, tenant, inbound_atom::value, std::move(m));
}
void run_ai_reply(runtime& rt, std::int64_t tenant, std::optional<std::int64_t> agent_id,
                  ai_inbound m, callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, reply_atom::value, agent_id, std::move(m), std::move(reply));
}
void contact_summary(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                     callback<std::string> reply) {
  tell<child_kind::agents>(rt, tenant, summary_atom::value, contact_id, std::move(reply));
}

} // namespace crm::actors
