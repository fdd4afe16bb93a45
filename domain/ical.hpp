// A calendar's appointments as an RFC 5545 iCalendar feed (GET /calendars/{id}/feed.ics,
// docs/appointments.md "Calendar feed"), for Google Calendar, Outlook and Apple Calendar to
// subscribe to. Pure: the schedule actor gives the appointments and, when the calendar shows
// them, the patients' names.
#pragma once
#include "domain/schedule.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

// A rendered feed and the patients whose names it shows (each read is audited).
struct calendar_feed_text {
  std::string text;
  std::vector<std::int64_t> patients;
};

// The window a feed covers around `now`.
inline constexpr std::int64_t feed_past_days = 30;
inline constexpr std::int64_t feed_future_days = 365;

// VCALENDAR with one VEVENT per appointment (UID appointment-<id>@carecrm, UTC times, the
// service as SUMMARY, the patient's name after it when `names` has one). CRLF line ends, lines
// folded at 75 octets without splitting a UTF-8 character, TEXT values escaped.
std::string calendar_feed(const calendar& c, const std::vector<appointment_view>& items,
                          const std::map<std::int64_t, std::string>& names, std::int64_t now);

// TEXT value escaping of RFC 5545 §3.3.11 (backslash, semicolon, comma, line breaks).
std::string ical_text(std::string_view s);
// One content line, folded (§3.1) and ended with CRLF.
void ical_line(std::string& out, std::string_view line);

} // namespace crm::domain
