// The contact's timeline (contract §11, docs/patient-record.md "Timeline"): one feed of the
// record's notes, tasks, messages, appointments, deals and their stage moves, consents and
// merges, newest first. Items are ordered by (at descending, type, id descending), a total order
// over rows that never change their time, so a cursor (the last item's position) pages stably
// while new items arrive: they sort before it. The cursor names its contact, so one contact's
// cursor is refused for another's timeline.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace crm::domain {

// The item types, in their tie order (alphabetical: the query sorts by the type's text).
inline constexpr std::array<std::string_view, 8> timeline_types{
    "appointment", "consent", "deal", "deal_move", "merge", "message", "note", "task"};

inline constexpr int timeline_limit_default = 20;
inline constexpr int timeline_limit_max = 100;
// How many characters of a note's or message's text its item's summary keeps.
inline constexpr std::size_t timeline_summary_chars = 140;

struct timeline_position {
  std::int64_t at = 0; // microseconds since the epoch
  std::string type;    // one of timeline_types
  std::int64_t id = 0;
};

// The next_cursor after `p` on `contact`'s timeline: opaque to clients.
std::string timeline_cursor(std::int64_t contact, const timeline_position& p);

enum class cursor_error : std::uint8_t { malformed, other_contact };
struct cursor_reading {
  std::optional<timeline_position> position;
  std::optional<cursor_error> error;
};
// Reads a cursor made by timeline_cursor for `contact`.
cursor_reading read_timeline_cursor(std::string_view text, std::int64_t contact);

// A summary of free text: its first line, at most timeline_summary_chars characters (an ellipsis
// when cut).
std::string timeline_summary(std::string_view text);

} // namespace crm::domain
