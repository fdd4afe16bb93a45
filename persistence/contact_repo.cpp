#include "persistence/contact_repo.hpp"

#include "domain/clock.hpp"
#include "domain/json_parse.hpp"
#include "persistence/row_values.hpp"

#include <boost/json.hpp>
#include <pqxx/pqxx>

#include <array>
#include <unordered_set>

namespace crm::persistence {
namespace {

const char* contact_columns =
    "id, first_name, last_name, email, phone, company_id, status, source, "
    "array_to_json(tags)::text,"
    " custom_fields::text, (extract(epoch from created_at) * 1000000)::bigint,"
    " (extract(epoch from updated_at) * 1000000)::bigint, owner_id";

const char* company_columns = "id, name, domain, phone, industry, address, custom_fields::text,"
                              " (extract(epoch from created_at) * 1000000)::bigint,"
                              " (extract(epoch from updated_at) * 1000000)::bigint";

std::vector<std::string> tags_from_json(const std::string& text) {
  std::vector<std::string> out;
  boost::json::error_code ec;
  auto v = crm::domain::parse_json(text, ec);
  if (ec || !v.is_array()) return out;
  for (auto& t : v.as_array())
    if (t.is_string()) out.emplace_back(t.as_string().c_str(), t.as_string().size());
  return out;
}

// SQL text builders: values are quoted by the connection, never spliced raw.
struct sql_writer {
  sql_text& out;

