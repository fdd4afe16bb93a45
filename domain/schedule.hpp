// Calendars, services and appointments (contract §10, docs/appointments.md): who can be booked,
// for what, and when. The schedule actor's store: every rule of a booking (working hours in the
// calendar's own time zone, the slot grid, closures, buffers, no overlap) is here, pure and
// unit-tested; time zones come from the system's tz database through Howard Hinnant's date/tz
// (Debian's libhowardhinnant-date-dev), never from a table of offsets.
#pragma once
#include "domain/failure.hpp"
#include "domain/page.hpp"
#include "domain/week.hpp"

#include <boost/json/fwd.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

enum class calendar_kind : std::uint8_t { practitioner, room, equipment };
enum class appointment_status : std::uint8_t {
  booked,
  confirmed,
  arrived,
  completed,
  cancelled,
  no_show
};
enum class appointment_source : std::uint8_t { staff, patient_reply, ai, api };

inline constexpr std::array<std::string_view, 3> calendar_kinds{"practitioner", "room",
                                                                "equipment"};
inline constexpr std::array<std::string_view, 6> appointment_statuses{
    "booked", "confirmed", "arrived", "completed", "cancelled", "no_show"};
inline constexpr std::array<std::string_view, 4> appointment_sources{"staff", "patient_reply", "ai",
                                                                     "api"};

std::string_view to_string(calendar_kind k);
std::string_view to_string(appointment_status s);
std::string_view to_string(appointment_source s);
std::optional<calendar_kind> parse_calendar_kind(std::string_view s);
std::optional<appointment_status> parse_appointment_status(std::string_view s);
std::optional<appointment_source> parse_appointment_source(std::string_view s);

// Booked, confirmed or arrived: it can still be moved along, cancelled or (not arrived)
// rescheduled.
bool is_live(appointment_status s);
// Live or completed: it holds its slot (cancelled and no-show appointments free theirs).
bool holds_slot(appointment_status s);
// The event a change to status `to` emits: appointment.confirmed, .completed, .no_show,
// .cancelled; none for arriving or for a change of notes alone.
const char* status_event(std::optional<appointment_status> to);

// The bounds of every field, named once for the readers and the OpenAPI schema.
namespace schedule_rules {
inline constexpr std::size_t name_max = 200;
inline constexpr int step_min = 5, step_max = 240, step_default = 15;
inline constexpr int duration_min = 5, duration_max = 720;
inline constexpr int buffer_min = 0, buffer_max = 240;
inline constexpr int range_max_days = 31;
inline constexpr std::size_t spans_per_day_max = domain::spans_per_day_max;
inline constexpr std::size_t calendars_per_service_max = 100;
inline constexpr std::size_t reminders_max = 5;
inline constexpr int before_min = 5, before_max = 60 * 24 * 30; // minutes before the start
inline constexpr std::size_t reminder_text_max = 1000;
inline constexpr std::size_t notes_max = 2000;
inline constexpr std::size_t reason_max = 500;
inline constexpr std::size_t time_zone_max = time_zone_name_max;
} // namespace schedule_rules

struct calendar {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  calendar_kind kind = calendar_kind::practitioner;
  std::optional<std::int64_t> user_id;
  std::string time_zone = "UTC";
  working_week hours;
  int slot_step = schedule_rules::step_default; // minutes
  bool is_active = true;
  // The calendar feed (feed.ics): patients' names shown in it, and the keyed hash of its
  // token (never shown; empty: no feed until a token is made).
  bool feed_shows_names = false;
  std::string feed_token_hash;
  std::int64_t created_at = 0; // µs
  std::int64_t updated_at = 0;
};

// A time a calendar cannot be booked (holidays, leave): [start, end), µs.
struct closure {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::int64_t calendar_id = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::string reason;
  std::int64_t created_at = 0;
};

// A message sent to the patient `before_minutes` before the start, through a channel.
struct reminder_rule {
  int before_minutes = 0;
  std::int64_t channel_id = 0;
  std::string text;
  // A WhatsApp channel's approved template (domain::whatsapp::template_to_json), its parameters
  // with the text's placeholders: sent instead of the text, which outside the 24-hour window
  // WhatsApp refuses (docs/appointments.md "Reminders"). Empty: the text is sent.
  std::string template_json;
  bool operator==(const reminder_rule&) const = default;
};

