#include "persistence/field_repo.hpp"

#include "persistence/audit_repo.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/sealed_columns.hpp"

#include "domain/clock.hpp"
#include "domain/secret_keys.hpp"

#include "domain/json_parse.hpp"
#include "persistence/fence.hpp"
#include <boost/json.hpp>

#include <pqxx/pqxx>

namespace crm::persistence {
namespace {

const char* columns = "id, entity, name, label, field_type, options::text, required, is_active,"
                      " (extract(epoch from created_at) * 1000000)::bigint,"
                      " (extract(epoch from updated_at) * 1000000)::bigint, sensitive";

domain::custom_field to_field(const pqxx::row& r, std::int64_t tenant) {
  domain::custom_field f;
  f.id = r[0].as<std::int64_t>();
  f.tenant_id = tenant;
  f.entity =
      domain::parse_field_entity(r[1].as<std::string>()).value_or(domain::field_entity::contact);
  f.name = r[2].as<std::string>();
  f.label = r[3].as<std::string>();
  f.type = domain::parse_field_type(r[4].as<std::string>()).value_or(domain::field_type::text);
  if (!r[5].is_null()) {
    boost::json::error_code ec;
    auto v = crm::domain::parse_json(r[5].as<std::string>(), ec);
    if (!ec && v.is_array())
      for (auto& o : v.as_array())
        if (o.is_string()) f.options.emplace_back(o.as_string().c_str(), o.as_string().size());
  }
  f.required = r[6].as<bool>();
  f.is_active = r[7].as<bool>();
  f.created_at = r[8].as<std::int64_t>();
  f.updated_at = r[9].as<std::int64_t>();
  f.sensitive = r[10].as<bool>();
  return f;
}

std::string options_json(const domain::custom_field& f) {
  if (!domain::has_options(f.type)) return "null";
  boost::json::array a;
  for (auto& o : f.options) a.emplace_back(o);
  return boost::json::serialize(a);
}

std::int64_t bump_version(pqxx::work& tx, std::int64_t tenant) {
  return tx
      .exec_params("UPDATE tenants SET fields_version = fields_version + 1 WHERE id = $1"
                   " RETURNING fields_version",
                   tenant)
      .front()[0]
      .as<std::int64_t>();
}

} // namespace

domain::field_definitions load_fields(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  domain::field_definitions out;
  auto v = tx.exec_params("SELECT fields_version FROM tenants WHERE id = $1", tenant_id);
  if (!v.empty()) out.version = v.front()[0].as<std::int64_t>();
  auto r = tx.exec_params(std::string("SELECT ") + columns +
                              " FROM custom_fields WHERE tenant_id = $1 ORDER BY id",
                          tenant_id);
  for (const auto& row : r) out.fields.push_back(to_field(row, tenant_id));
  auto k = tx.exec_params("SELECT data_key FROM tenant_data_keys WHERE tenant_id = $1", tenant_id);
  if (!k.empty()) out.sealed_data_key = k.front()[0].as<std::string>();
  return out;
}

domain::outcome<field_saved> save_field(pg_conn& c, domain::custom_field f) {
  try {
    pqxx::work tx(c.raw());
    fence(tx, f.tenant_id);
    auto opts = options_json(f);
    auto ts = [&](std::int64_t us) { return domain::format_rfc3339(us); };
    pqxx::row row;
    if (f.id == 0) {
      row = tx.exec_params(std::string("INSERT INTO custom_fields (tenant_id, entity, name, label,"
                                       " field_type, options, required, is_active, created_at,"
                                       " updated_at, sensitive) VALUES ($1, $2, $3, $4, $5,"
                                       " $6::jsonb, $7, $8, $9::timestamptz, $10::timestamptz,"
                                       " $11) RETURNING ") +
                               columns,
                           f.tenant_id, std::string(domain::to_string(f.entity)), f.name, f.label,
                           std::string(domain::to_string(f.type)), opts, f.required, f.is_active,
                           ts(f.created_at), ts(f.updated_at), f.sensitive)
                .front();
    } else {
      row = tx.exec_params(std::string("UPDATE custom_fields SET label = $3, field_type = $4,"
                                       " options = $5::jsonb, required = $6, is_active = $7,"
                                       " updated_at = $8::timestamptz WHERE id = $1 AND"
                                       " tenant_id = $2 RETURNING ") +
                               columns,
                           f.id, f.tenant_id, f.label, std::string(domain::to_string(f.type)), opts,
                           f.required, f.is_active, ts(f.updated_at))
                .front();
    }
    auto version = bump_version(tx, f.tenant_id);
    std::string data_key;
    if (f.sensitive) {
      // The tenant's data key exists before its first sensitive value is written.
      tx.exec_params("INSERT INTO tenant_data_keys (tenant_id, data_key) VALUES ($1, $2) "
                     "ON CONFLICT (tenant_id) DO NOTHING",
                     f.tenant_id,
                     c.keys().seal(sealed::tenant_data_key, f.tenant_id,
                                   domain::data_key::generate().bytes()));
      data_key =
          tx.exec_params("SELECT data_key FROM tenant_data_keys WHERE tenant_id = $1", f.tenant_id)
              .front()[0]
              .as<std::string>();
    }
    tx.commit();
    return field_saved{to_field(row, f.tenant_id), version, std::move(data_key)};
  } catch (const pqxx::unique_violation&) {
    return domain::failure::of(domain::errc::conflict,
                               "a custom field with this name exists for this entity");
  }
}

domain::audit_record purge_audit(const domain::audit_context* who, const domain::custom_field& f) {
  auto row = domain::make_audit(who, f.tenant_id, "custom_field", f.id, "purge_values");
  row.fields = {std::string(domain::to_string(f.entity)) + ".custom_fields." + f.name};
  row.status = 204;
  return row;
}

std::int64_t purge_field(pg_conn& c, const domain::custom_field& f,
                         const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, f.tenant_id);
  insert_audit(tx, audit);
  tx.exec_params("DELETE FROM custom_fields WHERE id = $1 AND tenant_id = $2", f.id, f.tenant_id);
  if (f.entity == domain::field_entity::contact)
    tx.exec_params("UPDATE contacts SET custom_fields = custom_fields - $2::text"
                   " WHERE tenant_id = $1 AND custom_fields ? $2::text",
                   f.tenant_id, f.name);
  else if (f.entity == domain::field_entity::company)
    tx.exec_params("UPDATE companies SET custom_fields = custom_fields - $2::text"
                   " WHERE tenant_id = $1 AND custom_fields ? $2::text",
                   f.tenant_id, f.name);
  else if (f.entity == domain::field_entity::deal)
    tx.exec_params("UPDATE deals SET custom_fields = custom_fields - $2::text"
                   " WHERE tenant_id = $1 AND custom_fields ? $2::text",
                   f.tenant_id, f.name);
  auto version = bump_version(tx, f.tenant_id);
  tx.commit();
  return version;
}

std::optional<std::int64_t> tenant_of_field(pg_conn& c, std::int64_t id) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT tenant_id FROM custom_fields WHERE id = $1", id);
  if (r.empty()) return std::nullopt;
  return r.front()[0].as<std::int64_t>();
}

} // namespace crm::persistence
