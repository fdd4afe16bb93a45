// AI agents of a tenant (docs/ai.md), owned by the tenant's agent actor: agents, their
// knowledge documents and retrieval index (rebuilt from Postgres on load), and the replies in
// flight. Writes are answered after COMMIT; replies to patients go through the channel actor,
// which applies them in the conversation's order.
#pragma once
#include "actors/callback.hpp"
#include "domain/ai_agent.hpp"
#include "domain/assistant.hpp"

#include <optional>
#include <string>
#include <vector>

namespace crm::actors {

class runtime;

// Fields sent in a create or update (validated for syntax by the HTTP layer; the actor checks
// what needs state: channels and assignee of the tenant, provider settings after the merge,
// one auto-replying agent per channel).
struct agent_patch {
  std::optional<std::string> name;
  std::optional<std::string> instructions;
  std::optional<domain::ai_provider> provider;
  std::optional<std::optional<std::string>> model;
  std::optional<std::optional<std::string>> base_url;
  std::optional<std::optional<std::string>> api_key;
  std::optional<std::vector<std::int64_t>> channel_ids;
  std::optional<std::vector<std::int64_t>> service_ids;
  std::optional<bool> auto_reply;
  std::optional<std::vector<std::string>> handoff_keywords;
  std::optional<std::optional<domain::ai::language>> reply_language;
  std::optional<std::optional<std::string>> emergency_message;
  std::optional<std::optional<std::int64_t>> handoff_assignee_id;
  std::optional<bool> stream;
  std::optional<bool> is_active;
};

// A knowledge document as the HTTP layer read it, already cut into passages.
struct document_input {
  std::string title;
  domain::document_kind kind = domain::document_kind::text;
  std::string content;
  std::vector<domain::ai::passage> passages;
};

void list_agents(runtime& rt, std::int64_t tenant, std::optional<bool> is_active, int page,
                 int per_page, callback<std::string> reply);
void get_agent(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void create_agent(runtime& rt, std::int64_t tenant, agent_patch p, callback<std::string> reply);
void update_agent(runtime& rt, std::int64_t tenant, std::int64_t id, agent_patch p,
                  callback<std::string> reply);
void delete_agent(runtime& rt, std::int64_t tenant, std::int64_t id, callback<domain::done> reply);

void list_documents(runtime& rt, std::int64_t tenant, std::int64_t agent_id, int page, int per_page,
                    callback<std::string> reply);
void get_document(runtime& rt, std::int64_t tenant, std::int64_t agent_id, std::int64_t document_id,
                  callback<std::string> reply);
// `document_id` none: a new document.
void save_document(runtime& rt, std::int64_t tenant, std::int64_t agent_id,
                   std::optional<std::int64_t> document_id, document_input d,
                   callback<std::string> reply);
void delete_document(runtime& rt, std::int64_t tenant, std::int64_t agent_id,
                     std::int64_t document_id, callback<domain::done> reply);

void list_replies(runtime& rt, std::int64_t tenant, std::int64_t agent_id, int page, int per_page,
                  callback<std::string> reply);

// The test console: the agent's decision on `message`, nothing sent or stored.
void chat(runtime& rt, std::int64_t tenant, std::int64_t agent_id, std::string message,
          callback<std::string> reply);

// An inbound message stored in a conversation not handed off (from the channel actor).
struct ai_inbound {
  std::int64_t conversation_id = 0;
  std::int64_t channel_id = 0;
  std::int64_t contact_id = 0;
  std::int64_t message_id = 0;
  std::string text;
  int depth = 0;
};
void ai_on_inbound(runtime& rt, std::int64_t tenant, ai_inbound m);

// The workflow action ai_reply: answers `m` with `agent_id` (or the auto-reply agent of its
// channel). Answers the step result {"answer", "intent", "handoff", "handoff_reason", ...}.
void run_ai_reply(runtime& rt, std::int64_t tenant, std::optional<std::int64_t> agent_id,
                  ai_inbound m, callback<std::string> reply);

// POST /conversations/{id}/ai/draft: the agent's reply to the contact's message (the given one,
// else the last with text), for a person to edit and send; nothing is sent or stored.
struct draft_request {
  std::int64_t conversation_id = 0;
  std::optional<std::int64_t> agent_id;   // none: the agent serving the conversation's channel
  std::optional<std::int64_t> message_id; // none: the contact's last message with text
};
void draft_reply(runtime& rt, std::int64_t tenant, draft_request q, callback<std::string> reply);

// POST /contacts/{id}/ai/summary.
void contact_summary(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                     callback<std::string> reply);

} // namespace crm::actors
