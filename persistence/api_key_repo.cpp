#include "persistence/api_key_repo.hpp"

#include "domain/secret_keys.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/row_values.hpp"
#include "persistence/sealed_columns.hpp"

#include <pqxx/pqxx>

namespace crm::persistence {

namespace {

constexpr const char* key_columns = "id, tenant_id, name, role, prefix, created_by, " CRM_MICROS(
    "created_at") ", " CRM_MICROS("expires_at") ", " CRM_MICROS("revoked_at");
#undef MICROS

api_key_row to_row(const pqxx::row& r) {
  api_key_row k;
  k.id = r[0].as<std::int64_t>();
  k.tenant_id = r[1].as<std::int64_t>();
  k.name = r[2].as<std::string>();
  k.role = r[3].as<std::string>();
  k.prefix = r[4].as<std::string>();
  k.created_by = opt_int(r[5]);
  k.created_at = r[6].as<std::int64_t>();
  k.expires_at = opt_int(r[7]);
  k.revoked_at = opt_int(r[8]);
  return k;
}

std::optional<std::string> micros_text(std::optional<std::int64_t> v) {
  return v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt;
}

} // namespace

std::optional<api_key_row> insert_api_key(pg_conn& c, const new_api_key& k,
                                          std::int64_t max_active) {
  pqxx::work tx(c.raw());
  // One creation at a time per tenant, so the bound holds under concurrent creations.
  tx.exec_params("SELECT pg_advisory_xact_lock(7263018, $1::int)", k.tenant_id % 2147483647);
  auto active = tx.exec_params("SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND revoked_at"
                               " IS NULL AND (expires_at IS NULL OR expires_at > now())",
                               k.tenant_id)
                    .front()[0]
                    .as<std::int64_t>();
  if (active >= max_active) return std::nullopt;
  auto id = tx.exec("SELECT nextval(pg_get_serial_sequence('api_keys', 'id'))")
                .front()[0]
                .as<std::int64_t>();
  auto prefix = "ck_" + std::to_string(id) + "_" + k.secret.substr(0, 4);
  auto by = micros_text(k.created_by);
  auto expires = micros_text(k.expires_at);
  auto r = tx.exec_params(
      std::string("INSERT INTO api_keys (id, tenant_id, name, role, secret_hash, prefix,"
                  " created_by, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7::bigint,"
                  " timestamptz 'epoch' + $8::bigint * interval '1 microsecond') RETURNING ") +
          key_columns,
      id, k.tenant_id, k.name, k.role, c.keys().hash(sealed::api_key_secret, k.tenant_id, k.secret),
      prefix, by ? by->c_str() : nullptr, expires ? expires->c_str() : nullptr);
  tx.commit();
  return to_row(r.front());
}

std::vector<api_key_row> list_api_keys(pg_conn& c, std::int64_t tenant, int page, int per_page,
                                       std::int64_t& total) {
  pqxx::read_transaction tx(c.raw());
  total = tx.exec_params("SELECT count(*) FROM api_keys WHERE tenant_id = $1", tenant)
              .front()[0]
              .as<std::int64_t>();
  std::vector<api_key_row> out;
  for (const auto& r :
       tx.exec_params(std::string("SELECT ") + key_columns +
                          " FROM api_keys WHERE tenant_id = $1 ORDER BY id LIMIT $2 OFFSET $3",
                      tenant, per_page, static_cast<std::int64_t>(page - 1) * per_page))
    out.push_back(to_row(r));
  return out;
}

std::optional<api_key_row> find_api_key(pg_conn& c, std::int64_t id) {
  pqxx::read_transaction tx(c.raw());
  auto r =
      tx.exec_params(std::string("SELECT ") + key_columns + " FROM api_keys WHERE id = $1", id);
  if (r.empty()) return std::nullopt;
  return to_row(r.front());
}

std::optional<api_key_row> revoke_api_key(pg_conn& c, std::int64_t tenant, std::int64_t id,
                                          std::optional<std::int64_t> by) {
  pqxx::work tx(c.raw());
  auto who = micros_text(by);
  tx.exec_params("UPDATE api_keys SET revoked_at = now(), revoked_by = $3::bigint"
                 " WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL",
                 tenant, id, who ? who->c_str() : nullptr);
  auto r = tx.exec_params(std::string("SELECT ") + key_columns +
                              " FROM api_keys WHERE tenant_id = $1 AND id = $2",
                          tenant, id);
  tx.commit();
  if (r.empty()) return std::nullopt;
  return to_row(r.front());
}

std::optional<secret_owner> secret_owner_of_api_key(pg_conn& c, std::int64_t id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT tenant_id, secret_hash, role,"
                          " COALESCE(extract(epoch from expires_at)::bigint, 0)"
                          " FROM api_keys WHERE id = $1 AND revoked_at IS NULL",
                          id);
  if (r.empty()) return std::nullopt;
  secret_owner o;
  o.tenant_id = r.front()[0].as<std::int64_t>();
  o.secret = r.front()[1].as<std::string>();
  o.role = r.front()[2].as<std::string>();
  o.expires_at = r.front()[3].as<std::int64_t>();
  return o;
}

void rehash_api_key(pg_conn& c, std::int64_t id, const std::string& secret) {
  pqxx::work tx(c.raw());
  auto r = tx.exec_params("SELECT tenant_id FROM api_keys WHERE id = $1", id);
  if (r.empty()) return;
  auto tenant = r.front()[0].as<std::int64_t>();
  tx.exec_params("UPDATE api_keys SET secret_hash = $2 WHERE id = $1", id,
                 c.keys().hash(sealed::api_key_secret, tenant, secret));
  tx.commit();
}

} // namespace crm::persistence
