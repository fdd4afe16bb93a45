#include "persistence/user_repo.hpp"

#include "persistence/fence.hpp"

#include <pqxx/pqxx>

namespace crm::persistence {
namespace {

constexpr const char* user_columns =
    "id, tenant_id, email, full_name, role, password_hash, is_active,"
    " (extract(epoch from created_at) * 1000000)::bigint,"
    " (extract(epoch from updated_at) * 1000000)::bigint";

domain::user to_user(const pqxx::row& r) {
  domain::user u;
  u.id = r[0].as<std::int64_t>();
  u.tenant_id = r[1].as<std::int64_t>();
  u.email = r[2].as<std::string>();
  u.full_name = r[3].as<std::string>();
  u.user_role = domain::parse_role(r[4].as<std::string>()).value_or(domain::role::viewer);
  u.password_hash = r[5].as<std::string>();
  u.is_active = r[6].as<bool>();
  u.created_at = r[7].as<std::int64_t>();
  u.updated_at = r[8].as<std::int64_t>();
  return u;
}

domain::failure duplicate_email() {
  return domain::failure::of(domain::errc::duplicate_email,
                             "a user with this e-mail already exists");
}

pqxx::row insert_user_row(pqxx::work& tx, const domain::user& u) {
  return tx
      .exec_params(
          std::string("INSERT INTO users (tenant_id, email, full_name, role, password_hash,"
                      " is_active) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ") +
              user_columns,
          u.tenant_id, u.email, u.full_name, std::string(domain::to_string(u.user_role)),
          u.password_hash, u.is_active)
      .front();
}

} // namespace

domain::outcome<tenant_created> create_tenant(pg_conn& c, const std::string& name,
                                              const domain::user& admin,
                                              const std::string& currency) {
  try {
    pqxx::work tx(c.raw());
    auto tid = tx.exec_params("INSERT INTO tenants (name, currency) VALUES ($1, $2) RETURNING id",
                              name, currency)
                   .front()[0]
                   .as<std::int64_t>();
    tx.exec_params("SELECT crm_create_default_pipeline($1)", tid);
    auto u = admin;
    u.tenant_id = tid;
    auto row = insert_user_row(tx, u);
    tx.commit();
    return tenant_created{tid, row[0].as<std::int64_t>()};
  } catch (const pqxx::unique_violation&) {
    return duplicate_email();
  }
}

std::optional<domain::user> find_user_by_email(pg_conn& c, const std::string& email) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params(
      std::string("SELECT ") + user_columns + " FROM users WHERE lower(email) = lower($1)", email);
  if (r.empty()) return std::nullopt;
  return to_user(r.front());
}

std::vector<domain::user> users_of_tenant(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params(std::string("SELECT ") + user_columns +
                              " FROM users WHERE tenant_id = $1 ORDER BY id",
                          tenant_id);
  std::vector<domain::user> out;
  out.reserve(r.size());
  for (const auto& row : r) out.push_back(to_user(row));
  return out;
}

std::optional<std::int64_t> tenant_of_user(pg_conn& c, std::int64_t user_id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT tenant_id FROM users WHERE id = $1", user_id);
  if (r.empty()) return std::nullopt;
  return r.front()[0].as<std::int64_t>();
}

domain::outcome<domain::user> insert_user(pg_conn& c, domain::user u) {
  try {
    pqxx::work tx(c.raw());
    fence(tx, u.tenant_id);
    auto row = insert_user_row(tx, u);
    tx.commit();
    return to_user(row);
  } catch (const pqxx::unique_violation&) {
    return duplicate_email();
  }
}

std::vector<tenant_summary> list_tenants(pg_conn& c) {
  pqxx::read_transaction tx(c.raw());
  auto rows = tx.exec("SELECT t.id, t.name, (extract(epoch from t.created_at) * 1000000)::bigint,"
                      " (SELECT count(*) FROM users u WHERE u.tenant_id = t.id),"
                      " (SELECT count(*) FROM users u WHERE u.tenant_id = t.id AND u.is_active),"
                      " (SELECT count(*) FROM contacts k WHERE k.tenant_id = t.id)"
                      " FROM tenants t ORDER BY t.id");
  std::vector<tenant_summary> out;
  out.reserve(rows.size());
  for (const auto& r : rows)
    out.push_back({r[0].as<std::int64_t>(), r[1].as<std::string>(), r[2].as<std::int64_t>(),
                   r[3].as<std::int64_t>(), r[4].as<std::int64_t>(), r[5].as<std::int64_t>()});
  return out;
}

user_update_result update_user(pg_conn& c, const domain::user& u, bool revoke_sessions) {
  pqxx::work tx(c.raw());
  fence(tx, u.tenant_id);
  auto row = tx.exec_params(std::string("UPDATE users SET full_name = $2, role = $3,"
                                        " password_hash = $4, is_active = $5, updated_at = now()"
                                        " WHERE id = $1 RETURNING ") +
                                user_columns,
                            u.id, u.full_name, std::string(domain::to_string(u.user_role)),
                            u.password_hash, u.is_active)
                 .front();
  user_update_result out{to_user(row), {}};
  if (revoke_sessions) {
    auto r = tx.exec_params("UPDATE sessions SET revoked_at = now() WHERE user_id = $1"
                            " AND revoked_at IS NULL RETURNING sid",
                            u.id);
    for (const auto& s : r) out.revoked_sessions.push_back(s[0].as<std::string>());
  }
  tx.commit();
  return out;
}

void insert_session(pg_conn& c, const std::string& sid, std::int64_t user_id,
                    std::int64_t tenant_id) {
  pqxx::work tx(c.raw());
  tx.exec_params("INSERT INTO sessions (sid, user_id, tenant_id) VALUES ($1, $2, $3)", sid, user_id,
                 tenant_id);
  tx.commit();
}

bool touch_session(pg_conn& c, const std::string& sid) {
  pqxx::work tx(c.raw());
  auto r = tx.exec_params("UPDATE sessions SET refreshed_at = now() WHERE sid = $1"
                          " AND revoked_at IS NULL RETURNING 1",
                          sid);
  tx.commit();
  return !r.empty();
}

bool revoke_session(pg_conn& c, const std::string& sid) {
  pqxx::work tx(c.raw());
  auto r = tx.exec_params("UPDATE sessions SET revoked_at = now() WHERE sid = $1"
                          " AND revoked_at IS NULL RETURNING 1",
                          sid);
  tx.commit();
  return !r.empty();
}

std::vector<revoked_session> recently_revoked_sessions(pg_conn& c, std::int64_t seconds) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT sid, extract(epoch from revoked_at)::bigint FROM sessions"
                          " WHERE revoked_at > now() - make_interval(secs => $1)",
                          static_cast<double>(seconds));
  std::vector<revoked_session> out;
  for (const auto& row : r) out.push_back({row[0].as<std::string>(), row[1].as<std::int64_t>()});
  return out;
}

} // namespace crm::persistence
