#include "persistence/schedule_repo.hpp"

#include "domain/clock.hpp"
#include "persistence/audit_repo.hpp"
#include "persistence/contact_repo.hpp"
#include "persistence/fence.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/record_rows.hpp"
#include "persistence/row_values.hpp"
#include "persistence/tx_batch.hpp"

#include <pqxx/pqxx>

#include <charconv>
#include <map>
#include <set>

namespace crm::persistence {
namespace {

using domain::failure;

// The SQLSTATE of an exclusion constraint's refusal.
constexpr std::string_view exclusion_violation = "23P01";

constexpr const char* calendar_columns =
    "id, tenant_id, name, kind, user_id, time_zone, working_hours::text, slot_step_minutes, "
    "is_active, " CRM_MICROS("created_at") ", " CRM_MICROS(
        "updated_at") ", feed_shows_names, COALESCE(feed_token_hash, '')";
constexpr const char* closure_columns = "id, tenant_id, calendar_id, " CRM_MICROS(
    "starts_at") ", " CRM_MICROS("ends_at") ", reason, " CRM_MICROS("created_at");
constexpr const char* service_columns =
    "id, tenant_id, name, duration_minutes, buffer_minutes, array_to_string(calendar_ids, ','), "
    "price_cents, currency, reminders::text, is_active, " CRM_MICROS("created_at") ", " CRM_MICROS(
        "updated_at");

domain::calendar to_calendar(const pqxx::row& r) {
  domain::calendar c;
  c.id = r[0].as<std::int64_t>();
  c.tenant_id = r[1].as<std::int64_t>();
  c.name = r[2].as<std::string>();
  c.kind = domain::parse_calendar_kind(r[3].as<std::string>())
               .value_or(domain::calendar_kind::practitioner);
  c.user_id = opt_int(r[4]);
  c.time_zone = r[5].as<std::string>();
  c.hours = domain::parse_working_hours_text(r[6].as<std::string>());
  c.slot_step = r[7].as<int>();
  c.is_active = r[8].as<bool>();
  c.created_at = r[9].as<std::int64_t>();
  c.updated_at = r[10].as<std::int64_t>();
  c.feed_shows_names = r[11].as<bool>();
  c.feed_token_hash = r[12].as<std::string>();
  return c;
}

domain::closure to_closure(const pqxx::row& r) {
  domain::closure c;
  c.id = r[0].as<std::int64_t>();
  c.tenant_id = r[1].as<std::int64_t>();
  c.calendar_id = r[2].as<std::int64_t>();
  c.start = r[3].as<std::int64_t>();
  c.end = r[4].as<std::int64_t>();
  c.reason = r[5].as<std::string>();
  c.created_at = r[6].as<std::int64_t>();
  return c;
}

std::vector<std::int64_t> ids_of(std::string_view csv) {
  std::vector<std::int64_t> out;
  while (!csv.empty()) {
    auto comma = csv.find(',');
    auto item = csv.substr(0, comma);
    std::int64_t v = 0;
    if (std::from_chars(item.data(), item.data() + item.size(), v).ec == std::errc())
      out.push_back(v);
    if (comma == std::string_view::npos) break;
    csv.remove_prefix(comma + 1);
  }
  return out;
}

std::string array_text(const std::vector<std::int64_t>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  return out + "}";
}

domain::service to_service(const pqxx::row& r) {
  domain::service s;
  s.id = r[0].as<std::int64_t>();
  s.tenant_id = r[1].as<std::int64_t>();
  s.name = r[2].as<std::string>();
  s.duration = r[3].as<int>();
  s.buffer = r[4].as<int>();
  s.calendar_ids = ids_of(r[5].as<std::string>());
  s.price_cents = opt_int(r[6]);
  s.currency = opt_text(r[7]);
  s.reminders = domain::parse_reminders_text(r[8].as<std::string>());
  s.is_active = r[9].as<bool>();
  s.created_at = r[10].as<std::int64_t>();
  s.updated_at = r[11].as<std::int64_t>();
  return s;
}

} // namespace

namespace rows {

const char* const appointment_columns =
    "id, tenant_id, contact_id, service_id, calendar_id, " CRM_MICROS("starts_at") ", " CRM_MICROS(
        "ends_at") ", " CRM_MICROS("blocked_until") ", status, notes, source, cancel_reason, "
                                                    "" CRM_MICROS("created_at") ", " CRM_MICROS(
                                                        "updated_at");

domain::appointment to_appointment(const pqxx::row& r) {
  domain::appointment a;
  a.id = r[0].as<std::int64_t>();
  a.tenant_id = r[1].as<std::int64_t>();
  a.contact_id = r[2].as<std::int64_t>();
  a.service_id = r[3].as<std::int64_t>();
  a.calendar_id = r[4].as<std::int64_t>();
  a.start = r[5].as<std::int64_t>();
  a.end = r[6].as<std::int64_t>();
  a.blocked_until = r[7].as<std::int64_t>();
  a.status = domain::parse_appointment_status(r[8].as<std::string>())
                 .value_or(domain::appointment_status::cancelled);
  a.notes = r[9].as<std::string>();
  a.source = domain::parse_appointment_source(r[10].as<std::string>())
                 .value_or(domain::appointment_source::staff);
  a.cancel_reason = opt_text(r[11]);
  a.created_at = r[12].as<std::int64_t>();
  a.updated_at = r[13].as<std::int64_t>();
  return a;
}

} // namespace rows
using rows::appointment_columns;
using rows::to_appointment;

namespace {

const char* opt_param(const std::optional<std::string>& s) {
  return s ? s->c_str() : nullptr;
}

failure gone(const char* what) {
  return failure::of(domain::errc::not_found, what);
}

failure invalid(std::vector<domain::loc_part> loc, std::string msg) {
  return failure::invalid({domain::issue{std::move(loc), std::move(msg), "value_error"}});
}

failure taken() {
  return failure::of(domain::errc::conflict,
                     "the slot is taken: another appointment (or its buffer) overlaps it");
}

failure removed_meanwhile() {
  return failure::of(domain::errc::conflict,
                     "the calendar or the service was removed while the booking was made");
}

// A user_id, when set, must name a user of the tenant.
bool user_is_tenants(pqxx::work& tx, const domain::calendar& cal) {
  if (!cal.user_id) return true;
  return !tx.exec_params("SELECT 1 FROM users WHERE tenant_id = $1 AND id = $2", cal.tenant_id,
                         *cal.user_id)
              .empty();
}

// Every reminder's channel must be the tenant's.
std::optional<failure> unknown_channels(pqxx::work& tx, const domain::service& s) {
  std::vector<domain::issue> issues;
  for (std::size_t i = 0; i < s.reminders.size(); ++i) {
    auto r = tx.exec_params("SELECT type FROM channels WHERE tenant_id = $1 AND id = $2",
                            s.tenant_id, s.reminders[i].channel_id);
    const std::vector<domain::loc_part> at{std::string("body"), std::string("reminders"),
                                           static_cast<std::int64_t>(i)};
    auto where = [&](const char* key) {
      auto l = at;
      l.emplace_back(std::string(key));
      return l;
    };
    if (r.empty())
      issues.push_back({where("channel_id"), "channel not found in this tenant", "value_error"});
    else if (!s.reminders[i].template_json.empty() && r[0][0].as<std::string>() != "whatsapp")
      issues.push_back(
          {where("template"), "a template is sent on a WhatsApp channel only", "value_error"});
  }
  if (issues.empty()) return std::nullopt;
  return failure::invalid(std::move(issues));
}

std::string reminders_text(const domain::service& s) {
  return boost::json::serialize(domain::reminders_to_json(s.reminders));
}

void emit(pqxx::work& tx, const domain::appointment& saved, const appointment_event& e) {
  if (!e.name) return;
  tx.exec_params("INSERT INTO outbox (tenant_id, event, payload, depth) VALUES ($1, $2, "
                 "$3::jsonb, 0)",
                 saved.tenant_id, std::string(e.name), domain::appointment_event(saved, e.extra));
}

std::optional<std::string> price_text(const domain::service& s) {
  if (!s.price_cents) return std::nullopt;
  return std::to_string(*s.price_cents);
}

} // namespace

domain::schedule_store load_schedule(pg_conn& c, std::int64_t tenant_id) {
  pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx(c.raw());
  domain::schedule_store s;
  auto all = [&](const char* columns, const char* table) {
    return tx.exec_params(std::string("SELECT ") + columns + " FROM " + table +
                              " WHERE tenant_id = $1 ORDER BY id",
                          tenant_id);
  };
  s.event_listeners = has_event_listeners(tx, tenant_id);
  for (auto r : all(calendar_columns, "calendars")) s.put(to_calendar(r));
  for (auto r : all(closure_columns, "calendar_closures")) s.put(to_closure(r));
  for (auto r : all(service_columns, "services")) s.put(to_service(r));
  for (auto r : all(appointment_columns, "appointments")) s.put(to_appointment(r));
  // The reminders of appointments still to come (older ones can never be due again).
  for (auto r : tx.exec_params("SELECT appointment_id, before_minutes, " CRM_MICROS(
                                   "starts_at") " FROM appointment_reminders WHERE tenant_id = $1"
                                                " AND starts_at > now() - interval '1 day'",
                               tenant_id))
    s.reminders_done.insert({r[0].as<std::int64_t>(), r[1].as<int>(), r[2].as<std::int64_t>()});
  return s;
}

std::optional<std::int64_t> owner_of_schedule_row(pg_conn& c, std::int64_t id,
                                                  std::string_view what) {
  const char* table = nullptr;
  if (what.starts_with("calendar"))
    table = "calendars";
  else if (what.starts_with("closure"))
    table = "calendar_closures";
  else if (what.starts_with("service"))
    table = "services";
  else if (what.starts_with("appointment"))
    table = "appointments";
  if (!table) return std::nullopt;
  return tenant_of_row(c.raw(), table, id);
}

domain::outcome<domain::calendar> insert_calendar(pg_conn& c, const domain::calendar& cal) {
  pqxx::work tx(c.raw());
  fence(tx, cal.tenant_id);
  if (!user_is_tenants(tx, cal))
    return invalid({std::string("body"), std::string("user_id")}, "user not found in this tenant");
  auto user = cal.user_id ? std::optional(std::to_string(*cal.user_id)) : std::nullopt;
  auto r = tx.exec_params(
      std::string("INSERT INTO calendars (tenant_id, name, kind, user_id, time_zone, "
                  "working_hours, slot_step_minutes, is_active, created_at, updated_at, "
                  "feed_shows_names) VALUES ($1, $2, $3, $4::bigint, $5, $6::jsonb, $7, $8, "
                  "$9::timestamptz, $9::timestamptz, $10) RETURNING ") +
          calendar_columns,
      cal.tenant_id, cal.name, std::string(domain::to_string(cal.kind)), opt_param(user),
      cal.time_zone, domain::working_hours_text(cal.hours), cal.slot_step, cal.is_active,
      ts(cal.created_at), cal.feed_shows_names);
  auto saved = to_calendar(r.front());
  tx.commit();
  return saved;
}

domain::outcome<domain::calendar> update_calendar(pg_conn& c, const domain::calendar& cal) {
  pqxx::work tx(c.raw());
  fence(tx, cal.tenant_id);
  if (!user_is_tenants(tx, cal))
    return invalid({std::string("body"), std::string("user_id")}, "user not found in this tenant");
  auto user = cal.user_id ? std::optional(std::to_string(*cal.user_id)) : std::nullopt;
  auto r = tx.exec_params(
      std::string("UPDATE calendars SET name = $3, kind = $4, user_id = $5::bigint, "
                  "time_zone = $6, working_hours = $7::jsonb, slot_step_minutes = $8, "
                  "is_active = $9, updated_at = $10::timestamptz, feed_shows_names = $11, "
                  "feed_token_hash = NULLIF($12, '') WHERE tenant_id = $1 AND id = $2 "
                  "RETURNING ") +
          calendar_columns,
      cal.tenant_id, cal.id, cal.name, std::string(domain::to_string(cal.kind)), opt_param(user),
      cal.time_zone, domain::working_hours_text(cal.hours), cal.slot_step, cal.is_active,
      ts(cal.updated_at), cal.feed_shows_names, cal.feed_token_hash);
  if (r.empty()) return gone("calendar not found");
  auto saved = to_calendar(r.front());
  tx.commit();
  return saved;
}

domain::outcome<domain::calendar> delete_calendar(pg_conn& c, const domain::calendar& cal) {
  pqxx::work tx(c.raw());
  fence(tx, cal.tenant_id);
  try {
    auto r = tx.exec_params("DELETE FROM calendars WHERE tenant_id = $1 AND id = $2", cal.tenant_id,
                            cal.id);
    if (r.affected_rows() == 0) return gone("calendar not found");
  } catch (const pqxx::foreign_key_violation&) {
    return failure::of(domain::errc::conflict,
                       "the calendar has appointments: deactivate it (is_active: false) instead");
  }
  tx.exec_params("UPDATE services SET calendar_ids = array_remove(calendar_ids, $2) "
                 "WHERE tenant_id = $1 AND $2 = ANY(calendar_ids)",
                 cal.tenant_id, cal.id);
  tx.commit();
  return cal;
}

domain::outcome<domain::closure> insert_closure(pg_conn& c, const domain::closure& cl) {
  pqxx::work tx(c.raw());
  fence(tx, cl.tenant_id);
  auto r = tx.exec_params(
      std::string("INSERT INTO calendar_closures (tenant_id, calendar_id, starts_at, ends_at, "
                  "reason, created_at) SELECT $1, $2, $3::timestamptz, $4::timestamptz, $5, "
                  "$6::timestamptz WHERE EXISTS (SELECT 1 FROM calendars WHERE tenant_id = $1 "
                  "AND id = $2) RETURNING ") +
          closure_columns,
      cl.tenant_id, cl.calendar_id, ts(cl.start), ts(cl.end), cl.reason, ts(cl.created_at));
  if (r.empty()) return gone("calendar not found");
  auto saved = to_closure(r.front());
  tx.commit();
  return saved;
}

domain::outcome<domain::closure> delete_closure(pg_conn& c, const domain::closure& cl) {
  pqxx::work tx(c.raw());
  fence(tx, cl.tenant_id);
  auto r = tx.exec_params("DELETE FROM calendar_closures WHERE tenant_id = $1 AND id = $2",
                          cl.tenant_id, cl.id);
  if (r.affected_rows() == 0) return gone("closure not found");
  tx.commit();
  return cl;
}

domain::outcome<domain::service> insert_service(pg_conn& c, const domain::service& s) {
  pqxx::work tx(c.raw());
  fence(tx, s.tenant_id);
  if (auto f = unknown_channels(tx, s)) return *f;
  auto price = price_text(s);
  auto r = tx.exec_params(
      std::string("INSERT INTO services (tenant_id, name, duration_minutes, buffer_minutes, "
                  "calendar_ids, price_cents, currency, reminders, is_active, created_at, "
                  "updated_at) VALUES ($1, $2, $3, $4, $5::bigint[], $6::bigint, $7, $8::jsonb, "
                  "$9, $10::timestamptz, $10::timestamptz) RETURNING ") +
          service_columns,
      s.tenant_id, s.name, s.duration, s.buffer, array_text(s.calendar_ids), opt_param(price),
      opt_param(s.currency), reminders_text(s), s.is_active, ts(s.created_at));
  auto saved = to_service(r.front());
  tx.commit();
  return saved;
}

domain::outcome<domain::service> update_service(pg_conn& c, const domain::service& s) {
  pqxx::work tx(c.raw());
  fence(tx, s.tenant_id);
  if (auto f = unknown_channels(tx, s)) return *f;
  auto price = price_text(s);
  auto r = tx.exec_params(
      std::string("UPDATE services SET name = $3, duration_minutes = $4, buffer_minutes = $5, "
                  "calendar_ids = $6::bigint[], price_cents = $7::bigint, currency = $8, "
                  "reminders = $9::jsonb, is_active = $10, updated_at = $11::timestamptz "
                  "WHERE tenant_id = $1 AND id = $2 RETURNING ") +
          service_columns,
      s.tenant_id, s.id, s.name, s.duration, s.buffer, array_text(s.calendar_ids), opt_param(price),
      opt_param(s.currency), reminders_text(s), s.is_active, ts(s.updated_at));
  if (r.empty()) return gone("service not found");
  auto saved = to_service(r.front());
  tx.commit();
  return saved;
}

domain::outcome<domain::service> delete_service(pg_conn& c, const domain::service& s) {
  pqxx::work tx(c.raw());
  fence(tx, s.tenant_id);
  try {
    auto r =
        tx.exec_params("DELETE FROM services WHERE tenant_id = $1 AND id = $2", s.tenant_id, s.id);
    if (r.affected_rows() == 0) return gone("service not found");
  } catch (const pqxx::foreign_key_violation&) {
    return failure::of(domain::errc::conflict,
                       "the service has appointments: deactivate it (is_active: false) instead");
  }
  tx.commit();
  return s;
}

domain::outcome<domain::appointment>
insert_appointment(pg_conn& c, const domain::appointment& a,
                   const std::vector<domain::audit_record>& audit, const appointment_event& e) {
  pqxx::work tx(c.raw());
  fence(tx, a.tenant_id);
  try {
    // The contact must still be the tenant's (deleted meanwhile: nothing inserted).
    auto r = tx.exec_params(
        std::string("INSERT INTO appointments (tenant_id, contact_id, service_id, calendar_id, "
                    "starts_at, ends_at, blocked_until, status, notes, source, cancel_reason, "
                    "created_at, updated_at) SELECT $1, $2, $3, $4, $5::timestamptz, "
                    "$6::timestamptz, $7::timestamptz, $8, $9, $10, $11, $12::timestamptz, "
                    "$12::timestamptz WHERE EXISTS (SELECT 1 FROM contacts WHERE tenant_id = $1 "
                    "AND id = $2) RETURNING ") +
            appointment_columns,
        a.tenant_id, a.contact_id, a.service_id, a.calendar_id, ts(a.start), ts(a.end),
        ts(a.blocked_until), std::string(domain::to_string(a.status)), a.notes,
        std::string(domain::to_string(a.source)), opt_param(a.cancel_reason), ts(a.created_at));
    if (r.empty())
      return invalid({std::string("body"), std::string("contact_id")},
                     "contact not found in this tenant");
    auto saved = to_appointment(r.front());
    insert_audit(tx, audit);
    emit(tx, saved, e);
    tx.commit();
    return saved;
  } catch (const pqxx::foreign_key_violation&) {
    return removed_meanwhile();
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() == exclusion_violation) return taken();
    throw;
  }
}