struct service {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  int duration = 30; // minutes
  int buffer = 0;    // minutes kept free after each appointment
  std::vector<std::int64_t> calendar_ids;
  std::optional<std::int64_t> price_cents;
  std::optional<std::string> currency;
  std::vector<reminder_rule> reminders;
  bool is_active = true;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

struct appointment {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::int64_t contact_id = 0;
  std::int64_t service_id = 0;
  std::int64_t calendar_id = 0;
  std::int64_t start = 0;         // µs
  std::int64_t end = 0;           // start + the service's duration
  std::int64_t blocked_until = 0; // end + the service's buffer: the slot it holds
  appointment_status status = appointment_status::booked;
  std::string notes;
  appointment_source source = appointment_source::staff;
  std::optional<std::string> cancel_reason;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

boost::json::object calendar_to_json(const calendar& c);
boost::json::object closure_to_json(const closure& c);
boost::json::object service_to_json(const service& s);
boost::json::object appointment_to_json(const appointment& a);
boost::json::array reminders_to_json(const std::vector<reminder_rule>& rs);
// The outbox payload of an appointment.* event (docs/appointments.md "Events"):
// {"appointment_id", "appointment": {...}, "contact_id", <extra members>, "tenant_id"}; `extra`
// is empty or starts with a comma.
std::string appointment_event(const appointment& a, std::string_view extra = {});
// The stored reminders text (reminders_to_json serialised); none when unreadable.
std::vector<reminder_rule> parse_reminders_text(std::string_view text);

struct slot {
  std::int64_t calendar_id = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  bool operator==(const slot&) const = default;
};

// A change of a calendar or a service: what is set is changed.
struct calendar_patch {
  std::optional<std::string> name;
  std::optional<calendar_kind> kind;
  std::optional<std::optional<std::int64_t>> user_id;
  std::optional<std::string> time_zone;
  std::optional<working_week> hours;
  std::optional<int> slot_step;
  std::optional<bool> is_active;
  std::optional<bool> feed_shows_names;
};

struct service_patch {
  std::optional<std::string> name;
  std::optional<int> duration;
  std::optional<int> buffer;
  std::optional<std::vector<std::int64_t>> calendar_ids;
  std::optional<std::optional<std::int64_t>> price_cents;
  std::optional<std::optional<std::string>> currency;
  std::optional<std::vector<reminder_rule>> reminders;
  std::optional<bool> is_active;
};

struct booking {
  std::int64_t contact_id = 0;
  std::int64_t service_id = 0;
  std::int64_t calendar_id = 0;
  std::int64_t start = 0;
  std::string notes;
  appointment_source source = appointment_source::staff;
};

struct appointment_query {
  std::optional<std::int64_t> calendar_id;
  std::optional<std::int64_t> contact_id;
  std::optional<appointment_status> status;
  std::optional<std::int64_t> from; // start ≥ from
  std::optional<std::int64_t> to;   // start < to
};

// An appointment with the names of its service and calendar (FHIR, the calendar feed).
struct appointment_view {
  appointment a;
  std::string service_name;
  std::string calendar_name;
};

// ---- Reminders (docs/appointments.md "Reminders") ------------------------------------------
// One reminder of one appointment at one start: sent (or skipped) once, recorded in Postgres
// under this key (a reschedule gives the appointment new keys). A reminder is known by its
// before_minutes, not its place in the service's list, so an edit of the list sends none twice.
struct reminder_key {
  std::int64_t appointment_id = 0;
  int before_minutes = 0;
  std::int64_t start = 0;
  auto operator<=>(const reminder_key&) const = default;
};
// A reminder whose time has come: start - before_minutes ≤ now < start, for a booked or
// confirmed appointment (one booked after that time too: it goes out at once). Of the
// reminders of one appointment whose time has come, only the nearest its start is sent; the
// others are `superseded` (recorded as skipped), sent or not.
struct due_reminder {
  reminder_key key;
  bool superseded = false;
  std::int64_t contact_id = 0;
  reminder_rule rule;
  std::string service_name;
  std::string calendar_name;
  std::string start_local; // in the calendar's zone: "2026-12-01 09:00"
};
// What the template of a reminder may name.
struct reminder_values {
  std::string start_local;
  std::string first_name;
  std::string service_name;
  std::string calendar_name;
};
// Replaces {{appointment.start_local}}, {{contact.first_name}}, {{service.name}} and
// {{calendar.name}} (spaces inside the braces allowed); any other {{...}} becomes empty.
std::string render_reminder(std::string_view text, const reminder_values& v);

// A patient's answer to a reminder: "1", "yes", "sim", "sí", "si", "confirm", "confirmo" confirm;
// "2", "no", "não", "nao", "cancel", "cancelar" cancel (case, spaces and a final . or ! aside).
// Anything else is an ordinary message.
enum class reminder_answer : std::uint8_t { none, confirm, cancel };
reminder_answer read_reminder_answer(std::string_view text);
// The acknowledgement the patient gets, in the language of the answer (Portuguese for "sim",
// "não", "cancelar"; Spanish for "sí"; English otherwise). `start_local` empty: there was no
// appointment to answer for.
std::string reminder_acknowledgement(std::string_view answer_text, reminder_answer a,
                                     std::string_view start_local, bool changed);
// An answer as stored with its message (reminder_answers) until it is settled: the appointment
// it is about is the contact's next live one at `received_at`.
struct patient_answer {
  std::int64_t message_id = 0;
  std::int64_t contact_id = 0;
  std::int64_t conversation_id = 0;
  std::int64_t channel_id = 0;
  std::string text;
  std::int64_t received_at = 0;
};

// What a patient's answer to a reminder does, decided from the store in the answer's turn.
struct answer_plan {
  enum class step : std::uint8_t {
    settle, // nothing changes: the answer is settled, then `ack` is said (nothing when empty)
    stop,   // a STOP with nothing left to cancel: the channel's consents withdrawn, then settled
    change, // `change` saved with the answer settled in its transaction, then `ack` is said
  };
  step what = step::settle;
  std::string ack;
  appointment change;           // step::change: the appointment as it becomes
  const char* event = nullptr;  // step::change: the event it emits
  const char* action = nullptr; // step::change: its audit action
};

// The answer to a feed request without the right token (401, whatever the calendar).
failure feed_refused();

// An instant in a zone's local time, "YYYY-MM-DD HH:MM" (UTC when the zone is unknown).
std::string local_time_text(std::int64_t us, std::string_view zone);

struct schedule_store {
  std::map<std::int64_t, calendar> calendars;
  std::map<std::int64_t, service> services;
  std::map<std::int64_t, closure> closures;
  std::map<std::int64_t, appointment> appointments;
  // calendar → start → id of the appointments that hold a slot (they never overlap: the
  // database's exclusion constraint says so too).
  std::map<std::int64_t, std::map<std::int64_t, std::int64_t>> held;
  std::map<std::int64_t, std::set<std::pair<std::int64_t, std::int64_t>>>
      by_calendar;                                                                    // (start, id)
  std::map<std::int64_t, std::set<std::pair<std::int64_t, std::int64_t>>> by_contact; // (start, id)
  std::set<std::pair<std::int64_t, std::int64_t>> by_start;                           // (start, id)
  std::map<std::int64_t, std::set<std::int64_t>> closures_of; // calendar → closure ids
  // Bookings planned and staged while their transaction runs (negative ids): they hold their
  // slot (in `held`) for every later plan, and no read sees them.
  std::map<std::int64_t, appointment> pending;
  std::set<reminder_key> reminders_done; // sent or skipped (appointment_reminders)
  std::set<reminder_key> reminders_out;  // being sent now
  std::int64_t reminders_pruned_at = 0;  // forget_past_reminders' last sweep
  // Whether anyone listens to appointment.* events (an active record-event workflow or webhook
  // subscription): when nobody does, a change writes no event at all.
  bool event_listeners = true;

