// Time as microseconds since the Unix epoch (UTC), and its RFC 3339 text form
// `2026-11-21T10:15:30.123456Z` (contract §1).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace crm::domain {

std::int64_t now_micros();
inline std::int64_t now_seconds() {
  return now_micros() / 1'000'000;
}

// Always 6 fractional digits and `Z`.
std::string format_rfc3339(std::int64_t micros);

// The same text in a buffer of its own, for hot paths that only copy it on (no allocation).
struct rfc3339_text {
  std::array<char, 48> data{};
  std::size_t size = 0;
  void push_back(char c) { data[size++] = c; }
  std::string_view view() const { return {data.data(), size}; }
};
rfc3339_text rfc3339(std::int64_t micros);

// Accepts `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (also `t`/`z` and a space for `T`);
// a date alone `YYYY-MM-DD` is midnight UTC. Returns nothing for anything else or an
// impossible date.
std::optional<std::int64_t> parse_rfc3339(std::string_view text);

} // namespace crm::domain
