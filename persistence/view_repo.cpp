#include "persistence/view_repo.hpp"

#include "persistence/fence.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/row_values.hpp"

#include <pqxx/pqxx>

namespace crm::persistence {
namespace {

constexpr const char* view_columns = "id, tenant_id, owner_id, name, filter::text, " CRM_MICROS(
    "created_at") ", " CRM_MICROS("updated_at");

domain::saved_view to_view(const pqxx::row& r) {
  domain::saved_view v;
  v.id = r[0].as<std::int64_t>();
  v.tenant_id = r[1].as<std::int64_t>();
  v.owner_id = opt_int(r[2]);
  v.name = r[3].as<std::string>();
  v.filter = compact_json(r[4].as<std::string>());
  v.created_at = r[5].as<std::int64_t>();
  v.updated_at = r[6].as<std::int64_t>();
  return v;
}

domain::failure gone() {
  return domain::failure::of(domain::errc::not_found, "view not found");
}

domain::failure name_taken() {
  return domain::failure::of(domain::errc::conflict, "a view with this name exists already");
}

} // namespace

domain::view_store load_views(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  domain::view_store s;
  for (auto r : tx.exec_params(std::string("SELECT ") + view_columns +
                                   " FROM saved_views WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    s.put(to_view(r));
  return s;
}

std::optional<std::int64_t> tenant_of_view(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "saved_views", id);
}

domain::outcome<domain::saved_view> insert_view(pg_conn& c, const domain::saved_view& v) {
  pqxx::work tx(c.raw());
  fence(tx, v.tenant_id);
  auto owner = v.owner_id ? std::to_string(*v.owner_id) : std::string();
  auto r = tx.exec_params(
      std::string("INSERT INTO saved_views (tenant_id, owner_id, name, filter, created_at,"
                  " updated_at) VALUES ($1, NULLIF($2, '')::bigint, $3, $4::jsonb,"
                  " $5::timestamptz, $5::timestamptz) ON CONFLICT DO NOTHING RETURNING ") +
          view_columns,
      v.tenant_id, owner, v.name, v.filter, ts(v.created_at));
  if (r.empty()) return name_taken();
  auto saved = to_view(r.front());
  tx.commit();
  return saved;
}

domain::outcome<domain::saved_view> update_view(pg_conn& c, const domain::saved_view& v) {
  pqxx::work tx(c.raw());
  fence(tx, v.tenant_id);
  try {
    auto r = tx.exec_params(std::string("UPDATE saved_views SET name = $3, filter = $4::jsonb,"
                                        " updated_at = $5::timestamptz WHERE tenant_id = $1"
                                        " AND id = $2 RETURNING ") +
                                view_columns,
                            v.tenant_id, v.id, v.name, v.filter, ts(v.updated_at));
    if (r.empty()) return gone();
    auto saved = to_view(r.front());
    tx.commit();
    return saved;
  } catch (const pqxx::unique_violation&) {
    return name_taken();
  }
}

domain::outcome<domain::saved_view> delete_view(pg_conn& c, const domain::saved_view& v) {
  pqxx::work tx(c.raw());
  fence(tx, v.tenant_id);
  auto r =
      tx.exec_params("DELETE FROM saved_views WHERE tenant_id = $1 AND id = $2", v.tenant_id, v.id);
  if (r.affected_rows() == 0) return gone();
  tx.commit();
  return v;
}

} // namespace crm::persistence
