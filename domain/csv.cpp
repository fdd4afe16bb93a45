#include "domain/csv.hpp"

namespace crm::domain {

csv_reader::result csv_reader::next(std::vector<std::string>* row) {
  std::string field;
  std::size_t fields = 0;                               // ended in this row
  bool quoted = false, was_quoted = false, has = false; // `has`: the field is not empty
  if (row) row->clear();
  auto add = [&](char c) {
    if (row) field.push_back(c);
    has = true;
  };
  auto end_field = [&] {
    if (row) row->push_back(std::move(field));
    field.clear();
    ++fields;
    has = was_quoted = false;
  };
  auto i = pos_;
  for (; i < text_.size(); ++i) {
    char c = text_[i];
    if (quoted) {
      if (c != '"')
        add(c);
      else if (i + 1 < text_.size() && text_[i + 1] == '"')
        add(text_[++i]);
      else
        quoted = false;
      continue;
    }
    if (c == '"') {
      if (has || was_quoted) return pos_ = i, result::malformed; // a quote inside a field
      quoted = was_quoted = true;
    } else if (c == ',') {
      end_field();
    } else if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < text_.size() && text_[i + 1] == '\n') ++i;
      pos_ = i + 1;
      if (fields == 0 && !has) { // a line of one empty field (nothing, or "") is skipped
        was_quoted = false;
        continue;
      }
      end_field();
      return result::row;
    } else {
      if (was_quoted) return pos_ = i, result::malformed; // text after a closing quote
      add(c);
    }
  }
  if (quoted) return result::malformed;
  pos_ = i;
  if (fields == 0 && !has) return result::end;
  end_field();
  return result::row;
}

std::optional<std::vector<std::vector<std::string>>> parse_csv(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  csv_reader reader(text);
  std::vector<std::string> row;
  for (;;) {
    switch (reader.next(&row)) {
    case csv_reader::result::row: rows.push_back(std::move(row)); break;
    case csv_reader::result::end: return rows;
    case csv_reader::result::malformed: return std::nullopt;
    }
  }
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
