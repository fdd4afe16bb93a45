// RFC 4180 CSV: parsing an uploaded file and quoting exported fields.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::http {

// Rows of fields; quoted fields may hold commas, quotes ("") and line breaks. CRLF or LF line
// ends; a final line break is optional; empty lines are skipped. Nothing on malformed quoting.
std::optional<std::vector<std::vector<std::string>>> parse_csv(std::string_view text);

// Appends `field` to `out`, quoted when it holds a comma, quote, CR or LF.
void append_csv_field(std::string& out, std::string_view field);

} // namespace crm::http
