// The patient's rights (contract §9 "Health data", docs/compliance.md "The patient's rights"):
// GET /contacts/{id}/export answers everything the tenant holds about the person as one JSON
// document (admins: it is the whole record at once).
#include "http/api.hpp"

#include "actors/contacts.hpp"
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

} // namespace

void add_subject_routes(router& r, services& s) {
  r.add({verb::get, "/api/v1/contacts/{id}/export", access::bearer, domain::permission::administer,
         bind(s, export_contact),
         "Everything held about a contact, as one JSON document (the patient's right of access)",
         "contacts"});
}

} // namespace crm::http
