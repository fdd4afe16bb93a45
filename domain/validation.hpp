// Field rules shared by every area (contract §4): e-mail addresses and E.164 phone numbers.
#pragma once
#include <string>
#include <string_view>

namespace crm::domain {

// A practical address check: one `@`, a non-empty local part of allowed characters without
// leading, trailing or doubled dots, a domain of at least two labels of letters, digits and
// hyphens (no label starting or ending with `-`), a TLD of 2+ letters; at most 254 characters.
bool is_valid_email(std::string_view s);

// `^\+[1-9][0-9]{1,14}$`
bool is_e164(std::string_view s);

// ASCII lower-casing for case-insensitive keys (e-mail uniqueness).
std::string ascii_lower(std::string_view s);

// Trims ASCII white space at both ends.
std::string_view trim(std::string_view s);

// Bytes of the well-formed UTF-8 character at byte `i` of `s`; 0 when the bytes there are not
// one (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
std::size_t utf8_sequence(std::string_view s, std::size_t i);
// Length in Unicode code points of valid UTF-8 (bytes for invalid sequences).
std::size_t utf8_length(std::string_view s);
// The first `max_chars` characters of `s`, counted as utf8_length counts them.
std::string_view utf8_prefix(std::string_view s, std::size_t max_chars);
// Byte offset of the first byte of `s` that PostgreSQL text cannot hold (a NUL, or one that does
// not start a well-formed UTF-8 character), or npos when `s` is storable text.
std::size_t first_non_text(std::string_view s);
inline bool is_text(std::string_view s) {
  return first_non_text(s) == std::string_view::npos;
}

} // namespace crm::domain
