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
#include "actors/agents_internal.hpp"

namespace crm::actors {
namespace agents_impl {

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
  if (p.service_ids) a.service_ids = *p.service_ids;
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
  std::vector<std::int64_t> services = p.service_ids.value_or(std::vector<std::int64_t>{});
  std::optional<std::int64_t> assignee;
  if (p.handoff_assignee_id && *p.handoff_assignee_id) assignee = **p.handoff_assignee_id;
  struct found {
    std::vector<std::int64_t> channels;
    std::vector<std::int64_t> services;
    bool assignee_ok = true;
  };
  db<found>(
      self,
      [tid = st.env.tenant_id, channels, services, assignee](persistence::pg_conn& c) {
        found f;
        if (!channels.empty()) f.channels = persistence::tenant_channels(c, tid, channels);
        if (!services.empty()) f.services = persistence::tenant_services(c, tid, services);
        if (assignee) f.assignee_ok = persistence::active_user_of(c, tid, *assignee);
        return f;
      },
      [self, id, p, channels, services, reply](domain::outcome<found> r) {
        if (!r) return reply(r.error());
        std::vector<domain::issue> issues;
        for (std::size_t i = 0; i < channels.size(); ++i)
          if (std::find(r->channels.begin(), r->channels.end(), channels[i]) == r->channels.end())
            issues.push_back(
                {{std::string("body"), std::string("channel_ids"), static_cast<std::int64_t>(i)},
                 "channel not found in this tenant",
                 "value_error"});
        for (std::size_t i = 0; i < services.size(); ++i)
          if (std::find(r->services.begin(), r->services.end(), services[i]) == r->services.end())
            issues.push_back(
                {{std::string("body"), std::string("service_ids"), static_cast<std::int64_t>(i)},
                 "service not found in this tenant",
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

} // namespace agents_impl

using agents_impl::agents_behavior;
using agents_impl::chat_atom;
using agents_impl::delete_atom;
using agents_impl::doc_atom;
using agents_impl::draft_atom;
using agents_impl::inbound_atom;
using agents_impl::replies_atom;
using agents_impl::reply_atom;
using agents_impl::summary_atom;

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