namespace {
// A batch of bookings: one row each, unless its contact is no longer the tenant's. Prepared
// once per connection (parsed and planned once, not at every batch).
const prepared_statement insert_batch{
    "crm_insert_appointments",
    std::string(
        "INSERT INTO appointments (tenant_id, contact_id, service_id, calendar_id, starts_at, "
        "ends_at, blocked_until, status, notes, source, created_at, updated_at) SELECT $1, "
        "x.contact_id, x.service_id, x.calendar_id, x.starts_at, x.ends_at, x.blocked_until, "
        "x.status, x.notes, x.source, x.created_at, x.created_at FROM unnest($2::bigint[], "
        "$3::bigint[], $4::bigint[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[], "
        "$8::text[], $9::text[], $10::text[], $11::timestamptz[]) AS x(contact_id, service_id, "
        "calendar_id, starts_at, ends_at, blocked_until, status, notes, source, created_at) "
        "WHERE EXISTS (SELECT 1 FROM contacts WHERE tenant_id = $1 AND id = x.contact_id) "
        "RETURNING ") +
        appointment_columns};
} // namespace

std::vector<domain::outcome<domain::appointment>>
insert_appointments(pg_conn& c, const std::vector<appointment_insert>& rows) {
  std::vector<domain::outcome<domain::appointment>> out;
  if (rows.empty()) return out;
  const auto tenant = rows.front().a.tenant_id;
  try {
    c.prepare_once(insert_batch); // before the transaction: it may (re)connect
    pqxx::work tx(c.raw());
    fence(tx, tenant);
    // One statement for every row: no two staged bookings share a calendar and a start, so the
    // rows inserted are matched back by those. A contact deleted meanwhile skips its row alone
    // (the EXISTS).
    array_literal contacts, services, calendars, starts, ends, blocked, statuses, notes, sources,
        created;
    for (auto& row : rows) {
      auto& a = row.a;
      contacts.add_number(a.contact_id);
      services.add_number(a.service_id);
      calendars.add_number(a.calendar_id);
      starts.add(ts(a.start));
      ends.add(ts(a.end));
      blocked.add(ts(a.blocked_until));
      statuses.add(domain::to_string(a.status));
      notes.add(a.notes);
      sources.add(domain::to_string(a.source));
      created.add(ts(a.created_at));
    }
    auto inserted = tx.exec_prepared(insert_batch.name, tenant, contacts.text(), services.text(),
                                     calendars.text(), starts.text(), ends.text(), blocked.text(),
                                     statuses.text(), notes.text(), sources.text(), created.text());
    std::map<std::pair<std::int64_t, std::int64_t>, domain::appointment> saved;
    for (auto r : inserted) {
      auto a = to_appointment(r);
      saved.emplace(std::make_pair(a.calendar_id, a.start), std::move(a));
    }
    std::set<std::int64_t> present;
    if (saved.size() < rows.size())
      for (auto r : tx.exec_params("SELECT id FROM contacts WHERE tenant_id = $1 AND id = "
                                   "ANY($2::bigint[])",
                                   tenant, contacts.text()))
        present.insert(r[0].as<std::int64_t>());
    std::vector<domain::audit_record> audit;
    array_literal events, payloads;
    for (auto& row : rows) {
      auto it = saved.find({row.a.calendar_id, row.a.start});
      if (it == saved.end()) {
        if (!present.count(row.a.contact_id))
          out.push_back(invalid({std::string("body"), std::string("contact_id")},
                                "contact not found in this tenant"));
        else
          out.push_back(taken());
        continue;
      }
      audit.insert(audit.end(), row.audit.begin(), row.audit.end());
      if (row.event.name) {
        events.add(row.event.name);
        payloads.add(domain::appointment_event(it->second, row.event.extra));
      }
      out.push_back(it->second);
    }
    insert_audit(tx, audit);
    if (!events.empty())
      tx.exec_params(
          "INSERT INTO outbox (tenant_id, event, payload, depth) SELECT $1, e, "
          "p::jsonb, 0 FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS x(e, p, n) "
          "ORDER BY n",
          tenant, events.text(), payloads.text());
    tx.commit();
    return out;
  } catch (const pqxx::sql_error& e) {
    // A calendar or service removed meanwhile, or an overlap another writer committed meanwhile
    // (another node, a restore): each row alone, so only its own fail. (ON CONFLICT DO NOTHING
    // would skip the overlapping row alone, but it searches the exclusion index twice a row,
    // before and after the insert, for what the schedule actor already refused from memory:
    // 28 % more of that search a booking, benchmarks/RESULTS.md 2026-11-28T14:33Z.)
    if (!dynamic_cast<const pqxx::foreign_key_violation*>(&e) &&
        e.sqlstate() != exclusion_violation)
      throw;
    out.clear();
    for (auto& row : rows) out.push_back(insert_appointment(c, row.a, row.audit, row.event));
    return out;
  }
}

