// SQL of the AI assistants area (docs/ai.md): agents, knowledge documents and their passages,
// the decisions agents took, and what an agent reads of a conversation or a contact.
// Blocking: call only on a pg_pool thread.
#pragma once
#include "domain/ai_agent.hpp"
#include "domain/ai_booking.hpp"
#include "domain/assistant.hpp"
#include "persistence/pg_pool.hpp"

#include <optional>
#include <string>
#include <vector>

namespace crm::persistence {

struct passage_row {
  std::int64_t id = 0;
  std::int64_t document_id = 0;
  domain::ai::passage passage;
};

struct ai_snapshot {
  std::vector<domain::ai_agent> agents;
  std::vector<domain::ai_document> documents; // passage_ids filled, in order
  std::vector<passage_row> passages;
};
ai_snapshot load_ai(pg_conn& c, std::int64_t tenant_id);

domain::ai_agent save_agent(pg_conn& c, const domain::ai_agent& a); // id 0: insert
void delete_agent(pg_conn& c, std::int64_t tenant_id, std::int64_t id);
std::optional<std::int64_t> tenant_of_agent(pg_conn& c, std::int64_t id);
std::optional<std::int64_t> tenant_of_document(pg_conn& c, std::int64_t id);

// Which of `ids` are channels of the tenant; whether `user` is an active user of it.
// Which of `ids` are services of the tenant.
std::vector<std::int64_t> tenant_services(pg_conn& c, std::int64_t tenant_id,
                                          const std::vector<std::int64_t>& ids);

// The slots an agent offered in a conversation (docs/ai.md "Booking"), until the patient picks
// one or it expires: times to book, times to move `appointment_id` to, or that appointment
// alone (its one slot), to cancel.
struct booking_offer {
  std::int64_t tenant_id = 0;
  std::int64_t conversation_id = 0;
  std::int64_t agent_id = 0;
  std::int64_t contact_id = 0;
  std::vector<domain::ai::offered_slot> slots;
  std::int64_t created_at = 0;
  std::int64_t expires_at = 0;
  domain::ai::language lang = domain::ai::language::en; // the offer's, for the confirmation
  domain::ai::offer_kind kind = domain::ai::offer_kind::book;
  std::optional<std::int64_t> appointment_id; // move, cancel
};
// The conversation's offer that has not expired at `now`.
std::optional<booking_offer> open_offer(pg_conn& c, std::int64_t tenant_id,
                                        std::int64_t conversation_id, std::int64_t now);
void save_offer(pg_conn& c, const booking_offer& o); // replaces the conversation's offer
void drop_offer(pg_conn& c, std::int64_t tenant_id, std::int64_t conversation_id);

std::vector<std::int64_t> tenant_channels(pg_conn& c, std::int64_t tenant_id,
                                          const std::vector<std::int64_t>& ids);

struct document_write {
  domain::ai_document doc; // id 0: insert; else replace title, content and passages
  std::string content;
  std::vector<domain::ai::passage> passages;
};
struct document_written {
  domain::ai_document doc;                // with its id and passage ids
  std::vector<std::int64_t> old_passages; // a replaced document's passages, gone now
};
document_written save_document(pg_conn& c, const document_write& w);
// The removed document's passage ids.
std::vector<std::int64_t> delete_document(pg_conn& c, std::int64_t tenant_id, std::int64_t id);
std::optional<std::string> document_content(pg_conn& c, std::int64_t tenant_id, std::int64_t id);

std::string replies_page_json(pg_conn& c, std::int64_t tenant_id, std::int64_t agent_id, int page,
                              int per_page);

// The conversation's messages before `before_message_id` (up to `limit`, oldest first), as
// chat turns: inbound → user, outbound → assistant.
std::vector<domain::chat_turn> recent_turns(pg_conn& c, std::int64_t tenant_id,
                                            std::int64_t conversation_id,
                                            std::int64_t before_message_id, int limit);

struct contact_messages {
  std::int64_t conversation_count = 0;
  std::int64_t message_count = 0;
  std::vector<std::string> recent_inbound; // newest first, up to 5
  std::optional<std::int64_t> last_message_at;
};
contact_messages messages_of_contact(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id);

// What a draft answers (POST /conversations/{id}/ai/draft): a conversation of the tenant and
// one of its inbound messages, the given one or the last with text.
struct draft_target {
  enum class found : std::uint8_t { ok, no_conversation, not_its_message, nothing_to_answer };
  found state = found::ok;
  std::int64_t conversation_id = 0;
  std::int64_t channel_id = 0;
  std::int64_t contact_id = 0;
  std::int64_t message_id = 0;
  std::string text;
};
draft_target find_draft_target(pg_conn& c, std::int64_t tenant_id, std::int64_t conversation_id,
                               std::optional<std::int64_t> message_id);

} // namespace crm::persistence
