// Notes on a tenant's contacts (contract §11, docs/notes.md), owned by the tenant's notes actor:
// their only writer, answering reads from memory. Answers are the JSON the API returns. The
// HTTP layer checks that the contact is the tenant's first (its 404 or 403).
#pragma once
#include "actors/callback.hpp"
#include "domain/note.hpp"

#include <string>

namespace crm::actors {

class runtime;

// A page of the contact's notes, pinned first, then newest first; `query` filters the bodies.
void list_notes(runtime& rt, std::int64_t tenant, std::int64_t contact, std::string query, int page,
                int per_page, callback<std::string> reply);
// 404 for a note of another contact or of no tenant, 403 for another tenant's.
void get_note(runtime& rt, std::int64_t tenant, std::int64_t contact, std::int64_t id,
              callback<std::string> reply);
// `n.contact_id`, `body` and `pinned` set; the author is `by`.
void create_note(runtime& rt, std::int64_t tenant, domain::note n, domain::requester by,
                 callback<std::string> reply);
// The author or a manager (else 403).
void update_note(runtime& rt, std::int64_t tenant, std::int64_t contact, std::int64_t id,
                 domain::note_patch p, domain::requester by, callback<std::string> reply);
void delete_note(runtime& rt, std::int64_t tenant, std::int64_t contact, std::int64_t id,
                 domain::requester by, callback<domain::done> reply);
// The contact was deleted or erased, and its notes with it (told by the contacts actor).
void forget_contact_notes(runtime& rt, std::int64_t tenant, std::int64_t contact);
// A contact merged into another (contract §11): its notes are the survivor's now.
void move_contact_notes(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t into);

} // namespace crm::actors
