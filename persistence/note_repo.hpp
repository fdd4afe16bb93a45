// Notes on contacts (migration 020, domain/note.hpp): the notes actor's load and its writes,
// each in one transaction with its audit rows and the tenant's fence.
#pragma once
#include "domain/audit.hpp"
#include "domain/note.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace crm::persistence {

class pg_conn;

domain::note_store load_notes(pg_conn& c, std::int64_t tenant_id);
std::optional<std::int64_t> tenant_of_note(pg_conn& c, std::int64_t id);

// The note as stored (id from the database). A contact deleted meanwhile: errc::not_found.
domain::outcome<domain::note> insert_note(pg_conn& c, const domain::note& n,
                                          const std::vector<domain::audit_record>& audit);
// Body, pinned and updated_at; not_found when the note is gone.
domain::outcome<domain::note> update_note(pg_conn& c, const domain::note& n,
                                          const std::vector<domain::audit_record>& audit);
domain::outcome<domain::note> delete_note(pg_conn& c, const domain::note& n,
                                          const std::vector<domain::audit_record>& audit);

} // namespace crm::persistence
