// Booking through the builtin assistant (docs/ai.md "Booking"): the slots an agent offers a
// patient, the patient's choice among them, and what the agent says, in English, Portuguese or
// Spanish. Pure: the agents actor asks the schedule actor for the slots and books the choice.
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

std::string slots_to_json(const std::vector<offered_slot>& slots);
std::vector<offered_slot> slots_from_json(std::string_view json); // what it cannot read: none

// The patient asks to book: a booking verb of the three languages ("book", "marcar", "agendar",
// "reservar") in the message, or a booking noun ("appointment", "consulta", "cita", "turno")
// with a word of wanting ("need", "quero", "quiero"). "How much is a consultation?" is no
// request to book, nor is a message that cancels or moves ("cancel", "remarcar", "cambiar"):
// the assistant does not move or cancel appointments yet, a person does.
bool asks_to_book(std::string_view message);

// The patient's pick among `n` offered slots: the message is the number alone, maybe with a
// word that frames it ("2", "2.", "option 2", "opção 2", "la 2", "número 3 por favor"), 1-based.
// Anything else (a sentence, a number out of range, two numbers) is no choice: the message is
// answered as any other, and nothing is booked.
std::optional<std::size_t> parse_choice(std::string_view message, std::size_t n);

// What the agent says.
std::string offer_text(const std::vector<offered_slot>& slots, language l);
std::string booked_text(const offered_slot& s, language l);
std::string no_slots_text(language l);
std::string slot_taken_text(language l); // before a new offer

// "Mon 2026-12-07 09:00" (weekday in the language) from "2026-12-07 09:00".
std::string slot_label(std::string_view local_start, language l);

} // namespace crm::domain::ai
