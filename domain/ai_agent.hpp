// AI agents and their knowledge documents as plain values (docs/ai.md), their JSON shapes, and
// the pure parts of the openai_compatible provider: the chat-completions request an agent
// sends and the reading of its answer, whole or streamed (server-sent events). No I/O.
#pragma once
#include "domain/assistant.hpp"

#include <boost/json/object.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crm::domain {

enum class ai_provider : std::uint8_t { builtin, openai_compatible };
std::optional<ai_provider> parse_ai_provider(std::string_view s);
const char* to_string(ai_provider p);

struct ai_agent {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  std::string instructions;
  ai_provider provider = ai_provider::builtin;
  std::optional<std::string> model;
  std::optional<std::string> base_url;
  std::optional<std::string> api_key; // write-only: never rendered
  std::vector<std::int64_t> channel_ids;
  std::vector<std::int64_t> service_ids; // what the agent may book (docs/ai.md "Booking")
  bool auto_reply = false;
  std::vector<std::string> handoff_keywords;
  std::optional<ai::language> reply_language; // none: "auto"
  std::optional<std::string> emergency_message;
  std::optional<std::int64_t> handoff_assignee_id;
  bool stream = false;
  bool is_active = true;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

boost::json::object agent_to_json(const ai_agent& a, std::int64_t document_count,
                                  std::int64_t passage_count);
ai::agent_rules rules_of(const ai_agent& a);

// text: plain text; qa: question/answer CSV; html, pdf: kept as the text extracted from them.
enum class document_kind : std::uint8_t { text, qa, html, pdf };
const char* to_string(document_kind k);
std::optional<document_kind> document_kind_from(std::string_view name);

// Knowledge documents an agent, and a tenant, may hold (each up to 1 MiB of text, kept in
// memory and indexed): beyond, a new one is 409 (docs/ai.md).
inline constexpr std::size_t ai_documents_per_agent_max = 500;
inline constexpr std::size_t ai_documents_per_tenant_max = 2000;

struct ai_document {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::int64_t agent_id = 0;
  std::string title;
  document_kind kind = document_kind::text;
  std::int64_t bytes = 0;
  std::vector<std::int64_t> passage_ids; // in document order
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

// With `content`, the document's text (or csv for a qa document) is included.
boost::json::object document_to_json(const ai_document& d, const std::string* content);

// ---- openai_compatible -------------------------------------------------------------------

struct chat_turn {
  std::string role; // "user" | "assistant"
  std::string content;
};
struct cited_passage {
  std::int64_t id = 0;
  std::string text;
};

// A function the model called (chat-completions `tool_calls`): its id, name and arguments
// (a JSON text, as the model wrote it).
struct tool_call {
  std::string id;
  std::string name;
  std::string arguments;
};
// One round of the model's tool use: the calls of one answer, and carecrm's result of each.
struct tool_round {
  std::vector<tool_call> calls;
  std::vector<std::string> results; // JSON texts, one a call
};
// The tools a request offers (a JSON array of {"type": "function", ...}; empty: none), the
// system prompt's lines about them, and the rounds of this turn so far.
struct chat_tools {
  std::string definitions;
  std::string rules;
  std::vector<tool_round> rounds;
};

// The body of POST {base_url}/chat/completions: the system prompt holds the agent's
// instructions, the rules it must keep and the numbered passages; then the conversation; then,
// with tools, the model's calls of this turn (an assistant message with `tool_calls`) each
// followed by its result (a `tool` message naming the call's id).
std::string chat_completion_request(const ai_agent& a, const std::vector<cited_passage>& passages,
                                    const std::vector<chat_turn>& history, std::string_view message,
                                    const chat_tools& tools = {});

struct chat_completion {
  std::string content;
  std::vector<tool_call> tool_calls;
  std::optional<int> prompt_tokens, completion_tokens;
};
// Reads a chat-completions answer: a JSON completion, or server-sent events of chunks (each
// `data:` line a chunk whose choices[0].delta.content is appended, up to `data: [DONE]`), with
// the tool calls it makes (whole in `message.tool_calls`; streamed as `delta.tool_calls`
// pieces joined by their `index`). Nothing when the body is neither, or when a completion has
// neither content nor a tool call.
std::optional<chat_completion> read_chat_completion(std::string_view body);

} // namespace crm::domain