  outcome<calendar> get_calendar(std::int64_t id) const;
  outcome<service> get_service(std::int64_t id) const;
  outcome<appointment> get_appointment(std::int64_t id) const;
  page<calendar> list_calendars(int number, int per_page) const;
  page<service> list_services(int number, int per_page) const;
  outcome<page<closure>> list_closures(std::int64_t calendar, int number, int per_page) const;
  // Ordered by start, then id.
  page<appointment> list_appointments(const appointment_query& q, int number, int per_page) const;
  // Every match of `q`, by start, with its names.
  std::vector<appointment_view> views(const appointment_query& q) const;
  outcome<appointment_view> view(std::int64_t id) const;

  // Free slots of `service` with start in [from, to) and not before `now`, ordered by start then
  // calendar (contract §10). The service must be the tenant's (not_found), and so must
  // `calendar` when given.
  outcome<std::vector<slot>> availability(std::int64_t service, std::int64_t from, std::int64_t to,
                                          std::optional<std::int64_t> calendar,
                                          std::int64_t now) const;

  // What a change would store, or why it may not (pure: nothing changes here). A calendar or
  // service a body names that the tenant does not hold is a validation error at that field.
  calendar plan_create_calendar(calendar c, std::int64_t tenant, std::int64_t now) const;
  outcome<calendar> plan_update_calendar(std::int64_t id, const calendar_patch& p,
                                         std::int64_t now) const;
  // 409 while appointments name it (deactivate it instead).
  outcome<calendar> plan_delete_calendar(std::int64_t id) const;
  outcome<closure> plan_add_closure(closure c, std::int64_t tenant, std::int64_t now) const;
  outcome<closure> plan_remove_closure(std::int64_t calendar, std::int64_t id) const;
  outcome<service> plan_create_service(service s, std::int64_t tenant, std::int64_t now) const;
  outcome<service> plan_update_service(std::int64_t id, const service_patch& p,
                                       std::int64_t now) const;
  outcome<service> plan_delete_service(std::int64_t id) const;
  // The appointment a booking makes: 409 naming why the start is not a free slot, 422 for a
  // start off the calendar's grid or a calendar or service the tenant does not hold.
  outcome<appointment> plan_book(const booking& b, std::int64_t tenant, std::int64_t now) const;
  // A new start (and calendar) for a booked or confirmed appointment: the same rules, its own
  // slot counted free. It is booked again (a confirmation was for the old time).
  outcome<appointment> plan_reschedule(std::int64_t id, std::int64_t start,
                                       std::optional<std::int64_t> calendar,
                                       std::int64_t now) const;
  outcome<appointment> plan_cancel(std::int64_t id, std::optional<std::string> reason,
                                   appointment_source by, std::int64_t now) const;
  // Along booked → confirmed → arrived → completed; booked|confirmed → no_show once started;
  // live → cancelled. `notes` replaces the notes when set.
  outcome<appointment> plan_status(std::int64_t id, std::optional<appointment_status> to,
                                   std::optional<std::string> notes, std::int64_t now) const;