domain::outcome<domain::appointment>
update_appointment(pg_conn& c, const domain::appointment& a,
                   const std::vector<domain::audit_record>& audit, const appointment_event& e,
                   std::int64_t settles) {
  pqxx::work tx(c.raw());
  fence(tx, a.tenant_id);
  try {
    if (settles != 0 &&
        tx.exec_params("DELETE FROM reminder_answers WHERE tenant_id = $1 AND message_id = $2",
                       a.tenant_id, settles)
                .affected_rows() == 0)
      return failure::of(domain::errc::conflict, answer_settled_already);
    auto r = tx.exec_params(
        std::string("UPDATE appointments SET calendar_id = $3, starts_at = $4::timestamptz, "
                    "ends_at = $5::timestamptz, blocked_until = $6::timestamptz, status = $7, "
                    "notes = $8, source = $9, cancel_reason = $10, updated_at = "
                    "$11::timestamptz WHERE tenant_id = $1 AND id = $2 RETURNING ") +
            appointment_columns,
        a.tenant_id, a.id, a.calendar_id, ts(a.start), ts(a.end), ts(a.blocked_until),
        std::string(domain::to_string(a.status)), a.notes, std::string(domain::to_string(a.source)),
        opt_param(a.cancel_reason), ts(a.updated_at));
    if (r.empty()) return gone("appointment not found");
    auto saved = to_appointment(r.front());
    insert_audit(tx, audit);
    emit(tx, saved, e);
    tx.commit();
    return saved;
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() == exclusion_violation) return taken();
    throw;
  }
}

