#include "domain/ical.hpp"

#include <date/date.h>

#include <chrono>

namespace crm::domain {
namespace {

std::string utc(std::int64_t us) {
  auto t = date::sys_time<std::chrono::microseconds>(std::chrono::microseconds(us));
  return date::format("%Y%m%dT%H%M%SZ", date::floor<std::chrono::seconds>(t));
}

const char* ical_status(appointment_status s) {
  switch (s) {
  case appointment_status::booked: return "TENTATIVE";
  case appointment_status::cancelled:
  case appointment_status::no_show: return "CANCELLED";
  default: return "CONFIRMED";
  }
}

} // namespace

std::string ical_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    switch (c) {
    case '\\': out += "\\\\"; break;
    case ';': out += "\\;"; break;
    case ',': out += "\\,"; break;
    case '\n': out += "\\n"; break;
    case '\r':
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
      out += "\\n";
      break;
    default:
      // Other control characters are not allowed in a TEXT value.
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t') break;
      out += c;
    }
  }
  return out;
}

void ical_line(std::string& out, std::string_view line) {
  constexpr std::size_t limit = 75; // octets, CRLF excluded
  std::size_t width = 0;
  for (std::size_t i = 0; i < line.size();) {
    // The length of the UTF-8 sequence starting at i (a stray continuation byte counts alone).
    auto lead = static_cast<unsigned char>(line[i]);
    std::size_t n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    n = std::min(n, line.size() - i);
    if (width + n > limit) {
      out += "\r\n ";
      width = 1; // the space that starts a continuation line counts
    }
    out.append(line.substr(i, n));
    width += n;
    i += n;
  }
  out += "\r\n";
}

std::string calendar_feed(const calendar& c, const std::vector<appointment_view>& items,
                          const std::map<std::int64_t, std::string>& names, std::int64_t now) {
  std::string out;
  out.reserve(256 + items.size() * 320);
  ical_line(out, "BEGIN:VCALENDAR");
  ical_line(out, "VERSION:2.0");
  ical_line(out, "PRODID:-//carecrm//appointments//EN");
  ical_line(out, "CALSCALE:GREGORIAN");
  ical_line(out, "METHOD:PUBLISH");
  ical_line(out, "X-WR-CALNAME:" + ical_text(c.name));
  ical_line(out, "X-WR-TIMEZONE:" + ical_text(c.time_zone));
  // How often a subscriber should fetch it again (RFC 7986, and Outlook's older property).
  ical_line(out, "REFRESH-INTERVAL;VALUE=DURATION:PT15M");
  ical_line(out, "X-PUBLISHED-TTL:PT15M");
  const auto stamp = utc(now);
  for (auto& v : items) {
    auto& a = v.a;
    ical_line(out, "BEGIN:VEVENT");
    ical_line(out, "UID:appointment-" + std::to_string(a.id) + "@carecrm");
    ical_line(out, "DTSTAMP:" + stamp);
    ical_line(out, "DTSTART:" + utc(a.start));
    ical_line(out, "DTEND:" + utc(a.end));
    ical_line(out, "CREATED:" + utc(a.created_at));
    ical_line(out, "LAST-MODIFIED:" + utc(a.updated_at));
    std::string summary = v.service_name;
    if (auto n = names.find(a.contact_id); n != names.end() && !n->second.empty())
      summary += " - " + n->second;
    ical_line(out, "SUMMARY:" + ical_text(summary));
    ical_line(out, "DESCRIPTION:" + ical_text("Status: " + std::string(to_string(a.status)) +
                                              "\nCalendar: " + v.calendar_name));
    ical_line(out, std::string("STATUS:") + ical_status(a.status));
    ical_line(out, "TRANSP:OPAQUE");
    ical_line(out, "END:VEVENT");
  }
  ical_line(out, "END:VCALENDAR");
  return out;
}

} // namespace crm::domain
