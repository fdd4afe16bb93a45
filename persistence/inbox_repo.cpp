#include "persistence/inbox_repo.hpp"

#include "domain/clock.hpp"
#include "persistence/fence.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/row_values.hpp"
#include "persistence/tx_batch.hpp"

#include <boost/json.hpp>
#include <pqxx/pqxx>

namespace crm::persistence {
namespace {

constexpr const char* team_columns =
    "id, tenant_id, name, array_to_json(member_ids)::text, array_to_json(channel_ids)::text,"
    " max_open_per_member, (extract(epoch from created_at) * 1000000)::bigint,"
    " (extract(epoch from updated_at) * 1000000)::bigint";

std::vector<std::int64_t> team_ids_of(const pqxx::field& f) {
  std::vector<std::int64_t> out;
  auto v = boost::json::parse(f.as<std::string>());
  if (auto a = v.if_array())
    for (auto& x : *a)
      if (x.is_int64()) out.push_back(x.get_int64());
  return out;
}

domain::team row_to_team(const pqxx::row& r) {
  domain::team t;
  t.id = r[0].as<std::int64_t>();
  t.tenant_id = r[1].as<std::int64_t>();
  t.name = r[2].as<std::string>();
  t.member_ids = team_ids_of(r[3]);
  t.channel_ids = team_ids_of(r[4]);
  if (!r[5].is_null()) t.max_open_per_member = r[5].as<int>();
  t.created_at = r[6].as<std::int64_t>();
  t.updated_at = r[7].as<std::int64_t>();
  return t;
}

std::string team_id_array(const std::vector<std::int64_t>& ids) {
  array_literal a;
  for (auto id : ids) a.add_number(id);
  return a.text();
}

// Members that are active users of the tenant, channels that are the tenant's: else the 422.
std::optional<domain::failure> refused(pqxx::work& tx, const domain::team& t) {
  std::vector<domain::issue> issues;
  auto missing = [&](const char* table, const char* extra, const std::vector<std::int64_t>& ids,
                     const char* field, const char* what) {
    if (ids.empty()) return;
    auto r = tx.exec_params(std::string("SELECT count(*) FROM ") + table +
                                " WHERE tenant_id = $1 AND id = ANY($2::bigint[])" + extra,
                            t.tenant_id, team_id_array(ids));
    if (r.front()[0].as<std::int64_t>() != static_cast<std::int64_t>(ids.size()))
      issues.push_back({{std::string("body"), std::string(field)}, what, "value_error"});
  };
  missing("users", " AND is_active", t.member_ids, "member_ids",
          "each member must be an active user of the tenant");
  missing("channels", "", t.channel_ids, "channel_ids", "each channel must be the tenant's");
  if (issues.empty()) return std::nullopt;
  return domain::failure::invalid(std::move(issues));
}

constexpr const char* canned_columns = "id, tenant_id, shortcode, text, created_by,"
                                       " (extract(epoch from created_at) * 1000000)::bigint,"
                                       " (extract(epoch from updated_at) * 1000000)::bigint";

domain::canned_response row_to_canned(const pqxx::row& r) {
  domain::canned_response c;
  c.id = r[0].as<std::int64_t>();
  c.tenant_id = r[1].as<std::int64_t>();
  c.shortcode = r[2].as<std::string>();
  c.text = r[3].as<std::string>();
  if (!r[4].is_null()) c.created_by = r[4].as<std::int64_t>();
  c.created_at = r[5].as<std::int64_t>();
  c.updated_at = r[6].as<std::int64_t>();
  return c;
}

domain::failure canned_gone() {
  return domain::failure::of(domain::errc::not_found, "canned response not found");
}

domain::failure shortcode_conflict(const std::string& code) {
  return domain::failure::of(domain::errc::conflict,
                             "the shortcode \"" + code + "\" is another canned response's");
}

domain::failure team_gone() {
  return domain::failure::of(domain::errc::not_found, "team not found");
}

std::optional<std::string> cap_text(const std::optional<int>& v) {
  if (!v) return std::nullopt;
  return std::to_string(*v);
}

} // namespace

domain::inbox_store load_inbox(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  domain::inbox_store s;
  for (auto r : tx.exec_params(std::string("SELECT ") + team_columns +
                                   " FROM teams WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    s.put(row_to_team(r));
  for (auto r : tx.exec_params("SELECT a.user_id FROM user_availability a WHERE a.tenant_id = $1"
                               " AND NOT a.available UNION SELECT id FROM users WHERE"
                               " tenant_id = $1 AND NOT is_active",
                               tenant_id))
    s.unavailable.insert(r[0].as<std::int64_t>());
  for (auto r : tx.exec_params(std::string("SELECT ") + canned_columns +
                                   " FROM canned_responses WHERE tenant_id = $1",
                               tenant_id))
    s.put_canned(row_to_canned(r));
  return s;
}

std::optional<std::int64_t> tenant_of_team(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "teams", id);
}

domain::outcome<domain::team> insert_team(pg_conn& c, const domain::team& t) {
  pqxx::work tx(c.raw());
  fence(tx, t.tenant_id);
  if (auto no = refused(tx, t)) return *no;
  auto cap = cap_text(t.max_open_per_member);
  auto r =
      tx.exec_params(std::string("INSERT INTO teams (tenant_id, name, member_ids, channel_ids,"
                                 " max_open_per_member, created_at, updated_at) VALUES ($1,"
                                 " $2, $3::bigint[], $4::bigint[], $5::integer,"
                                 " $6::timestamptz, $6::timestamptz) RETURNING ") +
                         team_columns,
                     t.tenant_id, t.name, team_id_array(t.member_ids), team_id_array(t.channel_ids),
                     cap ? cap->c_str() : nullptr, domain::format_rfc3339(t.created_at));
  tx.commit();
  return row_to_team(r.front());
}

namespace {
domain::outcome<domain::team> write_team(pqxx::work& tx, const domain::team& t) {
  if (auto no = refused(tx, t)) return *no;
  auto cap = cap_text(t.max_open_per_member);
  auto r = tx.exec_params(std::string("UPDATE teams SET name = $3, member_ids = $4::bigint[],"
                                      " channel_ids = $5::bigint[], max_open_per_member ="
                                      " $6::integer, updated_at = $7::timestamptz WHERE"
                                      " tenant_id = $1 AND id = $2 RETURNING ") +
                              team_columns,
                          t.tenant_id, t.id, t.name, team_id_array(t.member_ids),
                          team_id_array(t.channel_ids), cap ? cap->c_str() : nullptr,
                          domain::format_rfc3339(t.updated_at));
  if (r.empty()) return team_gone();
  return row_to_team(r.front());
}
} // namespace

domain::outcome<domain::team> update_team(pg_conn& c, const domain::team& t) {
  pqxx::work tx(c.raw());
  fence(tx, t.tenant_id);
  auto saved = write_team(tx, t);
  if (saved) tx.commit();
  return saved;
}

domain::outcome<std::vector<domain::team>>
update_teams(pg_conn& c, const std::vector<domain::team>& teams, std::int64_t tenant_id) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  std::vector<domain::team> out;
  for (auto& t : teams) {
    auto saved = write_team(tx, t);
    if (!saved) return saved.error();
    out.push_back(std::move(*saved));
  }
  tx.commit();
  return out;
}

domain::outcome<domain::team> delete_team(pg_conn& c, const domain::team& t) {
  pqxx::work tx(c.raw());
  fence(tx, t.tenant_id);
  auto r = tx.exec_params("DELETE FROM teams WHERE tenant_id = $1 AND id = $2 RETURNING id",
                          t.tenant_id, t.id);
  if (r.empty()) return team_gone();
  tx.commit();
  return t;
}

std::optional<std::int64_t> tenant_of_canned(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "canned_responses", id);
}

