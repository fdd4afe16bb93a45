// Booking through the assistant (docs/ai.md "Booking"): the slots an agent offers a patient,
// the patient's choice among them, what a patient's message asks of their appointments, and what
// the agent says, in English, Portuguese or Spanish. Pure: the agents actor asks the schedule
// actor for the slots and books, moves or cancels what the patient chose.
#pragma once
#include "domain/assistant.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain::ai {

// A free slot as offered: its service and calendar, its start (µs, UTC), and what the patient
// reads (the service's name, the start in the calendar's time zone).
struct offered_slot {
  std::int64_t service_id = 0;
  std::int64_t calendar_id = 0;
  std::int64_t start = 0;
  std::string service_name;
  std::string local_start; // "YYYY-MM-DD HH:MM" in the calendar's zone
  bool operator==(const offered_slot&) const = default;
};

constexpr std::size_t offered_slots_max = 3;

// The patient's next live appointment (booked or confirmed, not started), as the agent shows
// it: its id, and its service, calendar and start as a slot.
struct patient_appointment {
  std::int64_t id = 0;
  offered_slot slot;
};

// What an offer kept for a conversation is for: times to book, times to move the patient's
// next appointment to, or that appointment alone, to cancel (its one "slot").
enum class offer_kind : std::uint8_t { book, move, cancel };
const char* offer_kind_name(offer_kind k);                   // "book" "move" "cancel"
std::optional<offer_kind> offer_kind_from(std::string_view); // exact names only

std::string slots_to_json(const std::vector<offered_slot>& slots);
std::vector<offered_slot> slots_from_json(std::string_view json); // what it cannot read: none

// What a patient's message asks of their appointments, by its words in the three languages:
// - move: a verb that moves by itself ("reschedule", "remarcar", "reagendar", "reprogramar",
//   "postpone", "adiar", "aplazar"), or one that changes with a booking noun ("change my
//   appointment", "mudar a consulta", "cambiar mi cita");
// - cancel: a cancelling word ("cancel", "cancelar", "desmarcar", "anular") and no moving one;
// - book: a booking verb ("book", "marcar", "agendar", "reservar"), or a booking noun
//   ("appointment", "consulta", "cita", "turno") with a word of wanting ("need", "quero",
//   "quiero"). "How much is a consultation?" asks for none of them.
enum class booking_request : std::uint8_t { none, book, move, cancel };
booking_request booking_request_of(std::string_view message);
inline bool asks_to_book(std::string_view message) {
  return booking_request_of(message) == booking_request::book;
}

// The patient's pick among `n` offered slots: the message is the number alone, maybe with a
// word that frames it ("2", "2.", "option 2", "opção 2", "la 2", "número 3 por favor"), 1-based.
// Anything else (a sentence, a number out of range, two numbers) is no choice: the message is
// answered as any other, and nothing is booked.
std::optional<std::size_t> parse_choice(std::string_view message, std::size_t n);

// The one offered slot the patient's own message names, for a model's tool call (docs/ai.md
// "Tool calls"): by its number as a word ("2", "the 2nd", "opção 2"), an ordinal ("the
// second", "a segunda", "la tercera") or its local time ("09:15", "9:15", "9h15", "14h").
// Nothing when the message names none or more than one of them: the model may not book on
// its own reading of the patient.
std::optional<std::size_t> named_option(std::string_view message,
                                        const std::vector<offered_slot>& slots);

// The patient confirms a cancellation the agent asked about: "1", "yes", "sim", "sí",
// "confirm", or a cancelling word again, and no negation ("no", "don't", "não", "keep").
bool confirms_cancel(std::string_view message);

// What the agent says.
std::string offer_text(const std::vector<offered_slot>& slots, language l);
std::string booked_text(const offered_slot& s, language l);
// The patient's next appointment and the times it can move to.
std::string move_offer_text(const offered_slot& current, const std::vector<offered_slot>& slots,
                            language l);
std::string moved_text(const offered_slot& s, language l);
// The patient's next appointment, and "Reply 1 to cancel it".
std::string cancel_offer_text(const offered_slot& current, language l);
std::string cancelled_text(const offered_slot& s, language l);
// Nothing to move or cancel: a person from the team will help.
std::string no_appointment_text(language l);
std::string no_slots_text(language l);
std::string slot_taken_text(language l); // before a new offer

// "Mon 2026-12-07 09:00" (weekday in the language) from "2026-12-07 09:00".
std::string slot_label(std::string_view local_start, language l);

} // namespace crm::domain::ai
