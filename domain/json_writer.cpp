#include "domain/json_writer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace crm::domain {
namespace {

constexpr std::uint64_t ones = 0x0101010101010101ull;
constexpr std::uint64_t highs = 0x8080808080808080ull;

// Whether some byte of `w` is below 0x20, a quote or a backslash: the bytes a JSON string must
// escape. The "has a byte below n" words of Bit Twiddling Hacks: exact about whether there is
// one (the borrows only blur which), so a word reported clean holds no such byte.
bool needs_escape(std::uint64_t w) {
  auto has_zero = [](std::uint64_t v) { return (v - ones) & ~v & highs; };
  return (((w - ones * 0x20) & ~w & highs) | has_zero(w ^ (ones * '"')) |
          has_zero(w ^ (ones * '\\'))) != 0;
}

void append_escape(std::string& out, unsigned char c) {
  static const char* hex = "0123456789abcdef";
  switch (c) {
  case '"': out += "\\\""; break;
  case '\\': out += "\\\\"; break;
  case '\n': out += "\\n"; break;
  case '\r': out += "\\r"; break;
  case '\t': out += "\\t"; break;
  case '\b': out += "\\b"; break;
  case '\f': out += "\\f"; break;
  default:
    out += "\\u00";
    out += hex[c >> 4];
    out += hex[c & 15];
  }
}

} // namespace

// Eight bytes at a time past the text that needs no escape (most of it: names, e-mails, ids),
// byte by byte through a word that holds a byte to escape; unescaped runs are copied whole.
void append_json_string(std::string& out, std::string_view s) {
  const char* data = s.data();
  const std::size_t n = s.size();
  out += '"';
  std::size_t start = 0;
  std::size_t i = 0;
  while (i < n) {
    if (n - i >= 8) {
      std::uint64_t w;
      std::memcpy(&w, data + i, 8);
      if (!needs_escape(w)) {
        i += 8;
        continue;
      }
    }
    for (const std::size_t stop = std::min(n, i + 8); i < stop; ++i) {
      auto c = static_cast<unsigned char>(data[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      out.append(data + start, i - start);
      append_escape(out, c);
      start = i + 1;
    }
  }
  out.append(data + start, n - start);
  out += '"';
}

} // namespace crm::domain
