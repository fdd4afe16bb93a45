// Field rules shared by every area (contract §4). Hand-written scanners rather than std::regex:
// these run on every request body, and std::regex is slow and can recurse deeply on long input.
#include "domain/validation.hpp"

#include <algorithm>

namespace crm::domain {

namespace {

constexpr std::size_t max_email_length = 254;

constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
constexpr bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// RFC 5322 `atext`: the characters an unquoted local part may use besides the dot.
constexpr bool is_local_char(char c) {
  if (is_alpha(c) || is_digit(c)) {
    return true;
  }
  constexpr std::string_view specials = "!#$%&'*+-/=?^_`{|}~";
  return specials.find(c) != std::string_view::npos;
}

bool is_valid_local_part(std::string_view local) {
  if (local.empty() || local.front() == '.' || local.back() == '.') {
    return false;
  }
  char previous = '\0';
  for (const char c : local) {
    if (c == '.') {
      if (previous == '.') {
        return false;
      }
    } else if (!is_local_char(c)) {
      return false;
    }
    previous = c;
  }
  return true;
}

bool is_valid_label(std::string_view label) {
  if (label.empty() || label.front() == '-' || label.back() == '-') {
    return false;
  }
  for (const char c : label) {
    if (!is_alpha(c) && !is_digit(c) && c != '-') {
      return false;
    }
  }
  return true;
}

bool is_valid_domain(std::string_view domain) {
  const std::size_t last_dot = domain.rfind('.');
  if (last_dot == std::string_view::npos) {
    return false; // needs at least two labels
  }
  const std::string_view tld = domain.substr(last_dot + 1);
  if (tld.size() < 2) {
    return false;
  }
  for (const char c : tld) {
    if (!is_alpha(c)) {
      return false;
    }
  }
  std::size_t start = 0;
  while (start <= last_dot) {
    const std::size_t dot = domain.find('.', start);
    if (!is_valid_label(domain.substr(start, dot - start))) {
      return false;
    }
    start = dot + 1;
  }
  return true;
}

} // namespace

bool is_valid_email(std::string_view s) {
  if (s.size() > max_email_length) {
    return false;
  }
  const std::size_t at = s.find('@');
  if (at == std::string_view::npos || s.find('@', at + 1) != std::string_view::npos) {
    return false;
  }
  return is_valid_local_part(s.substr(0, at)) && is_valid_domain(s.substr(at + 1));
}

bool is_e164(std::string_view s) {
  // `+`, a non-zero first digit, then 1 to 14 more digits.
  if (s.size() < 3 || s.size() > 16 || s[0] != '+' || s[1] < '1' || s[1] > '9') {
    return false;
  }
  for (const char c : s.substr(2)) {
    if (!is_digit(c)) {
      return false;
    }
  }
  return true;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && is_space(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const auto is_cont = [&](std::size_t k) { return k < s.size() && (byte(k) & 0xC0) == 0x80; };
  const unsigned char b = byte(i);
  // Only well-formed sequences (RFC 3629: no overlong forms, no surrogates, nothing past
  // U+10FFFF) are characters.
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return is_cont(i + 1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    const unsigned char lo = b == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = b == 0xED ? 0x9F : 0xBF;
    const bool ok = i + 1 < s.size() && byte(i + 1) >= lo && byte(i + 1) <= hi && is_cont(i + 2);
    return ok ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const unsigned char lo = b == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = b == 0xF4 ? 0x8F : 0xBF;
    const bool ok = i + 1 < s.size() && byte(i + 1) >= lo && byte(i + 1) <= hi && is_cont(i + 2) &&
                    is_cont(i + 3);
    return ok ? 4 : 0;
  }
  return 0;
}

std::size_t utf8_length(std::string_view s) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.size(); ++count) i += std::max<std::size_t>(utf8_sequence(s, i), 1);
  return count;
}

std::size_t first_non_text(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '\0') return i;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    auto n = utf8_sequence(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string_view utf8_prefix(std::string_view s, std::size_t max_chars) {
  std::size_t i = 0;
  for (std::size_t count = 0; i < s.size() && count < max_chars; ++count)
    i += std::max<std::size_t>(utf8_sequence(s, i), 1);
  return s.substr(0, i);
}

} // namespace crm::domain
