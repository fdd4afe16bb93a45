// The notes actor of one tenant, on the record kernel (actors/record_actor.hpp): the notes and
// their rules are the domain's (domain::note_store); each change is audited in its own
// transaction (persistence/note_repo.hpp).
#include "actors/notes.hpp"

#include "actors/record_actor.hpp"
#include "domain/clock.hpp"
#include "domain/page_json.hpp"
#include "persistence/note_repo.hpp"
#include "persistence/pg_pool.hpp"

#include <boost/json.hpp>

namespace caf {
CRM_LOCAL_MESSAGE(crm::domain::note)
CRM_LOCAL_MESSAGE(crm::domain::note_patch)
CRM_LOCAL_MESSAGE(crm::domain::requester)
} // namespace caf

namespace crm::actors {
namespace {

using domain::note;
using domain::requester;

using delete_atom = caf::atom_constant<caf::atom("delete")>;
using gone_atom = caf::atom_constant<caf::atom("gone")>;

using notes_aggregate = aggregate<child_kind::notes, domain::note_store, &persistence::load_notes,
                                  &persistence::tenant_of_note>;

using notes_actor = record_actor<notes_aggregate>;
using store = notes_aggregate::store;

std::string render(const note& n) {
  return boost::json::serialize(domain::note_to_json(n));
}

// The audit row of a change of a note of `contact` (the record it belongs to), field names only.
std::vector<domain::audit_record> audit(const callback<std::string>& reply, std::int64_t tenant,
                                        std::int64_t contact, const char* action,
                                        std::vector<std::string> fields, int status) {
  auto row = domain::make_audit(reply.who(), tenant, "contact", contact, action);
  row.fields = std::move(fields);
  row.status = status;
  return {std::move(row)};
}

// A committed note: memory, then the answer.
std::string stored(notes_actor* self, note saved) {
  self->state.store.put(saved);
  return render(saved);
}

caf::behavior notes_behavior(notes_actor* self, tenant_env env) {
  return record_behavior(
      self, env,
      [](notes_actor* self, list_atom, std::int64_t contact, const std::string& query, int page,
         int per_page, callback<std::string>& reply) {
        read(self, 0, reply, [=](const store& s) {
          auto p = s.list(contact, query, page, per_page);
          boost::json::array items;
          for (auto& n : p.items) items.push_back(domain::note_to_json(n));
          return domain::render_page(std::move(items), p.total, page, per_page);
        });
      },
      [](notes_actor* self, get_atom, std::int64_t contact, std::int64_t id,
         callback<std::string>& reply) {
        read(self, id, reply, [=](const store& s) -> domain::outcome<std::string> {
          auto n = s.get(contact, id);
          if (!n) return n.error();
          return render(*n);
        });
      },
      [](notes_actor* self, create_atom, note& n, requester& by, callback<std::string>& reply) {
        auto tenant = self->state.env.tenant_id;
        std::vector<std::string> fields{"body"};
        if (n.pinned) fields.emplace_back("pinned");
        auto rows = audit(reply, tenant, n.contact_id, "create_note", std::move(fields), 201);
        change(
            self, 0, reply,
            [n = std::move(n), by, tenant](const store& s) {
              return domain::outcome<note>(s.plan_create(n, tenant, by, domain::now_micros()));
            },
            [rows = std::move(rows)](persistence::pg_conn& c, const note& n) {
              return persistence::insert_note(c, n, rows);
            },
            stored);
      },
      [](notes_actor* self, update_atom, std::int64_t contact, std::int64_t id,
         domain::note_patch& p, requester& by, callback<std::string>& reply) {
        std::vector<std::string> fields;
        if (p.body) fields.emplace_back("body");
        if (p.pinned) fields.emplace_back("pinned");
        change(
            self, id, reply,
            [contact, id, p = std::move(p), by](const store& s) {
              return s.plan_update(contact, id, p, by, domain::now_micros());
            },
            [rows = audit(reply, self->state.env.tenant_id, contact, "update_note", fields, 200)](
                persistence::pg_conn& c, const note& n) {
              return persistence::update_note(c, n, rows);
            },
            stored);
      },
      [](notes_actor* self, delete_atom, std::int64_t contact, std::int64_t id, requester& by,
         callback<domain::done>& reply) {
        auto row = domain::make_audit(reply.who(), self->state.env.tenant_id, "contact", contact,
                                      "delete_note");
        row.status = 204;
        change(
            self, id, reply,
            [contact, id, by](const store& s) { return s.plan_delete(contact, id, by); },
            [rows = std::vector{row}](persistence::pg_conn& c, const note& n) {
              return persistence::delete_note(c, n, rows);
            },
            [](notes_actor* self, note gone) {
              self->state.store.erase(gone.id);
              return domain::done{};
            });
      },
      [](notes_actor* self, gone_atom, std::int64_t contact) {
        forget(self, [contact](store& s) { s.forget_contact(contact); });
      },
      [](notes_actor* self, gone_atom, std::int64_t from, std::int64_t into) {
        forget(self, [from, into](store& s) { s.move_contact(from, into); });
      });
}

} // namespace

caf::actor spawn_notes(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(notes_behavior, env);
}

void list_notes(runtime& rt, std::int64_t tenant, std::int64_t contact, std::string query, int page,
                int per_page, callback<std::string> reply) {
  tell<child_kind::notes>(rt, tenant, list_atom::value, contact, std::move(query), page, per_page,
                          std::move(reply));
}

void get_note(runtime& rt, std::int64_t tenant, std::int64_t contact, std::int64_t id,
              callback<std::string> reply) {
  tell<child_kind::notes>(rt, tenant, get_atom::value, contact, id, std::move(reply));
}

void create_note(runtime& rt, std::int64_t tenant, note n, requester by,
                 callback<std::string> reply) {
  tell<child_kind::notes>(rt, tenant, create_atom::value, std::move(n), by, std::move(reply));
}

void update_note(runtime& rt, std::int64_t tenant, std::int64_t contact, std::int64_t id,
                 domain::note_patch p, requester by, callback<std::string> reply) {
  tell<child_kind::notes>(rt, tenant, update_atom::value, contact, id, std::move(p), by,
                          std::move(reply));
}

void delete_note(runtime& rt, std::int64_t tenant, std::int64_t contact, std::int64_t id,
                 requester by, callback<domain::done> reply) {
  tell<child_kind::notes>(rt, tenant, delete_atom::value, contact, id, by, std::move(reply));
}

void move_contact_notes(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t into) {
  tell<child_kind::notes>(rt, tenant, gone_atom::value, from, into);
}

void forget_contact_notes(runtime& rt, std::int64_t tenant, std::int64_t contact) {
  tell<child_kind::notes>(rt, tenant, gone_atom::value, contact);
}

} // namespace crm::actors