  std::string q(const std::string& s) { return out.quote(s); }
  std::string q(const std::optional<std::string>& s) { return s ? out.quote(*s) : "NULL"; }
  std::string ts(std::int64_t micros) {
    return out.quote(domain::format_rfc3339(micros)) + "::timestamptz";
  }
};

} // namespace

contacts_snapshot load_contacts(pg_conn& c, std::int64_t tenant_id) {
  contacts_snapshot snap;
  pqxx::read_transaction tx(c.raw());
  auto companies = tx.exec_params(std::string("SELECT ") + company_columns +
                                      " FROM companies WHERE tenant_id = $1 ORDER BY id",
                                  tenant_id);
  snap.companies.reserve(companies.size());
  for (const auto& r : companies) {
    domain::company co;
    co.id = r[0].as<std::int64_t>();
    co.tenant_id = tenant_id;
    co.name = r[1].as<std::string>();
    co.domain = opt_text(r[2]);
    co.phone = opt_text(r[3]);
    co.industry = opt_text(r[4]);
    co.address = opt_text(r[5]);
    co.custom_fields = compact_json(r[6].as<std::string>());
    co.created_at = r[7].as<std::int64_t>();
    co.updated_at = r[8].as<std::int64_t>();
    snap.companies.push_back(std::move(co));
  }
  auto contacts = tx.exec_params(std::string("SELECT ") + contact_columns +
                                     " FROM contacts WHERE tenant_id = $1 ORDER BY id",
                                 tenant_id);
  snap.contacts.reserve(contacts.size());
  for (const auto& r : contacts) {
    domain::contact ct;
    ct.id = r[0].as<std::int64_t>();
    ct.tenant_id = tenant_id;
    ct.first_name = r[1].as<std::string>();
    ct.last_name = opt_text(r[2]);
    ct.email = opt_text(r[3]);
    ct.phone = opt_text(r[4]);
    if (!r[5].is_null()) ct.company_id = r[5].as<std::int64_t>();
    ct.status = domain::parse_contact_status(r[6].as<std::string>())
                    .value_or(domain::contact_status::active);
    if (!r[7].is_null()) ct.source = domain::parse_contact_source(r[7].as<std::string>());
    ct.tags = tags_from_json(r[8].as<std::string>());
    auto cf = r[9].as<std::string>();
    ct.custom_fields = cf == "{}" ? cf : compact_json(cf);
    ct.created_at = r[10].as<std::int64_t>();
    ct.updated_at = r[11].as<std::int64_t>();
    ct.owner_id = opt_int(r[12]);
    snap.contacts.push_back(std::move(ct));
  }
  for (auto r :
       tx.exec_params("SELECT id FROM users WHERE tenant_id = $1 AND is_active", tenant_id))
    snap.active_users.insert(r[0].as<std::int64_t>());
  for (auto r : tx.exec_params("SELECT duplicate_id, survivor_id FROM contact_merges WHERE"
                               " tenant_id = $1",
                               tenant_id))
    snap.merges.emplace_back(r[0].as<std::int64_t>(), r[1].as<std::int64_t>());
  snap.keys = recent_keys(tx, tenant_id, "");
  snap.event_listeners = has_event_listeners(tx, tenant_id);
  return snap;
}

bool has_event_listeners(pqxx::transaction_base& tx, std::int64_t tenant_id) {
  return tx
      .exec_params("SELECT EXISTS (SELECT 1 FROM workflows WHERE tenant_id = $1 AND is_active"
                   " AND trigger_type NOT IN ('webhook', 'schedule', 'manual'))"
                   " OR EXISTS (SELECT 1 FROM webhook_subscriptions"
                   " WHERE tenant_id = $1 AND is_active)",
                   tenant_id)
      .front()[0]
      .as<bool>();
}

std::vector<idempotency_record> recent_keys(pqxx::transaction_base& tx, std::int64_t tenant_id,
                                            const std::string& prefix) {
  auto rows = tx.exec_params(
      "SELECT key, request_hash, status, response,"
      " (extract(epoch from created_at) * 1000000)::bigint FROM idempotency_keys"
      " WHERE tenant_id = $1 AND starts_with(key, $2) AND created_at > now() - interval '24 hours'",
      tenant_id, prefix);
  std::vector<idempotency_record> keys;
  keys.reserve(rows.size());
  for (const auto& r : rows)
    keys.push_back({r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<int>(),
                    r[3].as<std::string>(), r[4].as<std::int64_t>()});
  return keys;
}

std::vector<std::int64_t> reserve_ids(pg_conn& c, id_kind kind, int n) {
  pqxx::nontransaction tx(c.raw());
  auto seq = kind == id_kind::contact ? "contacts_id_seq" : "companies_id_seq";
  auto r =
      tx.exec_params(std::string("SELECT nextval('") + seq + "') FROM generate_series(1, $1)", n);
  std::vector<std::int64_t> ids;
  ids.reserve(r.size());
  for (const auto& row : r) ids.push_back(row[0].as<std::int64_t>());
  return ids;
}

namespace {

// The contact upsert of a group: $1 the tenant, then one array per column.
constexpr const char* contact_upsert_name = "crm_contacts_upsert";
constexpr const char* contact_prepare_upsert =
    "PREPARE crm_contacts_upsert (bigint, bigint[], text[], text[], text[], text[], bigint[],"
    " text[], text[], text[], jsonb[], timestamptz[], timestamptz[], bigint[]) AS"
    " INSERT INTO contacts (id, tenant_id, first_name, last_name, email, phone, company_id,"
    " status, source, tags, custom_fields, created_at, updated_at, owner_id)"
    " SELECT u.id, $1, u.first_name, u.last_name, u.email, u.phone, u.company_id, u.status,"
    " u.source, u.tags::text[], u.custom_fields, u.created_at, u.updated_at, u.owner_id"
    " FROM unnest($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
    " AS u(id, first_name, last_name, email, phone, company_id, status, source, tags,"
    " custom_fields, created_at, updated_at, owner_id)"
    " ON CONFLICT (id) DO UPDATE SET first_name = EXCLUDED.first_name,"
    " last_name = EXCLUDED.last_name, email = EXCLUDED.email, phone = EXCLUDED.phone,"
    " company_id = EXCLUDED.company_id, owner_id = EXCLUDED.owner_id,"
    " status = EXCLUDED.status, source = EXCLUDED.source,"
    " tags = EXCLUDED.tags, custom_fields = EXCLUDED.custom_fields,"
    " updated_at = EXCLUDED.updated_at WHERE contacts.tenant_id = $1;\n";

} // namespace

void append_events_sql(sql_text& out, std::int64_t tenant,
                       const std::vector<outbox_event>& events) {
  if (events.empty()) return;
  auto& s = out.body();
  auto tid = std::to_string(tenant);
  s += "INSERT INTO outbox (tenant_id, event, payload, depth) VALUES ";
  for (std::size_t i = 0; i < events.size(); ++i)
    s += (i ? "," : "") + std::string("(") + tid + "," + out.quote(events[i].event) + "," +
         out.quote(events[i].payload) + "::jsonb," + std::to_string(events[i].depth) + ")";
  s += ";\n";
}

void append_keys_sql(sql_text& out, std::int64_t tenant,
                     const std::vector<idempotency_record>& keys) {
  auto& s = out.body();
  auto tid = std::to_string(tenant);
  // Expired keys go with the next one stored (24 h, as they are answered).
  if (!keys.empty())
    s += "DELETE FROM idempotency_keys WHERE tenant_id = " + tid +
         " AND created_at < now() - interval '24 hours';\n";
  for (auto& k : keys)
    s += "INSERT INTO idempotency_keys (tenant_id, key, request_hash, status, response) VALUES (" +
         tid + "," + out.quote(k.key) + "," + out.quote(k.request_hash) + "," +
         std::to_string(k.status) + "," + out.quote(k.response) +
         ") ON CONFLICT (tenant_id, key) DO UPDATE SET"
         " request_hash = EXCLUDED.request_hash, status = EXCLUDED.status,"
         " response = EXCLUDED.response, created_at = now();\n";
}

namespace {

// The tables whose rows name a contact, each moved from the duplicate to the survivor by a
// merge. A table added with a contact_id belongs here (docs/patient-record.md).
constexpr std::array<std::string_view, 9> merged_tables{
    "deals",    "conversations",    "channel_identities", "notes", "tasks", "appointments",
    "consents", "reminder_answers", "ai_booking_offers"};

void append_merge_sql(std::string& s, const std::string& tid, const contact_merge& m) {
  auto survivor = std::to_string(m.survivor_id);
  auto duplicate = std::to_string(m.duplicate_id);
  s += "SELECT 1 FROM contacts WHERE tenant_id = " + tid + " AND id = " + duplicate +
       " FOR UPDATE;\n";
  s += "WITH ";
  std::string counts;
  for (auto table : merged_tables) {
    auto name = std::string(table);
    s += "moved_" + name + " AS (UPDATE " + name + " SET contact_id = " + survivor +
         " WHERE tenant_id = " + tid + " AND contact_id = " + duplicate + " RETURNING 1), ";
    if (!counts.empty()) counts += ", ";
    counts += "'" + name + "', (SELECT count(*) FROM moved_" + name + ")";
  }
  // The open workflow runs acting on the duplicate act on the survivor (the fallbacks of
  // domain::action_contact_id; domain::move_payload_contact does the same to the runs in
  // memory).
  auto dup = "'" + duplicate + "'::jsonb", into = "'" + survivor + "'::jsonb";
  s += "moved_workflow_runs AS (UPDATE workflow_runs SET trigger_payload = (SELECT CASE WHEN "
       "x->'contact'->'id' = " +
       dup + " THEN jsonb_set(x, '{contact,id}', " + into +
       ") ELSE x END FROM (SELECT CASE WHEN trigger_payload->'contact_id' = " + dup +
       " THEN jsonb_set(trigger_payload, '{contact_id}', " + into +
       ") ELSE trigger_payload END AS x) p) WHERE tenant_id = " + tid +
       " AND status IN ('queued', 'running', 'waiting') AND (trigger_payload->'contact_id' = '" +
       duplicate + "'::jsonb OR trigger_payload->'contact'->'id' = '" + duplicate +
       "'::jsonb) RETURNING 1), ";
  counts += ", 'workflow_runs', (SELECT count(*) FROM moved_workflow_runs)";
  // Contacts merged into the duplicate before now name the survivor.
  s += "earlier AS (UPDATE contact_merges SET survivor_id = " + survivor +
       " WHERE tenant_id = " + tid + " AND survivor_id = " + duplicate + " RETURNING 1) ";
  s += "INSERT INTO contact_merges (tenant_id, survivor_id, duplicate_id, merged_by, moved,"
       " merged_at) SELECT " +
       tid + ", " + survivor + ", " + duplicate + ", " +
       (m.merged_by ? std::to_string(*m.merged_by) : std::string("NULL")) +
       ", jsonb_build_object(" + counts + "), '" + domain::format_rfc3339(m.merged_at) +
       "'::timestamptz;\n";
}

} // namespace

void contact_batch::append_sql(sql_text& out) const {
  const auto& b = *this;
  out.need_prepared(contact_upsert_name, contact_prepare_upsert);
  sql_writer w{out};
  auto& s = out.body();
  auto tid = std::to_string(b.tenant_id);

  for (auto& co : b.company_upserts) {
    s += "INSERT INTO companies (id, tenant_id, name, domain, phone, industry, address,"
         " custom_fields, created_at, updated_at) VALUES (" +
         std::to_string(co.id) + "," + tid + "," + w.q(co.name) + "," + w.q(co.domain) + "," +
         w.q(co.phone) + "," + w.q(co.industry) + "," + w.q(co.address) + "," +
         w.q(co.custom_fields) + "::jsonb," + w.ts(co.created_at) + "," + w.ts(co.updated_at) +
         ") ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, domain = EXCLUDED.domain,"
         " phone = EXCLUDED.phone, industry = EXCLUDED.industry, address = EXCLUDED.address,"
         " custom_fields = EXCLUDED.custom_fields, updated_at = EXCLUDED.updated_at"
         " WHERE companies.tenant_id = " +
         tid + ";\n";
  }
  auto id_list = [](const std::vector<std::int64_t>& ids) {
    std::string l;
    for (std::size_t i = 0; i < ids.size(); ++i) l += (i ? "," : "") + std::to_string(ids[i]);
    return l;
  };
  for (auto& m : b.merges) append_merge_sql(s, tid, m);
  // Deletes first: an e-mail a deleted contact released may be taken by a row below.
  if (!b.contact_deletes.empty())
    s += "DELETE FROM contacts WHERE tenant_id = " + tid + " AND id IN (" +
         id_list(b.contact_deletes) + ");\n";
  std::unordered_set<std::int64_t> deleted(b.contact_deletes.begin(), b.contact_deletes.end());
  // Rows go in as one array per column to a prepared statement that unnests them: Postgres
  // neither analyses every value of a multi-row VALUES list nor plans a statement per group.
  auto upsert_group = [&](std::size_t from, std::size_t to) {
    array_literal id, first, last, mail, phone, company, status, source, tags, custom, created,
        updated, owner;
    for (auto i = from; i < to; ++i) {
      auto& ct = b.contact_upserts[i];
      if (deleted.count(ct.id)) continue;
      id.add_number(ct.id);
      first.add(ct.first_name);
      last.add_optional(ct.last_name);
      mail.add_optional(ct.email);
      phone.add_optional(ct.phone);
      if (ct.company_id)
        company.add_number(*ct.company_id);
      else
        company.add_null();
      if (ct.owner_id)
        owner.add_number(*ct.owner_id);
      else
        owner.add_null();
      status.add(domain::to_string(ct.status));
      if (ct.source)
        source.add(domain::to_string(*ct.source));
      else
        source.add_null();
      array_literal row_tags;
      for (auto& t : ct.tags) row_tags.add(t);
      tags.add(row_tags.text());
      custom.add(ct.custom_fields);
      created.add(domain::format_rfc3339(ct.created_at));
      updated.add(domain::format_rfc3339(ct.updated_at));
    }
    if (id.empty()) return;
    s += "EXECUTE crm_contacts_upsert(" + tid + "," + out.quote(id.text()) + "," +
         out.quote(first.text()) + "," + out.quote(last.text()) + "," + out.quote(mail.text()) +
         "," + out.quote(phone.text()) + "," + out.quote(company.text()) + "," +
         out.quote(status.text()) + "," + out.quote(source.text()) + "," + out.quote(tags.text()) +
         "," + out.quote(custom.text()) + "," + out.quote(created.text()) + "," +
         out.quote(updated.text()) + "," + out.quote(owner.text()) + ");\n";
  };
  // One EXECUTE per group (a group holds each contact at most once).
  std::size_t from = 0;
  for (auto start : b.contact_group_starts) {
    upsert_group(from, start);
    from = start;
  }
  upsert_group(from, b.contact_upserts.size());
  if (!b.company_deletes.empty())
    s += "DELETE FROM companies WHERE tenant_id = " + tid + " AND id IN (" +
         id_list(b.company_deletes) + ");\n";
  append_events_sql(out, b.tenant_id, b.events);
  append_keys_sql(out, b.tenant_id, b.keys);
}

std::optional<std::int64_t> tenant_of(pg_conn& c, record_kind kind, std::int64_t id) {
  pqxx::read_transaction tx(c.raw());
  auto table = kind == record_kind::contact ? "contacts" : "companies";
  auto r = tx.exec_params(std::string("SELECT tenant_id FROM ") + table + " WHERE id = $1", id);
  if (r.empty()) return std::nullopt;
  return r.front()[0].as<std::int64_t>();
}

} // namespace crm::persistence
