// Availability and appointments (contract §10, docs/appointments.md). Agents and above book and
// change; every role reads. Appointments are health data: reads and changes are audited as
// touches of the patient's record (http/audit.cpp), the changes in their own transaction.
#include "http/api.hpp"

#include "actors/schedule.hpp"
#include "domain/clock.hpp"
#include "domain/schedule.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <charconv>

namespace crm::http {
namespace {

namespace rules = domain::schedule_rules;
using domain::failure;
using domain::issue;

constexpr text_rule notes_rule{.min = 0, .max = rules::notes_max};
constexpr text_rule reason_rule{.min = 0, .max = rules::reason_max};
constexpr std::int64_t day_us = 86'400'000'000;

std::vector<domain::loc_part> at(std::string_view where, std::string_view key) {
  return {std::string(where), std::string(key)};
}

domain::appointment_source source_of(const exchange_ptr& ex) {
  return ex->who.api_key_id != 0 ? domain::appointment_source::api
                                 : domain::appointment_source::staff;
}

void availability(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto service = query_id(ex->req, "service_id", issues, true);
  auto calendar = query_id(ex->req, "calendar_id", issues);
  auto from = query_time(ex->req, "from", issues, true);
  auto to = query_time(ex->req, "to", issues, true);
  if (from && to) {
    if (*to <= *from)
      issues.push_back({at("query", "to"), "to must be after from", "value_error"});
    else if (*to - *from > rules::range_max_days * day_us)
      issues.push_back({at("query", "to"),
                        "the range is at most " + std::to_string(rules::range_max_days) + " days",
                        "value_error"});
  }
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  // A service or calendar the tenant does not hold is a query parameter that fails validation.
  auto reply = actors::callback<std::string>(
      [ex, service = *service, calendar](domain::outcome<std::string> r) {
        if (!r && r.error().code == domain::errc::not_found) {
          bool svc = r.error().detail.starts_with("service");
          return ex->fail(failure::invalid(
              {{at("query", svc ? "service_id" : "calendar_id"),
                std::string(svc ? "service" : "calendar") + " not found in this tenant",
                "value_error"}}));
        }
        if (!r) return ex->fail(r.error());
        ex->json(200, std::move(*r));
      });
  actors::find_availability(s.rt, ex->who.tenant_id, *service, *from, *to, calendar,
                            std::move(reply));
}

void book(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  domain::booking b;
  auto contact = body.id("contact_id", true);
  auto service = body.id("service_id", true);
  auto calendar = body.id("calendar_id", true);
  auto start = body.timestamp("start", true);
  if (auto n = body.text("notes", false, notes_rule)) b.notes = *n;
  if (!body.finish()) return ex->fail(body.failure());
  b.contact_id = *contact;
  b.service_id = *service;
  b.calendar_id = *calendar;
  b.start = *start;
  b.source = source_of(ex);
  actors::book_appointment(s.rt, ex->who.tenant_id, std::move(b),
                           created_reply(ex, "/api/v1/appointments/"));
}

void list_of(services& s, const exchange_ptr& ex, std::optional<std::int64_t> contact) {
  std::vector<issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  domain::appointment_query q;
  q.calendar_id = query_id(ex->req, "calendar_id", issues);
  q.contact_id = contact ? contact : query_id(ex->req, "contact_id", issues);
  if (auto v = ex->req.query_value("status")) {
    q.status = domain::parse_appointment_status(*v);
    if (!q.status)
      issues.push_back({at("query", "status"),
                        "Input should be one of booked, confirmed, arrived, completed, "
                        "cancelled, no_show",
                        "enum"});
  }
  q.from = query_time(ex->req, "from", issues);
  q.to = query_time(ex->req, "to", issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_appointments(s.rt, ex->who.tenant_id, std::move(q), *page, *per_page,
                            json_reply(ex));
}

void list(services& s, const exchange_ptr& ex) {
  list_of(s, ex, std::nullopt);
}

void list_for_contact(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  with_contact(s.rt, ex, *id, [&s, ex, id = *id] { list_of(s, ex, id); });
}

void get(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_appointment(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void change(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  std::optional<domain::appointment_status> status;
  if (auto v = body.one_of("status", false, domain::appointment_statuses))
    status = domain::parse_appointment_status(*v);
  auto notes = body.text("notes", false, notes_rule);
  if (!body.finish()) return ex->fail(body.failure());
  actors::change_appointment(s.rt, ex->who.tenant_id, *id, status, std::move(notes),
                             json_reply(ex));
}

void reschedule(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto start = body.timestamp("start", true);
  auto calendar = body.id("calendar_id", false);
  if (!body.finish()) return ex->fail(body.failure());
  actors::reschedule_appointment(s.rt, ex->who.tenant_id, *id, *start, calendar, json_reply(ex));
}

void cancel(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  std::optional<std::string> reason;
  if (!ex->req.body.empty()) {
    body_reader body(ex->req.body);
    for (auto& i : path_issues) body.issues().push_back(i);
    if (auto r = body.nullable_text("reason", reason_rule)) reason = *r;
    if (!body.finish()) return ex->fail(body.failure());
  } else if (!path_issues.empty()) {
    return ex->fail(failure::invalid(std::move(path_issues)));
  }
  actors::cancel_appointment(s.rt, ex->who.tenant_id, *id, std::move(reason), json_reply(ex));
}

constexpr const char* book_example = R"({
  "contact_id": 1,
  "service_id": 1,
  "calendar_id": 1,
  "start": "2026-12-01T11:00:00Z",
  "notes": "first visit"
})";

void define_appointment_schemas(router& r) {
  using namespace schema;
  define(r, "AppointmentCreate",
         object({{"contact_id", id()},
                 {"service_id", id()},
                 {"calendar_id", id()},
                 {"start", timestamp()},
                 {"notes", text(notes_rule), false}}));
  define(r, "AppointmentUpdate",
         object({{"status", one_of(domain::appointment_statuses), false},
                 {"notes", text(notes_rule), false}}));
  define(r, "AppointmentReschedule",
         object({{"start", timestamp()}, {"calendar_id", id(), false}}));
  define(r, "AppointmentCancel", object({{"reason", nullable(text(reason_rule)), false}}));
  define(r, "Appointment",
         object({{"id", id()},
                 {"contact_id", id()},
                 {"service_id", id()},
                 {"calendar_id", id()},
                 {"start", timestamp()},
                 {"end", timestamp()},
                 {"status", one_of(domain::appointment_statuses)},
                 {"notes", text({})},
                 {"source", one_of(domain::appointment_sources)},
                 {"cancel_reason", nullable(text({}))},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "AppointmentPage", page_of("Appointment"));
  define(r, "Availability",
         object({{"slots",
                  array_of(object(
                      {{"calendar_id", id()}, {"start", timestamp()}, {"end", timestamp()}}))}}));
}

std::vector<query_param> list_filters() {
  using namespace schema;
  return paged({query("calendar_id", id(), "only this calendar's"),
                query("status", one_of(domain::appointment_statuses), "only those in this status"),
                query("from", timestamp(), "only those starting at or after this instant"),
                query("to", timestamp(), "only those starting before this instant")});
}

} // namespace

void add_appointment_routes(router& r, services& s) {
  using domain::permission;
  using namespace schema;
  constexpr auto read = permission::read_records;
  constexpr auto write = permission::write_records;
  define_appointment_schemas(r);
  r.add({verb::get, "/api/v1/availability", access::bearer, read, bind(s, availability),
         "Free slots of a service over up to 31 days, by start then calendar", "appointments"},
        route_doc("", "Availability")
            .with_query({query("service_id", id(), "the service to book (required)"),
                         query("from", timestamp(), "the range's start (required)"),
                         query("to", timestamp(), "the range's end, at most 31 days on (required)"),
                         query("calendar_id", id(), "only this calendar's slots")}));
  auto filters = list_filters();
  auto with_contact_filter = filters;
  with_contact_filter.push_back(query("contact_id", id(), "only this contact's"));
  r.add({verb::get, "/api/v1/appointments", access::bearer, read, bind(s, list),
         "Appointments by start", "appointments"},
        route_doc("", "AppointmentPage").with_query(with_contact_filter));
  r.add({verb::post, "/api/v1/appointments", access::bearer, write, bind(s, book),
         "Book an appointment in a free slot (409 naming why the slot is not free)", "appointments",
         201},
        route_doc("AppointmentCreate", "Appointment").with_example(book_example).fails_with({409}));
  r.add({verb::get, "/api/v1/appointments/{id}", access::bearer, read, bind(s, get),
         "One appointment", "appointments"},
        {"", "Appointment"});
  r.add({verb::patch, "/api/v1/appointments/{id}", access::bearer, write, bind(s, change),
         "Move an appointment along its statuses, or change its notes", "appointments"},
        route_doc("AppointmentUpdate", "Appointment").fails_with({409}));
  r.add({verb::post, "/api/v1/appointments/{id}/reschedule", access::bearer, write,
         bind(s, reschedule), "Move a booked or confirmed appointment to another free slot",
         "appointments"},
        route_doc("AppointmentReschedule", "Appointment").fails_with({409}));
  r.add({verb::post, "/api/v1/appointments/{id}/cancel", access::bearer, write, bind(s, cancel),
         "Cancel a live appointment, freeing its slot", "appointments"},
        route_doc("AppointmentCancel", "Appointment").with_optional_body().fails_with({409}));
  r.add({verb::get, "/api/v1/contacts/{id}/appointments", access::bearer, read,
         bind(s, list_for_contact), "A contact's appointments by start", "appointments"},
        route_doc("", "AppointmentPage").with_query(filters));
}

} // namespace crm::http
