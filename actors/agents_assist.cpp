// The AI agents actor (actors/agents_internal.hpp): what it does for staff, drafts of replies
// and the contact summary.
#include "actors/agents_internal.hpp"

namespace crm::actors::agents_impl {

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

} // namespace crm::actors::agents_impl
