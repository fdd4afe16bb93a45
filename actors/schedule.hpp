// Calendars, services and appointments of a tenant (contract §10, docs/appointments.md), owned
// by the tenant's schedule actor: the only writer of its bookings, so two bookings of one slot
// are decided in its mailbox (and by the database's exclusion constraint behind it). Answers
// are the JSON the API returns.
#pragma once
#include "actors/callback.hpp"
#include "domain/ai_booking.hpp"
#include "domain/ical.hpp"
#include "domain/schedule.hpp"

#include <optional>
#include <string>

namespace crm::persistence {
class pg_conn;
struct secret_owner;
} // namespace crm::persistence

namespace crm::actors {

class runtime;

void list_calendars(runtime& rt, std::int64_t tenant, int page, int per_page,
                    callback<std::string> reply);
void get_calendar(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void create_calendar(runtime& rt, std::int64_t tenant, domain::calendar c,
                     callback<std::string> reply);
void update_calendar(runtime& rt, std::int64_t tenant, std::int64_t id, domain::calendar_patch p,
                     callback<std::string> reply);
// 409 while appointments name it.
void delete_calendar(runtime& rt, std::int64_t tenant, std::int64_t id,
                     callback<domain::done> reply);

void list_closures(runtime& rt, std::int64_t tenant, std::int64_t calendar, int page, int per_page,
                   callback<std::string> reply);
void add_closure(runtime& rt, std::int64_t tenant, domain::closure c, callback<std::string> reply);
void remove_closure(runtime& rt, std::int64_t tenant, std::int64_t calendar, std::int64_t id,
                    callback<domain::done> reply);

void list_services(runtime& rt, std::int64_t tenant, int page, int per_page,
                   callback<std::string> reply);
void get_service(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void create_service(runtime& rt, std::int64_t tenant, domain::service s,
                    callback<std::string> reply);
void update_service(runtime& rt, std::int64_t tenant, std::int64_t id, domain::service_patch p,
                    callback<std::string> reply);
void delete_service(runtime& rt, std::int64_t tenant, std::int64_t id,
                    callback<domain::done> reply);

// {"slots": [...]} of `service` with start in [from, to).
void find_availability(runtime& rt, std::int64_t tenant, std::int64_t service, std::int64_t from,
                       std::int64_t to, std::optional<std::int64_t> calendar,
                       callback<std::string> reply);

// The assistant's offer (docs/ai.md "Booking"): up to `n` free slots, one a start, of the first
// of `services` (active) that has any with start in [from, to).
void offer_slots(runtime& rt, std::int64_t tenant, std::vector<std::int64_t> services,
                 std::int64_t from, std::int64_t to, std::size_t n,
                 callback<std::vector<domain::ai::offered_slot>> reply);

// The contact's next live appointment (booked or confirmed, starting after now), as the
// assistant shows it (its calendar's local time), if any.
void next_appointment(runtime& rt, std::int64_t tenant, std::int64_t contact,
                      callback<std::optional<domain::ai::patient_appointment>> reply);

void list_appointments(runtime& rt, std::int64_t tenant, domain::appointment_query q, int page,
                       int per_page, callback<std::string> reply);
void get_appointment(runtime& rt, std::int64_t tenant, std::int64_t id,
                     callback<std::string> reply);
// With the names of its service and calendar (FHIR); 404 or 403 as get_appointment.
void view_appointment(runtime& rt, std::int64_t tenant, std::int64_t id,
                      callback<domain::appointment_view> reply);
// Every match, by start.
void view_appointments(runtime& rt, std::int64_t tenant, domain::appointment_query q,
                       callback<std::vector<domain::appointment_view>> reply);
void book_appointment(runtime& rt, std::int64_t tenant, domain::booking b,
                      callback<std::string> reply);
void reschedule_appointment(runtime& rt, std::int64_t tenant, std::int64_t id, std::int64_t start,
                            std::optional<std::int64_t> calendar, callback<std::string> reply);
// `by`: who cancelled (staff through the API, ai through the assistant).
void cancel_appointment(runtime& rt, std::int64_t tenant, std::int64_t id,
                        std::optional<std::string> reason, callback<std::string> reply,
                        domain::appointment_source by = domain::appointment_source::staff);
void change_appointment(runtime& rt, std::int64_t tenant, std::int64_t id,
                        std::optional<domain::appointment_status> status,
                        std::optional<std::string> notes, callback<std::string> reply);

// The contact was deleted or erased, and its appointments with it (told by the contacts actor).
void forget_contact_appointments(runtime& rt, std::int64_t tenant, std::int64_t contact);
// A contact merged into another (contract §11): its appointments are the survivor's now.
void move_contact_appointments(runtime& rt, std::int64_t tenant, std::int64_t from,
                               std::int64_t into);

// A new feed token for the calendar (the old one stops working): {"feed_token"}, shown once.
void rotate_feed_token(runtime& rt, std::int64_t tenant, std::int64_t calendar,
                       callback<std::string> reply);
// The calendar's iCalendar feed when `token` is its feed token (else 401, whatever the
// calendar), with the patients it names.
void calendar_feed(runtime& rt, std::int64_t tenant, std::int64_t calendar, std::string token,
                   callback<domain::calendar_feed_text> reply);
// A patient's answer to a reminder ("1", "2", ...) on the conversation it went out on (from
// the channels actor, once the message and its reminder_answers row are stored): the next live
// appointment is confirmed or cancelled, and the patient is told.
void answer_reminder(runtime& rt, std::int64_t tenant, domain::patient_answer answer);
// What the HTTP layer's gate (http/secret_gate.hpp) needs to admit a feed.ics request before
// any tenant wakes: the calendar's tenant and feed token hash, as stored, and whether a token
// is the one that hash was made of.
std::optional<persistence::secret_owner> feed_owner(persistence::pg_conn& c, std::int64_t calendar);
bool feed_token_accepted(runtime& rt, const persistence::secret_owner& owner,
                         std::string_view token);
// Wakes the schedule actor (the sweeper: a reminder is due in a passivated tenant, or an answer
// waits to be settled): it settles the answers left in reminder_answers.
void wake_schedule(runtime& rt, std::int64_t tenant);

} // namespace crm::actors