  // Reminders due at `now`, neither done nor being sent, by due time.
  std::vector<due_reminder> due_reminders(std::int64_t now) const;
  // Forgets the done reminders of starts already past (they can never be due again); at most
  // once a minute.
  void forget_past_reminders(std::int64_t now);
  // The contact's next booked or confirmed appointment starting after `now`.
  std::optional<appointment> next_live(std::int64_t contact, std::int64_t now) const;
  // A patient's answer (docs/appointments.md "Answers"): it is about the contact's next live
  // appointment at `received_at` (`now`, the turn's time, when unknown); a confirmation
  // confirms it (already confirmed: only acknowledged), a cancellation cancels it (nothing to
  // cancel and a STOP word: the STOP it is everywhere else), either with source patient_reply;
  // anything else is an ordinary message, settled with nothing said.
  outcome<answer_plan> plan_answer(const patient_answer& answer, std::int64_t now) const;
  // A calendar with a feed (its token's hash set); else the 401 of feed_refused().
  outcome<calendar> feed_calendar(std::int64_t id) const;
  outcome<calendar> plan_feed_token(std::int64_t id, std::string token_hash,
                                    std::int64_t now) const;

  // Committed changes, applied to memory.
  void put(const calendar& c);
  void erase_calendar(std::int64_t id);
  void put(const closure& c);
  void erase_closure(std::int64_t id);
  void put(const service& s);
  void erase_service(std::int64_t id);
  void put(const appointment& a);
  // A contact deleted or erased: its appointments went with it (ON DELETE CASCADE).
  void forget_contact(std::int64_t contact);
  // A contact merged into another: its appointments are the survivor's now.
  void move_contact(std::int64_t from, std::int64_t into);
  // A planned booking (id < 0) holds its slot until its transaction ends; then it is released
  // (and, committed, put under its own id).
  void hold(const appointment& a);
  void release(std::int64_t pending_id);

private:
  void unindex(const appointment& a);
  // Why `start` on calendar `c` is not a free slot for `s` (nullopt: it is), ignoring
  // appointment `ignore`; an off-grid start is a validation failure, the rest conflicts.
  std::optional<failure> refuse(const calendar& c, const service& s, std::int64_t start,
                                std::int64_t ignore, std::int64_t now, const char* field) const;
  bool overlaps_held(std::int64_t calendar, std::int64_t from, std::int64_t until,
                     std::int64_t ignore) const;
  bool closed(std::int64_t calendar, std::int64_t from, std::int64_t until) const;
};

} // namespace crm::domain
