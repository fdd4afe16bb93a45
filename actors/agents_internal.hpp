// The AI agents actor's parts (docs/ai.md), shared by its three files: the actor with its
// agents, documents and index (agents_actor.cpp), the decisions on messages and the
// conversations' lines (agents_decide.cpp), and what it does for staff: drafts and the contact
// summary (agents_assist.cpp). Internal to actors/ (CAF).
#pragma once
#include "actors/agents.hpp"
#include "actors/schedule.hpp"

#include "actors/async_io.hpp"
#include "actors/channels.hpp"
#include "actors/contacts.hpp"
#include "actors/system.hpp"
#include "actors/workflows.hpp"
#include "actors/writer.hpp"
#include "domain/ai_tools.hpp"
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

namespace crm::actors::agents_impl {

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

inline void settle(agents_actor* self) {
  auto& st = self->state;
  if (st.stopping && st.pending_io == 0 && !st.loading && !st.writes.busy()) self->quit();
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

// ---- shared by the actor's files --------------------------------------------------------------

// agents_actor.cpp
domain::issue body_issue(std::string field, std::string msg);

// Runs a model's tool call for the conversation being answered (agents_booking.cpp), in the
// actor; `done` gets the result the model is told (a JSON text).
using tool_runner =
    std::function<void(const domain::tool_call&, std::function<void(std::string)> done)>;

// agents_decide.cpp: deciding on a message, and the conversations' lines. With `tools`, an
// openai_compatible agent is offered the booking functions.
// `choice`: the message picks a time of the conversation's open offer or confirms its
// cancellation ("2", "14h works for me", "yes"): only the screen's rules and the agent's
// hand-off keywords hand it off, not the intent model's guess on a few words.
void decide(agents_actor* self, std::int64_t agent_id, std::string message,
            std::optional<std::pair<std::int64_t, std::int64_t>> conversation,
            std::function<void(decision)> done, tool_runner tools = {}, bool choice = false);
json::object decision_json(const agents_state& st, const decision& d);
const agent_entry* auto_agent_of(const agents_state& st, std::int64_t channel_id);
// `stored(decision, the stored reply's JSON or why not)` once the decision is applied.
void answer_message(agents_actor* self, std::int64_t agent_id, ai_inbound m, bool auto_reply,
                    std::function<void(const decision&, domain::outcome<std::string>)> stored);
void auto_answer(agents_actor* self, const ai_inbound& m);
void take_up_pending(agents_actor* self, std::vector<persistence::pending_inbound> pending);

// agents_booking.cpp (docs/ai.md "Booking"): whether an agent books (it has services), and
// the decision on a message of a conversation for one that does: a choice of its open offer,
// a request to book, move or cancel, or, for a model, the booking tools.
bool books(const domain::ai_agent& a);
void decide_in_conversation(agents_actor* self, std::int64_t agent_id, const ai_inbound& m,
                            std::function<void(decision)> done);

// agents_assist.cpp: drafts for staff and the contact summary.
void draft(agents_actor* self, draft_request q, callback<std::string> reply);
void summarize(agents_actor* self, std::int64_t contact_id, callback<std::string> reply);

} // namespace crm::actors::agents_impl
