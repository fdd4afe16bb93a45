// The data subject's rights (docs/compliance.md "The patient's rights"): everything the tenant
// holds about one contact, read in one snapshot. Blocking: call only on a pg_pool thread.
#pragma once
#include "domain/audit.hpp"
#include "persistence/pg_pool.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crm::persistence {

// One JSON document (a REPEATABLE READ snapshot): the contact with its tags and custom fields,
// its company, conversations with their messages, channel identities, deals with their
// history, consents and the AI decisions taken on its messages. Nothing when the tenant has no
// such contact.
std::optional<std::string> export_contact(pg_conn& c, std::int64_t tenant_id,
                                          std::int64_t contact_id);

// Erasure (POST /contacts/{id}/erase), in steps that can each run again:
//  1. `begin_erasure` records the request (and its audit row) before anything is removed;
//  2. the channels actor runs `erase_messaging` (conversations, messages, AI decisions,
//     identities, consents) and the contacts actor deletes the contact;
//  3. `finish_erasure` rewrites what still names the contact (outbox payloads, webhook
//     deliveries and their attempt logs, workflow runs' trigger payloads and steps, stored
//     idempotent responses), marks the request complete and writes the closing audit row, in one
//     transaction. Only the audit trail keeps the contact's id, and it holds no values.
struct erasure_state {
  bool requested = false;               // a row exists
  std::optional<std::string> completed; // the completion document, once done
};
erasure_state erasure_of(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id);
void begin_erasure(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id,
                   std::optional<std::int64_t> by, const std::vector<domain::audit_record>& audit);
std::int64_t erase_messaging(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id);
// Answers the completion document {"contact_id","erased_at","removed":{...}}; `runs_active`
// says whether a workflow run still in progress named the contact.
struct erasure_done {
  std::string document;
  bool runs_active = false;
};
erasure_done finish_erasure(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id,
                            std::int64_t conversations,
                            const std::vector<domain::audit_record>& audit);
// At start-up (no actor has state yet): completes every erasure a crash left unfinished.
int complete_pending_erasures(pg_conn& c);

} // namespace crm::persistence
