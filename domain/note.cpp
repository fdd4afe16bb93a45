#include "domain/note.hpp"

#include "domain/clock.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <vector>

namespace crm::domain {

namespace json = boost::json;

json::object note_to_json(const note& n) {
  json::object o;
  o["id"] = n.id;
  o["contact_id"] = n.contact_id;
  o["body"] = n.body;
  o["pinned"] = n.pinned;
  o["author_id"] = n.author_id ? json::value(*n.author_id) : json::value(nullptr);
  o["created_at"] = format_rfc3339(n.created_at);
  o["updated_at"] = format_rfc3339(n.updated_at);
  return o;
}

namespace {

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool holds(std::string_view text, std::string_view query) {
  if (query.empty()) return true;
  auto it = std::search(text.begin(), text.end(), query.begin(), query.end(),
                        [](char a, char b) { return lower(a) == lower(b); });
  return it != text.end();
}

failure note_not_found() {
  return failure::of(errc::not_found, "note not found");
}

// The author, or a manager or admin.
std::optional<failure> refused(const note& n, const requester& by) {
  if (by.acting_role == role::manager || by.acting_role == role::admin) return std::nullopt;
  if (by.user_id && n.author_id && *by.user_id == *n.author_id) return std::nullopt;
  return failure::of(errc::insufficient_permissions,
                     "only the note's author or a manager may change or delete it");
}

} // namespace

outcome<note> note_store::get(std::int64_t contact, std::int64_t id) const {
  auto it = notes.find(id);
  if (it == notes.end() || it->second.contact_id != contact) return note_not_found();
  return it->second;
}

page<note> note_store::list(std::int64_t contact, std::string_view query, int number,
                            int per_page) const {
  std::vector<const note*> found;
  if (auto ids = by_contact.find(contact); ids != by_contact.end())
    for (auto id : ids->second) {
      auto& n = notes.at(id);
      if (holds(n.body, query)) found.push_back(&n);
    }
  std::sort(found.begin(), found.end(), [](const note* a, const note* b) {
    if (a->pinned != b->pinned) return a->pinned;
    return a->id > b->id; // ids grow with time: newest first
  });
  return page_of(found, number, per_page);
}

note note_store::plan_create(note n, std::int64_t tenant, const requester& by,
                             std::int64_t now) const {
  n.id = 0;
  n.tenant_id = tenant;
  n.author_id = by.user_id;
  n.created_at = n.updated_at = now;
  return n;
}

outcome<note> note_store::plan_update(std::int64_t contact, std::int64_t id, const note_patch& p,
                                      const requester& by, std::int64_t now) const {
  auto found = get(contact, id);
  if (!found) return found;
  if (auto no = refused(*found, by)) return *no;
  auto next = *found;
  if (p.body) next.body = *p.body;
  if (p.pinned) next.pinned = *p.pinned;
  next.updated_at = std::max(now, found->updated_at + 1);
  return next;
}

outcome<note> note_store::plan_delete(std::int64_t contact, std::int64_t id,
                                      const requester& by) const {
  auto found = get(contact, id);
  if (!found) return found;
  if (auto no = refused(*found, by)) return *no;
  return found;
}

void note_store::put(const note& n) {
  notes[n.id] = n;
  by_contact[n.contact_id].insert(n.id);
}

void note_store::erase(std::int64_t id) {
  auto it = notes.find(id);
  if (it == notes.end()) return;
  if (auto ids = by_contact.find(it->second.contact_id); ids != by_contact.end()) {
    ids->second.erase(id);
    if (ids->second.empty()) by_contact.erase(ids);
  }
  notes.erase(it);
}

void note_store::forget_contact(std::int64_t contact) {
  auto ids = by_contact.find(contact);
  if (ids == by_contact.end()) return;
  for (auto id : ids->second) notes.erase(id);
  by_contact.erase(ids);
}

void note_store::move_contact(std::int64_t from, std::int64_t into) {
  auto ids = by_contact.find(from);
  if (ids == by_contact.end() || from == into) return;
  auto moved = std::move(ids->second);
  by_contact.erase(ids);
  for (auto id : moved) {
    if (auto n = notes.find(id); n != notes.end()) n->second.contact_id = into;
    by_contact[into].insert(id);
  }
}

} // namespace crm::domain
