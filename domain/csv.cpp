#include "domain/csv.hpp"

namespace crm::domain {

std::optional<std::vector<std::vector<std::string>>> parse_csv(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, was_quoted = false, any = false;
  auto end_field = [&] {
    row.push_back(std::move(field));
    field.clear();
    was_quoted = false;
  };
  auto end_row = [&] {
    end_field();
    if (!(row.size() == 1 && row[0].empty())) rows.push_back(std::move(row));
    row.clear();
    any = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field.push_back(c);
      }
      continue;
    }
    if (c == '"') {
      if (!field.empty() || was_quoted) return std::nullopt; // quote inside an unquoted field
      quoted = was_quoted = true;
      any = true;
    } else if (c == ',') {
      end_field();
      any = true;
    } else if (c == '\r') {
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_row();
    } else if (c == '\n') {
      end_row();
    } else {
      if (was_quoted) return std::nullopt; // text after a closing quote
      field.push_back(c);
      any = true;
    }
  }
  if (quoted) return std::nullopt;
  if (any || !field.empty()) end_row();
  return rows;
}

namespace {

bool formula_start(char c) {
  return c == '=' || c == '+' || c == '-' || c == '@' || c == '\t' || c == '\r';
}

bool plain_number(std::string_view v) {
  std::size_t i = (v[0] == '+' || v[0] == '-') ? 1 : 0;
  if (i == v.size()) return false;
  bool digit = false;
  for (; i < v.size(); ++i) {
    if (v[i] >= '0' && v[i] <= '9')
      digit = true;
    else if (v[i] != '.')
      return false;
  }
  return digit;
}

} // namespace

void append_csv_field(std::string& out, std::string_view field) {
  const bool escape = !field.empty() && formula_start(field[0]) && !plain_number(field);
  const bool quote = field.find_first_of(",\"\r\n") != std::string_view::npos;
  if (quote) out += '"';
  if (escape) out += '\'';
  if (!quote) {
    out += field;
    return;
  }
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

std::string_view unescape_csv_formula(std::string_view cell) {
  if (cell.size() >= 2 && cell[0] == '\'' && formula_start(cell[1]) &&
      !plain_number(cell.substr(1)))
    cell.remove_prefix(1);
  return cell;
}

} // namespace crm::domain
