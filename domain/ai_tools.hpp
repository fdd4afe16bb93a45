// Booking through a model's tool calls (docs/ai.md "Tool calls"): the functions an
// openai_compatible agent with services is offered (find_slots, book_appointment,
// reschedule_appointment, cancel_appointment), the reading of its calls, the rules each call
// must pass before anything runs, and the results the model is told. Pure: the agents actor
// runs an admitted call through the schedule actor, whose rules are the API's.
#pragma once
#include "domain/ai_booking.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace crm::domain::ai {

enum class tool : std::uint8_t {
  find_slots,
  book_appointment,
  reschedule_appointment,
  cancel_appointment
};
const char* tool_name(tool t);

// The request's "tools" array (JSON Schema parameters), and the system prompt's lines that
// say how they are used.
const std::string& booking_tool_definitions();
const std::string& booking_tool_rules();

struct tool_args {
  tool which = tool::find_slots;
  bool reschedule = false;                    // find_slots: times to move the next appointment to
  std::optional<std::int64_t> service_id;     // find_slots
  std::size_t option = 0;                     // book, reschedule: 1-based, of the offer
  std::optional<std::int64_t> appointment_id; // cancel: must be the patient's next one
};

// A call read: one of the tools, its arguments a JSON object holding only what that tool takes,
// of the right types. Otherwise the error told to the model (nothing runs).
std::variant<tool_args, std::string> read_tool_call(std::string_view name,
                                                    std::string_view arguments);

// What the rules know of the turn: the patient's message being answered, the agent's
// services, and the offer kept for the conversation before this message arrived (an offer the
// model made in this turn does not count: the patient has not seen it).
struct tool_turn {
  std::string_view message;
  const std::vector<std::int64_t>* services = nullptr;
  std::optional<offer_kind> earlier_kind;
  const std::vector<offered_slot>* earlier_slots = nullptr;
};

// Why a call may not run (told to the model as its result), or nothing when it may:
// - find_slots: a service_id that is not one of the agent's;
// - book_appointment, reschedule_appointment: no offer of times to book (to move to) made
//   before this message, an option it did not hold, or a message of the patient's that does
//   not name that option itself (named_option): nothing is booked or moved on the model's or a
//   document's word;
// - cancel_appointment: with no cancellation asked about before this message, a message that
//   does not ask to cancel (then the call only names the appointment and asks: cancel_step);
//   with one, a message that does not confirm it (confirms_cancel).
// The identity of the patient is never an argument: each call acts for the conversation's
// contact, and an appointment_id must be that contact's next appointment.
std::optional<std::string> tool_refusal(const tool_args& a, const tool_turn& t);

// What an admitted cancel_appointment does: name the appointment and ask the patient (no
// cancellation was asked about before this message), or cancel it (the patient confirms).
enum class cancel_step : std::uint8_t { ask, cancel };
cancel_step cancel_step_of(const tool_turn& t);

// At most this many calls in one answer of the model; more is a provider's fault: a hand-off.
inline constexpr std::size_t tool_calls_max = 8;

// Results, as JSON texts.
std::string tool_error(std::string_view why);
std::string slots_result(const std::vector<offered_slot>& slots,
                         const std::optional<offered_slot>& current, language l);
// `what`: "booked", "moved", "cancelled".
std::string ask_result(const offered_slot& s, language l); // a cancellation to confirm
std::string done_result(std::string_view what, const offered_slot& s, language l);

} // namespace crm::domain::ai