domain::outcome<domain::canned_response> insert_canned(pg_conn& c,
                                                       const domain::canned_response& r) {
  pqxx::work tx(c.raw());
  fence(tx, r.tenant_id);
  auto by = r.created_by ? std::optional<std::int64_t>(*r.created_by) : std::nullopt;
  auto row = tx.exec_params(
      std::string("INSERT INTO canned_responses (tenant_id, shortcode, text, created_by,"
                  " created_at, updated_at) VALUES ($1, $2, $3, $4, $5::timestamptz,"
                  " $5::timestamptz) ON CONFLICT (tenant_id, shortcode) DO NOTHING RETURNING ") +
          canned_columns,
      r.tenant_id, r.shortcode, r.text, by, domain::format_rfc3339(r.created_at));
  if (row.empty()) return shortcode_conflict(r.shortcode);
  tx.commit();
  return row_to_canned(row.front());
}

domain::outcome<domain::canned_response> update_canned(pg_conn& c,
                                                       const domain::canned_response& r) {
  pqxx::work tx(c.raw());
  fence(tx, r.tenant_id);
  if (!tx.exec_params("SELECT 1 FROM canned_responses WHERE tenant_id = $1 AND shortcode = $2"
                      " AND id <> $3",
                      r.tenant_id, r.shortcode, r.id)
           .empty())
    return shortcode_conflict(r.shortcode);
  auto row =
      tx.exec_params(std::string("UPDATE canned_responses SET shortcode = $3, text = $4,"
                                 " updated_at = $5::timestamptz WHERE tenant_id = $1 AND"
                                 " id = $2 RETURNING ") +
                         canned_columns,
                     r.tenant_id, r.id, r.shortcode, r.text, domain::format_rfc3339(r.updated_at));
  if (row.empty()) return canned_gone();
  tx.commit();
  return row_to_canned(row.front());
}

domain::outcome<domain::canned_response> delete_canned(pg_conn& c,
                                                       const domain::canned_response& r) {
  pqxx::work tx(c.raw());
  fence(tx, r.tenant_id);
  auto row =
      tx.exec_params("DELETE FROM canned_responses WHERE tenant_id = $1 AND id = $2 RETURNING id",
                     r.tenant_id, r.id);
  if (row.empty()) return canned_gone();
  tx.commit();
  return r;
}

void set_availability(pg_conn& c, std::int64_t tenant_id, std::int64_t user_id, bool available) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  tx.exec_params("INSERT INTO user_availability (tenant_id, user_id, available, updated_at)"
                 " VALUES ($1, $2, $3, now()) ON CONFLICT (user_id) DO UPDATE SET available ="
                 " EXCLUDED.available, updated_at = now()",
                 tenant_id, user_id, available);
  tx.commit();
}

bool available_now(pg_conn& c, std::int64_t tenant_id, std::int64_t user_id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT u.is_active AND coalesce(a.available, true) FROM users u LEFT"
                          " JOIN user_availability a ON a.user_id = u.id WHERE u.tenant_id = $1"
                          " AND u.id = $2",
                          tenant_id, user_id);
  return !r.empty() && r.front()[0].as<bool>();
}

} // namespace crm::persistence
