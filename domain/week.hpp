// Opening hours by the week in a local time zone: a calendar's working hours
// (docs/appointments.md) and a channel's business hours (docs/channels.md "Business hours")
// have this one shape. Time zones come from the system's tz database through Howard Hinnant's
// date/tz (Debian's libhowardhinnant-date-dev), never from a table of offsets; the functions
// are in domain/schedule.cpp beside the availability that uses them most.
#pragma once
#include "domain/failure.hpp"

#include <boost/json/fwd.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

// The keys of working_hours, Monday first.
inline constexpr std::array<std::string_view, 7> weekday_keys{"mon", "tue", "wed", "thu",
                                                              "fri", "sat", "sun"};
inline constexpr std::size_t spans_per_day_max = 12;
inline constexpr std::size_t time_zone_name_max = 64;

// Local time within a day, in minutes from midnight: [start, end), 0 ≤ start < end ≤ 1440.
struct day_span {
  int start = 0;
  int end = 0;
  bool operator==(const day_span&) const = default;
};
// Monday first; a day without spans is closed.
using working_week = std::array<std::vector<day_span>, 7>;

// working_hours as the API writes it: {"mon": [["08:00", "12:00"], ...], ...}. Every failing
// entry is reported under `at` (spans that end before they start, overlap, or are out of order
// are errors; a day may be absent).
std::optional<working_week> read_working_hours(const boost::json::value& v,
                                               std::vector<loc_part> at,
                                               std::vector<issue>& issues);
boost::json::object working_hours_to_json(const working_week& w);
std::string working_hours_text(const working_week& w);
// A stored working_hours text (written by working_hours_text); closed all week when unreadable.
working_week parse_working_hours_text(std::string_view text);

// The system's tz database knows this IANA name ("America/Sao_Paulo"; "UTC").
bool is_time_zone(std::string_view name);

// Whether `week`, read in `zone`, is closed at instant `now` (µs), and since when: nothing while
// open; else the start of the closed period (the end of the last span before `now`, spans that
// touch across midnight counting as one), or 0 when no span ended in the eight days before. An
// unknown zone reads as UTC.
std::optional<std::int64_t> closed_since(const working_week& week, std::string_view zone,
                                         std::int64_t now);

} // namespace crm::domain
