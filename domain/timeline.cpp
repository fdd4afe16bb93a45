#include "domain/timeline.hpp"

#include "domain/validation.hpp"

#include <algorithm>
#include <charconv>

namespace crm::domain {
namespace timeline_detail {

// Cursor text: "<contact>.<at>.<type>.<id>", all decimal but the type.
constexpr char separator = '.';

std::optional<std::int64_t> number(std::string_view s, bool may_be_zero) {
  std::int64_t n = 0;
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 0 || (!may_be_zero && n == 0))
    return std::nullopt;
  return n;
}

} // namespace timeline_detail

std::string timeline_cursor(std::int64_t contact, const timeline_position& p) {
  using timeline_detail::separator;
  return std::to_string(contact) + separator + std::to_string(p.at) + separator + p.type +
         separator + std::to_string(p.id);
}

cursor_reading read_timeline_cursor(std::string_view text, std::int64_t contact) {
  using timeline_detail::number;
  cursor_reading out;
  std::array<std::string_view, 4> parts;
  std::size_t n = 0;
  std::size_t from = 0;
  while (n < parts.size()) {
    auto dot = text.find(timeline_detail::separator, from);
    if (n + 1 == parts.size()) {
      if (dot != std::string_view::npos) break;
      parts[n++] = text.substr(from);
      break;
    }
    if (dot == std::string_view::npos) break;
    parts[n++] = text.substr(from, dot - from);
    from = dot + 1;
  }
  auto owner = n == parts.size() ? number(parts[0], false) : std::nullopt;
  auto at = owner ? number(parts[1], true) : std::nullopt;
  auto id = at ? number(parts[3], false) : std::nullopt;
  bool known = id && std::find(timeline_types.begin(), timeline_types.end(), parts[2]) !=
                         timeline_types.end();
  if (!known) {
    out.error = cursor_error::malformed;
    return out;
  }
  if (*owner != contact) {
    out.error = cursor_error::other_contact;
    return out;
  }
  out.position = timeline_position{*at, std::string(parts[2]), *id};
  return out;
}

std::string timeline_summary(std::string_view text) {
  auto line = text.substr(0, text.find_first_of("\r\n"));
  auto kept = utf8_prefix(line, timeline_summary_chars);
  std::string out(kept);
  if (kept.size() < line.size()) out += "\u2026";
  return out;
}

} // namespace crm::domain
