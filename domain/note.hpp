// Notes on a contact (contract §11, docs/notes.md): what colleagues left on the patient's record,
// pinned ones first. Authors edit and delete their own; managers and admins anyone's. The notes
// actor's store (docs/aggregates.md): its state and rules, unit-tested without an actor.
#pragma once
#include "domain/failure.hpp"
#include "domain/page.hpp"
#include "domain/user.hpp"

#include <boost/json/fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace crm::domain {

struct note {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::int64_t contact_id = 0;
  std::optional<std::int64_t> author_id; // none: written with an API key
  std::string body;
  bool pinned = false;
  std::int64_t created_at = 0; // µs
  std::int64_t updated_at = 0;
};

// The rules of a note's fields, named once for the reader and the OpenAPI schema.
namespace note_rules {
inline constexpr std::size_t body_max = 10000; // characters
} // namespace note_rules

boost::json::object note_to_json(const note& n);

struct note_patch {
  std::optional<std::string> body;
  std::optional<bool> pinned;
};

struct note_store {
  std::map<std::int64_t, note> notes;                        // by id
  std::map<std::int64_t, std::set<std::int64_t>> by_contact; // contact → its note ids

  // Note `id` of `contact`; not_found when the tenant holds none (or it is another contact's).
  outcome<note> get(std::int64_t contact, std::int64_t id) const;
  // A contact's notes, pinned first, then newest first; with `query`, those whose body holds
  // it (case-insensitive for ASCII letters).
  page<note> list(std::int64_t contact, std::string_view query, int number, int per_page) const;

  // What a change would store, or why it may not (pure: nothing changes here).
  note plan_create(note n, std::int64_t tenant, const requester& by, std::int64_t now) const;
  // The author may change their own note; a manager or an admin anyone's (else 403).
  outcome<note> plan_update(std::int64_t contact, std::int64_t id, const note_patch& p,
                            const requester& by, std::int64_t now) const;
  outcome<note> plan_delete(std::int64_t contact, std::int64_t id, const requester& by) const;

  // Committed changes, applied to memory.
  void put(const note& n);
  void erase(std::int64_t id);
  // A contact deleted or erased: its notes went with it (ON DELETE CASCADE).
  void forget_contact(std::int64_t contact);
  // A contact merged into another: its notes are the survivor's now.
  void move_contact(std::int64_t from, std::int64_t into);
};

} // namespace crm::domain