domain::outcome<domain::reminder_key> skip_reminder(pg_conn& c, std::int64_t tenant_id,
                                                    const domain::reminder_key& key,
                                                    const std::string& reason) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  tx.exec_params("INSERT INTO appointment_reminders (appointment_id, before_minutes, starts_at, "
                 "tenant_id, status, reason) SELECT $1, $2, $3::timestamptz, $4, 'skipped', $5 "
                 "WHERE EXISTS (SELECT 1 FROM appointments WHERE tenant_id = $4 AND id = $1) "
                 "ON CONFLICT DO NOTHING",
                 key.appointment_id, key.before_minutes, ts(key.start), tenant_id, reason);
  tx.commit();
  return key;
}

std::vector<domain::patient_answer> pending_reminder_answers(pg_conn& c, std::int64_t tenant_id) {
  pqxx::read_transaction tx(c.raw());
  std::vector<domain::patient_answer> out;
  for (auto r : tx.exec_params(
           "SELECT a.message_id, a.contact_id, a.conversation_id,"
           " a.channel_id, m.text, " CRM_MICROS(
               "m.created_at") " FROM reminder_answers a JOIN messages m ON m.id = a.message_id"
                               " WHERE a.tenant_id = $1 ORDER BY a.message_id",
           tenant_id)) {
    domain::patient_answer p;
    p.message_id = r[0].as<std::int64_t>();
    p.contact_id = r[1].as<std::int64_t>();
    p.conversation_id = r[2].as<std::int64_t>();
    p.channel_id = r[3].as<std::int64_t>();
    p.text = r[4].as<std::string>();
    p.received_at = r[5].as<std::int64_t>();
    out.push_back(std::move(p));
  }
  return out;
}

