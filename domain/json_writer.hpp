// A minimal JSON writer appending to a string, for the hot response shapes (contacts, pages):
// no intermediate DOM, no allocation beyond the output's growth.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace crm::domain {

// Appends `s` as a JSON string literal (quotes, escapes for `"`, `\` and control characters).
void append_json_string(std::string& out, std::string_view s);

class json_writer {
public:
  explicit json_writer(std::string& out) : out_(out) {}

  json_writer& begin_object() { return open('{'); }
  json_writer& end_object() { return close('}'); }
  json_writer& begin_array() { return open('['); }
  json_writer& end_array() { return close(']'); }

  json_writer& key(std::string_view k) {
    comma();
    append_json_string(out_, k);
    out_ += ':';
    fresh_ = true;
    return *this;
  }
  json_writer& value(const std::string& s) { return value(std::string_view(s)); }
  json_writer& value(const char* s) { return value(std::string_view(s)); }
  json_writer& value(std::string_view s) {
    comma();
    append_json_string(out_, s);
    return *this;
  }
  json_writer& value(std::int64_t n) {
    comma();
    out_ += std::to_string(n);
    return *this;
  }
  json_writer& value(bool b) {
    comma();
    out_ += b ? "true" : "false";
    return *this;
  }
  json_writer& null() {
    comma();
    out_ += "null";
    return *this;
  }
  // Text that is already JSON (a stored custom_fields object).
  json_writer& raw(std::string_view json) {
    comma();
    out_ += json;
    return *this;
  }
  json_writer& nullable(const std::optional<std::string>& s) {
    return s ? value(std::string_view(*s)) : null();
  }
  json_writer& nullable(const std::optional<std::int64_t>& n) { return n ? value(*n) : null(); }

private:
  json_writer& open(char c) {
    comma();
    out_ += c;
    fresh_ = true;
    return *this;
  }
  json_writer& close(char c) {
    out_ += c;
    fresh_ = false;
    return *this;
  }
  void comma() {
    if (!fresh_) out_ += ',';
    fresh_ = false;
  }

  std::string& out_;
  bool fresh_ = true;
};

} // namespace crm::domain
