#include "persistence/totp_repo.hpp"

#include "domain/secret_keys.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/row_values.hpp"
#include "persistence/sealed_columns.hpp"

#include <pqxx/pqxx>

namespace crm::persistence {

totp_state load_totp(pg_conn& c, std::int64_t tenant, std::int64_t user) {
  pqxx::read_transaction tx(c.raw());
  totp_state s;
  auto t = tx.exec_params("SELECT require_totp FROM tenants WHERE id = $1", tenant);
  s.required = !t.empty() && t.front()[0].as<bool>();
  auto r = tx.exec_params(
      "SELECT secret, pending_secret, (extract(epoch from enabled_at) * 1000000)::bigint,"
      " last_step, array_to_string(recovery_codes, ' ') FROM user_totp"
      " WHERE user_id = $1 AND tenant_id = $2",
      user, tenant);
  if (r.empty()) return s;
  auto row = r.front();
  if (!row[0].is_null() && !row[2].is_null())
    s.secret = c.keys().open(sealed::user_totp_secret, tenant, row[0].as<std::string>());
  if (!row[1].is_null())
    s.pending = c.keys().open(sealed::user_totp_secret, tenant, row[1].as<std::string>());
  s.enabled_at = opt_int(row[2]);
  s.last_step = row[3].as<std::int64_t>();
  auto codes = row[4].as<std::string>();
  for (std::size_t at = 0; at < codes.size();) {
    auto end = codes.find(' ', at);
    if (end == std::string::npos) end = codes.size();
    if (end > at) s.recovery_hashes.push_back(codes.substr(at, end - at));
    at = end + 1;
  }
  return s;
}

bool set_pending_totp(pg_conn& c, std::int64_t tenant, std::int64_t user,
                      const std::string& secret) {
  pqxx::work tx(c.raw());
  auto sealed_secret = c.keys().seal(sealed::user_totp_secret, tenant, secret);
  auto r = tx.exec_params(
      "INSERT INTO user_totp (user_id, tenant_id, pending_secret) VALUES ($1, $2, $3)"
      " ON CONFLICT (user_id) DO UPDATE SET pending_secret = EXCLUDED.pending_secret"
      " WHERE user_totp.enabled_at IS NULL AND user_totp.tenant_id = EXCLUDED.tenant_id",
      user, tenant, sealed_secret);
  tx.commit();
  return r.affected_rows() == 1;
}

bool enable_totp(pg_conn& c, std::int64_t tenant, std::int64_t user, std::int64_t step,
                 const std::vector<std::string>& recovery_hashes) {
  pqxx::work tx(c.raw());
  std::string codes = "{";
  for (std::size_t i = 0; i < recovery_hashes.size(); ++i) {
    if (i) codes += ',';
    codes += '"' + recovery_hashes[i] + '"'; // kh1:<id>:<base64url>: no quote or backslash
  }
  codes += '}';
  auto r = tx.exec_params(
      "UPDATE user_totp SET secret = pending_secret, pending_secret = NULL, enabled_at = now(),"
      " last_step = $3, recovery_codes = $4::text[] WHERE user_id = $1 AND tenant_id = $2 AND"
      " pending_secret IS NOT NULL AND enabled_at IS NULL",
      user, tenant, step, codes);
  tx.commit();
  return r.affected_rows() == 1;
}

bool consume_totp_step(pg_conn& c, std::int64_t user, std::int64_t step) {
  pqxx::work tx(c.raw());
  auto r = tx.exec_params("UPDATE user_totp SET last_step = $2 WHERE user_id = $1 AND"
                          " enabled_at IS NOT NULL AND last_step < $2",
                          user, step);
  tx.commit();
  return r.affected_rows() == 1;
}

bool consume_recovery_code(pg_conn& c, std::int64_t user, const std::string& stored) {
  pqxx::work tx(c.raw());
  auto r = tx.exec_params("UPDATE user_totp SET recovery_codes = array_remove(recovery_codes, $2)"
                          " WHERE user_id = $1 AND enabled_at IS NOT NULL AND"
                          " $2 = ANY (recovery_codes)",
                          user, stored);
  tx.commit();
  return r.affected_rows() == 1;
}

bool disable_totp(pg_conn& c, std::int64_t tenant, std::int64_t user) {
  pqxx::work tx(c.raw());
  auto r =
      tx.exec_params("DELETE FROM user_totp WHERE user_id = $1 AND tenant_id = $2", user, tenant);
  tx.commit();
  return r.affected_rows() == 1;
}

std::string user_email(pg_conn& c, std::int64_t user) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT email FROM users WHERE id = $1", user);
  return r.empty() ? std::string() : r.front()[0].as<std::string>();
}

bool totp_required(pg_conn& c, std::int64_t tenant) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT require_totp FROM tenants WHERE id = $1", tenant);
  return !r.empty() && r.front()[0].as<bool>();
}

void set_totp_required(pg_conn& c, std::int64_t tenant, bool required) {
  pqxx::work tx(c.raw());
  tx.exec_params("UPDATE tenants SET require_totp = $2 WHERE id = $1", tenant, required);
  tx.commit();
}

} // namespace crm::persistence
