#include "persistence/note_repo.hpp"

#include "domain/clock.hpp"
#include "persistence/audit_repo.hpp"
#include "persistence/fence.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/record_rows.hpp"
#include "persistence/row_values.hpp"

#include <pqxx/pqxx>

namespace crm::persistence {
namespace rows {

const char* const note_columns = "id, tenant_id, contact_id, author_id, body, pinned, "
                                 "(extract(epoch from created_at) * 1000000)::bigint, "
                                 "(extract(epoch from updated_at) * 1000000)::bigint";

domain::note to_note(const pqxx::row& r) {
  domain::note n;
  n.id = r[0].as<std::int64_t>();
  n.tenant_id = r[1].as<std::int64_t>();
  n.contact_id = r[2].as<std::int64_t>();
  n.author_id = opt_int(r[3]);
  n.body = r[4].as<std::string>();
  n.pinned = r[5].as<bool>();
  n.created_at = r[6].as<std::int64_t>();
  n.updated_at = r[7].as<std::int64_t>();
  return n;
}

} // namespace rows
using rows::note_columns;
using rows::to_note;

namespace {

domain::failure gone() {
  return domain::failure::of(domain::errc::not_found, "note not found");
}

} // namespace

domain::note_store load_notes(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  domain::note_store s;
  for (auto r : tx.exec_params(std::string("SELECT ") + note_columns +
                                   " FROM notes WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    s.put(to_note(r));
  return s;
}

std::optional<std::int64_t> tenant_of_note(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "notes", id);
}

domain::outcome<domain::note> insert_note(pg_conn& c, const domain::note& n,
                                          const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, n.tenant_id);
  // The contact must still be the tenant's (deleted meanwhile: nothing inserted).
  auto author =
      n.author_id ? std::optional<std::string>(std::to_string(*n.author_id)) : std::nullopt;
  auto r = tx.exec_params(
      std::string("INSERT INTO notes (tenant_id, contact_id, author_id, body, pinned, created_at,"
                  " updated_at) SELECT $1, $2, $3::bigint, $4, $5, $6::timestamptz,"
                  " $6::timestamptz WHERE EXISTS (SELECT 1 FROM contacts WHERE tenant_id = $1"
                  " AND id = $2) RETURNING ") +
          note_columns,
      n.tenant_id, n.contact_id, author ? author->c_str() : nullptr, n.body, n.pinned,
      domain::format_rfc3339(n.created_at));
  if (r.empty()) return domain::failure::of(domain::errc::not_found, "contact not found");
  auto saved = to_note(r.front());
  insert_audit(tx, audit);
  tx.commit();
  return saved;
}

domain::outcome<domain::note> update_note(pg_conn& c, const domain::note& n,
                                          const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, n.tenant_id);
  auto r =
      tx.exec_params(std::string("UPDATE notes SET body = $3, pinned = $4, updated_at = "
                                 "$5::timestamptz WHERE tenant_id = $1 AND id = $2 "
                                 "RETURNING ") +
                         note_columns,
                     n.tenant_id, n.id, n.body, n.pinned, domain::format_rfc3339(n.updated_at));
  if (r.empty()) return gone();
  insert_audit(tx, audit);
  tx.commit();
  return to_note(r.front());
}

domain::outcome<domain::note> delete_note(pg_conn& c, const domain::note& n,
                                          const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, n.tenant_id);
  auto r = tx.exec_params("DELETE FROM notes WHERE tenant_id = $1 AND id = $2", n.tenant_id, n.id);
  if (r.affected_rows() == 0) return gone();
  insert_audit(tx, audit);
  tx.commit();
  return n;
}

} // namespace crm::persistence
