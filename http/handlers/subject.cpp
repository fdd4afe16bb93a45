// The patient's rights (contract §9 "Health data", docs/compliance.md "The patient's rights"):
// GET /contacts/{id}/export answers everything the tenant holds about the person as one JSON
// document (admins: it is the whole record at once).
#include "http/api.hpp"

#include "actors/channels.hpp"
#include "actors/contacts.hpp"
#include "actors/runtime.hpp"
#include "http/audit.hpp"
#include "http/request_input.hpp"
#include "persistence/audit_repo.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/subject_repo.hpp"

#include <optional>
#include <string>

namespace crm::http {
namespace {

void export_contact(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto tenant = ex->who.tenant_id;
  // The contacts actor has answered every acknowledged write to the contact by then, so the
  // snapshot holds them.
  with_contact(s.rt, ex, *id, [&s, ex, tenant, id = *id] {
    // Every access recorded so far is stored before the snapshot is read.
    s.audit.writer().flush([&s, ex, tenant, id](bool) {
      s.pool.run<std::optional<std::string>>(
          [tenant, id](persistence::pg_conn& c) {
            return persistence::export_contact(c, tenant, id);
          },
          [ex, id](domain::outcome<std::optional<std::string>> doc) {
            if (!doc) return ex->fail(doc.error());
            if (!*doc)
              return ex->fail(domain::failure::of(domain::errc::not_found, "contact not found"));
            response res;
            res.body = std::move(**doc);
            res.headers.emplace_back("Content-Disposition", "attachment; filename=\"contact-" +
                                                                std::to_string(id) +
                                                                "-export.json\"");
            res.headers.emplace_back("Cache-Control", "no-store");
            ex->respond(std::move(res));
          });
    });
  });
}

domain::audit_record erase_row(const domain::audit_context* who, std::int64_t tenant,
                               std::int64_t id, const char* action) {
  auto row = domain::make_audit(who, tenant, "contact", id, action);
  row.status = 200;
  return row;
}

// The last step (persistence/subject_repo.hpp): what still names the contact is rewritten, the
// request completed; a workflow run in progress that named it is reloaded from Postgres.
void finish(services& s, const exchange_ptr& ex, std::int64_t tenant, std::int64_t id,
            std::int64_t conversations, const domain::audit_context_ptr& who) {
  auto row = erase_row(who.get(), tenant, id, "erase_completed");
  s.pool.run<persistence::erasure_done>(
      [tenant, id, conversations, rows = std::vector{row}](persistence::pg_conn& c) {
        return persistence::finish_erasure(c, tenant, id, conversations, rows);
      },
      [&s, ex, tenant](domain::outcome<persistence::erasure_done> done) {
        if (!done) return ex->fail(done.error());
        if (done->runs_active) s.rt.fail_child(tenant, "workflows");
        ex->json(200, std::move(done->document));
      });
}

// Messages first (the channels actor, after the conversation changes queued before), then the
// contact (the contacts actor, which tells the deals actor), then the rest.
void erase_steps(services& s, const exchange_ptr& ex, std::int64_t tenant, std::int64_t id,
                 const domain::audit_context_ptr& who) {
  domain::audit_scope scope(who);
  actors::erase_messaging(
      s.rt, tenant, id,
      actors::callback<std::int64_t>([&s, ex, tenant, id, who](domain::outcome<std::int64_t> n) {
        if (!n) return ex->fail(n.error());
        domain::audit_scope scope(who);
        actors::delete_contact(s.rt, tenant, id,
                               actors::callback<domain::done>([&s, ex, tenant, id, who, n = *n](
                                                                  domain::outcome<domain::done> d) {
                                 // Gone already: an erasure resumed after its contact was deleted.
                                 if (!d && d.error().code != domain::errc::not_found)
                                   return ex->fail(d.error());
                                 finish(s, ex, tenant, id, n, who);
                               }),
                               true);
      }));
}

// POST /contacts/{id}/erase (admin): idempotent; a request interrupted half-way (a crash, a
// 503) is completed by the same request again, or when carecrm starts.
void erase_contact(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto tenant = ex->who.tenant_id;
  auto user = ex->who.user_id;
  auto who = domain::current_audit_context();
  actors::get_contact(
      s.rt, tenant, *id,
      actors::callback<std::string>([&s, ex, tenant, user, who,
                                     id = *id](domain::outcome<std::string> found) {
        if (!found && found.error().code != domain::errc::not_found) return ex->fail(found.error());
        bool exists = static_cast<bool>(found);
        s.pool.run<persistence::erasure_state>(
            [tenant, id](persistence::pg_conn& c) {
              return persistence::erasure_of(c, tenant, id);
            },
            [&s, ex, tenant, user, who, id,
             exists](domain::outcome<persistence::erasure_state> st) {
              if (!st) return ex->fail(st.error());
              if (st->completed) return ex->json(200, std::move(*st->completed));
              if (!exists && !st->requested)
                return ex->fail(domain::failure::of(domain::errc::not_found, "contact not found"));
              auto row = erase_row(who.get(), tenant, id, "erase_requested");
              s.pool.run<domain::done>(
                  [tenant, id, user, rows = std::vector{row}](persistence::pg_conn& c) {
                    persistence::begin_erasure(c, tenant, id, user, rows);
                    return domain::done{};
                  },
                  [&s, ex, tenant, id, who](domain::outcome<domain::done> begun) {
                    if (!begun) return ex->fail(begun.error());
                    erase_steps(s, ex, tenant, id, who);
                  });
            });
      }));
}

} // namespace

void add_subject_routes(router& r, services& s) {
  r.add({verb::get, "/api/v1/contacts/{id}/export", access::bearer, domain::permission::administer,
         bind(s, export_contact),
         "Everything held about a contact, as one JSON document (the patient's right of access)",
         "contacts"});
  r.add({verb::post, "/api/v1/contacts/{id}/erase", access::bearer, domain::permission::administer,
         bind(s, erase_contact),
         "Erase a contact everywhere (the patient's right to erasure); idempotent", "contacts"});
}

} // namespace crm::http
