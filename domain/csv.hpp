// RFC 4180 CSV: parsing an uploaded file and quoting exported fields.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

// Rows of fields; quoted fields may hold commas, quotes ("") and line breaks. CRLF or LF line
// ends; a final line break is optional; empty lines are skipped. Nothing on malformed quoting.
std::optional<std::vector<std::vector<std::string>>> parse_csv(std::string_view text);

// Appends `field` to `out`, quoted when it holds a comma, quote, CR or LF. A field a
// spreadsheet would run as a formula (one starting with = + - @, a tab or CR) gets a leading
// apostrophe (OWASP CSV injection); a plain number ("+5511999990000", "-12.50") stays as it is,
// since it cannot call anything.
void append_csv_field(std::string& out, std::string_view field);

// An imported cell as written before append_csv_field escaped it: the apostrophe added before
// a formula character is dropped, so an export imports back unchanged.
std::string_view unescape_csv_formula(std::string_view cell);

} // namespace crm::domain
