// RFC 4180 CSV: parsing an uploaded file and quoting exported fields.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

// Reads rows one at a time from text it does not own (an import's body): fields may be quoted
// and then hold commas, quotes ("") and line breaks; CRLF or LF line ends; a final line break
// is optional; empty lines are skipped. Memory is one row, whatever the size of the text.
class csv_reader {
public:
  enum class result { row, end, malformed };

  explicit csv_reader(std::string_view text) : text_(text) {}
  // The next row into `row` (replaced), or the end, or malformed quoting (a quote inside an
  // unquoted field, text after a closing quote, a quote never closed): the reader then stays
  // where the fault is. With no `row`, the row is only checked and skipped (no allocation).
  result next(std::vector<std::string>* row);
  std::size_t offset() const { return pos_; } // where the next row starts

private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

// Every row of `text` (csv_reader's rules), or nothing on malformed quoting.
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
