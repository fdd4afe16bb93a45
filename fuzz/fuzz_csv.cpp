// CSV import and export: parsing any upload never crashes, and every field written by the
// exporter (formula escaping included) parses back to the same field.
#include "domain/csv.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto rows = crm::domain::parse_csv(in);
  if (rows)
    for (auto& row : *rows)
      for (auto& cell : row) (void)crm::domain::unescape_csv_formula(cell);
  // Round trip of the input as one field (CR is the one byte a CSV row cannot keep alone).
  std::string field(in);
  if (field.empty() || field.find('\r') != std::string::npos) return 0;
  std::string out;
  crm::domain::append_csv_field(out, field);
  out += "\n";
  auto back = crm::domain::parse_csv(out);
  if (!back || back->size() != 1 || back->front().size() != 1) __builtin_trap();
  if (crm::domain::unescape_csv_formula(back->front().front()) != field && field.front() != '\'')
    __builtin_trap();
  return 0;
}