bool settle_reminder_answer(pg_conn& c, std::int64_t tenant_id, std::int64_t message_id) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  bool removed =
      tx.exec_params("DELETE FROM reminder_answers WHERE tenant_id = $1 AND message_id = $2",
                     tenant_id, message_id)
          .affected_rows() > 0;
  tx.commit();
  return removed;
}

std::vector<std::int64_t> tenants_with_pending_answers(pg_conn& c, double grace_seconds) {
  pqxx::read_transaction tx(c.raw());
  return first_ids(tx.exec_params("SELECT DISTINCT tenant_id FROM reminder_answers WHERE"
                                  " created_at < now() - $1 * interval '1 second'",
                                  grace_seconds));
}

std::vector<std::int64_t> tenants_with_due_reminders(pg_conn& c) {
  pqxx::read_transaction tx(c.raw());
  // Every second, so bounded: no service with reminders (most tenants) reads nothing more, and
  // each service's reminders read only its live appointments within that reminder's lead (a
  // range of appointments_due_idx, migration 024): one tenant's 30-day reminder widens no one
  // else's.
  array_literal services, leads;
  for (auto r : tx.exec("SELECT s.id, (r.rule->>'before_minutes')::int FROM services s,"
                        " jsonb_array_elements(s.reminders) AS r(rule)"
                        " WHERE s.reminders <> '[]'::jsonb")) {
    services.add_number(r[0].as<std::int64_t>());
    leads.add_number(r[1].as<std::int64_t>());
  }
  if (services.empty()) return {};
  auto rows = tx.exec_params(
      "SELECT DISTINCT a.tenant_id FROM unnest($1::bigint[], $2::int[]) AS l(service_id, lead),"
      " LATERAL (SELECT a.tenant_id FROM appointments a WHERE a.service_id = l.service_id"
      "   AND a.status IN ('booked', 'confirmed') AND a.starts_at > now()"
      "   AND a.starts_at <= now() + l.lead * interval '1 minute'"
      "   AND NOT EXISTS (SELECT 1 FROM appointment_reminders x WHERE x.appointment_id = a.id"
      "     AND x.before_minutes = l.lead AND x.starts_at = a.starts_at)) a",
      services.text(), leads.text());
  return first_ids(rows);
}

