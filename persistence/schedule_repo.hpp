// Calendars, closures, services and appointments (migration 021, domain/schedule.hpp): the
// schedule actor's load and its writes, each in one transaction with the tenant's fence (and,
// for appointments, their audit rows). The database has the last word on a double booking: a
// write that the exclusion constraint refuses is a 409, and nothing of it is stored.
#pragma once
#include "domain/audit.hpp"
#include "domain/schedule.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::persistence {

class pg_conn;

domain::schedule_store load_schedule(pg_conn& c, std::int64_t tenant_id);
// The tenant holding record `id` of the kind `what` names (the detail of the store's
// not_found: "calendar not found", "closure not found", "service not found", ...).
std::optional<std::int64_t> owner_of_schedule_row(pg_conn& c, std::int64_t id,
                                                  std::string_view what);

// A user_id that is not a user of the tenant: 422 at body.user_id.
domain::outcome<domain::calendar> insert_calendar(pg_conn& c, const domain::calendar& cal);
domain::outcome<domain::calendar> update_calendar(pg_conn& c, const domain::calendar& cal);
// Also takes it out of every service that named it.
domain::outcome<domain::calendar> delete_calendar(pg_conn& c, const domain::calendar& cal);
domain::outcome<domain::closure> insert_closure(pg_conn& c, const domain::closure& cl);
domain::outcome<domain::closure> delete_closure(pg_conn& c, const domain::closure& cl);
// A reminder's channel that is not the tenant's: 422 at body.reminders.<i>.channel_id.
domain::outcome<domain::service> insert_service(pg_conn& c, const domain::service& s);
domain::outcome<domain::service> update_service(pg_conn& c, const domain::service& s);
domain::outcome<domain::service> delete_service(pg_conn& c, const domain::service& s);

// What a change of an appointment emits: an appointment.* event (none: `name` null) whose
// payload (domain::appointment_event) is written to the outbox in the change's transaction.
struct appointment_event {
  const char* name = nullptr;
  std::string extra;
};

// A contact that is not the tenant's (or was deleted meanwhile): 422 at body.contact_id.
domain::outcome<domain::appointment>
insert_appointment(pg_conn& c, const domain::appointment& a,
                   const std::vector<domain::audit_record>& audit, const appointment_event& e);
// Bookings staged together, in one transaction: each row's outcome (a slot taken meanwhile by
// another writer is a 409 of that row alone, a contact gone a 422 at body.contact_id).
struct appointment_insert {
  domain::appointment a;
  std::vector<domain::audit_record> audit;
  appointment_event event;
};
std::vector<domain::outcome<domain::appointment>>
insert_appointments(pg_conn& c, const std::vector<appointment_insert>& rows);
// `settles` (a patient's answer, reminder_answers) is removed in the same transaction: an answer
// already settled refuses the change (409 answer_settled_already) and nothing is written.
domain::outcome<domain::appointment>
update_appointment(pg_conn& c, const domain::appointment& a,
                   const std::vector<domain::audit_record>& audit, const appointment_event& e,
                   std::int64_t settles = 0);
inline constexpr const char* answer_settled_already = "the answer was settled already";

// Patients' answers to reminders stored and not yet settled (reminder_answers), oldest first.
std::vector<domain::patient_answer> pending_reminder_answers(pg_conn& c, std::int64_t tenant_id);
// Settles an answer that changes nothing: true when this call removed it (false: settled
// already, say nothing more).
bool settle_reminder_answer(pg_conn& c, std::int64_t tenant_id, std::int64_t message_id);
// Tenants with an answer stored longer than `grace_seconds` ago and not yet settled (the
// sweeper wakes their schedule actor, live or not).
std::vector<std::int64_t> tenants_with_pending_answers(pg_conn& c, double grace_seconds);

// A reminder that will not be sent (no consent, no conversation, an inactive channel): recorded
// as skipped, once (a row already there, or the appointment gone, leaves things as they are).
domain::outcome<domain::reminder_key> skip_reminder(pg_conn& c, std::int64_t tenant_id,
                                                    const domain::reminder_key& key,
                                                    const std::string& reason);
// Tenants with a reminder due and not yet sent or skipped (the sweeper wakes their schedule
// actor; a live actor finds them itself).
std::vector<std::int64_t> tenants_with_due_reminders(pg_conn& c);

// `carecrm tenant create --demo`: a patient (Maria Silva), a practitioner's calendar in São
// Paulo (Monday to Friday, 08:00-12:00 and 13:00-18:00), a 30-minute check-up it performs
// (BRL 250.00) and the patient booked at 09:00 on the next weekday. Ids of what it made.
struct demo_schedule {
  std::int64_t contact_id = 0, calendar_id = 0, service_id = 0, appointment_id = 0;
};
demo_schedule seed_demo_schedule(pg_conn& c, std::int64_t tenant_id);

} // namespace crm::persistence
