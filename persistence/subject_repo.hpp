// The data subject's rights (docs/compliance.md "The patient's rights"): everything the tenant
// holds about one contact, read in one snapshot. Blocking: call only on a pg_pool thread.
#pragma once
#include "persistence/pg_pool.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace crm::persistence {

// One JSON document (a REPEATABLE READ snapshot): the contact with its tags and custom fields,
// its company, conversations with their messages, channel identities, deals with their
// history, consents and the AI decisions taken on its messages. Nothing when the tenant has no
// such contact.
std::optional<std::string> export_contact(pg_conn& c, std::int64_t tenant_id,
                                          std::int64_t contact_id);

} // namespace crm::persistence