demo_schedule seed_demo_schedule(pg_conn& c, std::int64_t tenant_id) {
  pqxx::work tx(c.raw());
  demo_schedule d;
  d.contact_id =
      tx.exec_params1("INSERT INTO contacts (tenant_id, first_name, last_name, email, phone, "
                      "status, source, tags, created_at, updated_at) VALUES ($1, 'Maria', "
                      "'Silva', 'maria.silva@example.org', '+5511987650001', 'active', "
                      "'manual', '{patient}', now(), now()) RETURNING id",
                      tenant_id)[0]
          .as<std::int64_t>();
  domain::working_week week;
  for (int day = 0; day < 5; ++day) week[day] = {{8 * 60, 12 * 60}, {13 * 60, 18 * 60}};
  d.calendar_id = tx.exec_params1("INSERT INTO calendars (tenant_id, name, kind, time_zone, "
                                  "working_hours, slot_step_minutes, is_active, created_at, "
                                  "updated_at) VALUES ($1, 'Dra. Helena Costa', 'practitioner', "
                                  "'America/Sao_Paulo', $2::jsonb, 15, true, now(), now()) "
                                  "RETURNING id",
                                  tenant_id, domain::working_hours_text(week))[0]
                      .as<std::int64_t>();
  d.service_id = tx.exec_params1("INSERT INTO services (tenant_id, name, duration_minutes, "
                                 "buffer_minutes, calendar_ids, price_cents, currency, "
                                 "created_at, updated_at) VALUES ($1, 'Check-up', 30, 5, "
                                 "ARRAY[$2::bigint], 25000, 'BRL', now(), now()) RETURNING id",
                                 tenant_id, d.calendar_id)[0]
                     .as<std::int64_t>();
  // 09:00 in São Paulo on the first weekday after today there.
  d.appointment_id =
      tx.exec_params1(
            "WITH day AS (SELECT d FROM generate_series(1, 3) AS n, LATERAL (SELECT "
            "(date_trunc('day', now() AT TIME ZONE 'America/Sao_Paulo') + n * interval '1 day') "
            "AS d) x WHERE extract(isodow FROM d) <= 5 ORDER BY n LIMIT 1), slot AS (SELECT "
            "(d + interval '9 hours') AT TIME ZONE 'America/Sao_Paulo' AS s FROM day) "
            "INSERT INTO appointments (tenant_id, contact_id, service_id, calendar_id, starts_at, "
            "ends_at, blocked_until, status, notes, source, created_at, updated_at) SELECT $1, $2, "
            "$3, $4, s, s + interval '30 minutes', s + interval '35 minutes', 'booked', "
            "'First visit', 'staff', now(), now() FROM slot RETURNING id",
            tenant_id, d.contact_id, d.service_id, d.calendar_id)[0]
          .as<std::int64_t>();
  tx.commit();
  return d;
}

} // namespace crm::persistence
