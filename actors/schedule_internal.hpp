// The schedule actor's parts that its files share (actors/schedule_actor.cpp: the store's
// owner, its messages and its bookings; actors/schedule_reminders.cpp: the reminders and the
// patients' answers to them). Internal to actors/ (CAF).
#pragma once
#include "actors/record_actor.hpp"
#include "domain/schedule.hpp"
#include "persistence/schedule_repo.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace crm::actors::schedule_detail {

using domain::appointment;

using remind_atom = caf::atom_constant<caf::atom("remind")>;
using answer_atom = caf::atom_constant<caf::atom("apt_answer")>;

// A booking planned and holding its slot, waiting for the transaction it shares with the
// bookings staged beside it.
struct staged_booking {
  appointment planned; // id < 0: its hold in the store
  callback<std::string> reply;
  std::vector<domain::audit_record> audit;
};
// Batches of bookings committing at once: the next batch's INSERT runs while the previous one
// waits for its COMMIT's fsync and its answers. No two overlap (each was planned against the
// holds of the others), so neither waits on the other in Postgres.
constexpr int max_batches_in_flight = 2;
struct booking_batch {
  std::vector<staged_booking> staged;
  int in_flight = 0;
  std::int64_t last_hold = 0; // negative ids of the holds
};

struct schedule_aggregate {
  static constexpr child_kind kind = child_kind::schedule;
  using store = domain::schedule_store;
  using extra = booking_batch;
  static store load(persistence::pg_conn& c, std::int64_t tenant) {
    return persistence::load_schedule(c, tenant);
  }
  static std::optional<std::int64_t> owner_of(persistence::pg_conn& c, std::int64_t id,
                                              std::string_view what) {
    return persistence::owner_of_schedule_row(c, id, what);
  }
};

using schedule_actor = record_actor<schedule_aggregate>;
using store = schedule_aggregate::store;

// The audit row of a change of an appointment: a touch of its patient's record.
inline std::vector<domain::audit_record> audit(const domain::audit_context* who,
                                               std::int64_t tenant, const appointment& a,
                                               const char* action, std::vector<std::string> fields,
                                               int status) {
  auto row = domain::make_audit(who, tenant, "contact", a.contact_id, action);
  row.fields = std::move(fields);
  row.status = status;
  return {std::move(row)};
}

// A planned change of an appointment and the event it emits; what its commit gives.
struct staged {
  appointment next;
  persistence::appointment_event event;
};
struct committed {
  appointment saved;
  bool emitted = false;
};

// The change and its event, unless nobody listens to appointment events (then none is written).
template <class Planned>
domain::outcome<staged> with_event(const store& s, Planned a, const char* event,
                                   std::string extra = {}) {
  if (!a) return a.error();
  return staged{std::move(*a), {s.event_listeners ? event : nullptr, std::move(extra)}};
}

// Writes the planned appointment with its audit row and its event, in one transaction.
// `settles`: the patient's answer (reminder_answers) the change settles.
inline auto save_appointment(callback<std::string> reply, const char* action,
                             std::vector<std::string> fields, int status,
                             std::int64_t settles = 0) {
  return [reply, action, fields = std::move(fields), status,
          settles](persistence::pg_conn& c, const staged& s) -> domain::outcome<committed> {
    auto rows = audit(reply.who(), s.next.tenant_id, s.next, action, fields, status);
    auto r = s.next.id == 0 ? persistence::insert_appointment(c, s.next, rows, s.event)
                            : persistence::update_appointment(c, s.next, rows, s.event, settles);
    if (!r) return r.error();
    return committed{std::move(*r), s.event.name != nullptr};
  };
}

// After COMMIT: memory, the workflows actor told of the event, then the answer.
std::string applied(schedule_actor* self, committed c);

// Reminders (docs/appointments.md "Reminders"): those come due sent (or skipped, with why).
void send_due_reminders(schedule_actor* self);
// A patient's answer to a reminder, in the actor's write turn (`attempt`: its retries while
// Postgres or the load is unavailable).
void answer_reminder_in_turn(schedule_actor* self, domain::patient_answer m, int attempt = 1);
// The answers stored and not settled, each answered now.
void answer_left_answers(schedule_actor* self);

} // namespace crm::actors::schedule_detail

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::domain::patient_answer> : std::true_type {};
} // namespace caf
