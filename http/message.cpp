#include "http/message.hpp"

#include "domain/validation.hpp"

namespace crm::http {

std::string_view to_string(verb v) {
  switch (v) {
  case verb::get: return "GET";
  case verb::post: return "POST";
  case verb::put: return "PUT";
  case verb::patch: return "PATCH";
  case verb::del: return "DELETE";
  case verb::head: return "HEAD";
  case verb::options: return "OPTIONS";
  case verb::other: break;
  }
  return "OTHER";
}

verb parse_verb(std::string_view s) {
  if (s == "GET") return verb::get;
  if (s == "POST") return verb::post;
  if (s == "PUT") return verb::put;
  if (s == "PATCH") return verb::patch;
  if (s == "DELETE") return verb::del;
  if (s == "HEAD") return verb::head;
  if (s == "OPTIONS") return verb::options;
  return verb::other;
}

std::optional<std::string_view> request::header(std::string_view lower_name) const {
  for (auto& [k, v] : headers)
    if (k == lower_name) return std::string_view(v);
  return std::nullopt;
}

std::optional<std::string_view> request::query_value(std::string_view name) const {
  for (auto& [k, v] : query)
    if (k == name) return std::string_view(v);
  return std::nullopt;
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
} // namespace

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view q) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!q.empty()) {
    auto amp = q.find('&');
    auto part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view{} : q.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    auto k = percent_decode(part.substr(0, eq), true);
    auto v = percent_decode(eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1),
                            true);
    // A malformed escape keeps the raw text: validation then reports the value itself.
    out.emplace_back(k ? *k : std::string(part.substr(0, eq)),
                     v ? *v : std::string(eq == std::string_view::npos ? "" : part.substr(eq + 1)));
  }
  return out;
}

void set_target(request& req, std::string_view target) {
  req.target = std::string(target);
  auto q = target.find('?');
  auto raw_path = target.substr(0, q);
  auto decoded = percent_decode(raw_path, false);
  req.path = decoded ? std::move(*decoded) : std::string(raw_path);
  if (q != std::string_view::npos) req.query = parse_query(target.substr(q + 1));
}

std::optional<domain::issue> non_text_input(const request& req) {
  constexpr const char* not_text = "Input should be UTF-8 text without NUL characters";
  if (!domain::is_text(req.path)) return domain::issue{{"path"}, not_text, "string_unicode"};
  for (auto& [name, value] : req.query) {
    if (!domain::is_text(name)) return domain::issue{{"query"}, not_text, "string_unicode"};
    if (!domain::is_text(value)) return domain::issue{{"query", name}, not_text, "string_unicode"};
  }
  if (auto key = req.header("idempotency-key"); key && !key->empty()) {
    bool ok = key->size() <= idempotency_key_max;
    for (char c : *key) ok = ok && c >= 0x21 && c <= 0x7e;
    if (!ok)
      return domain::issue{{"header", "Idempotency-Key"},
                           "Idempotency-Key should be 1 to " + std::to_string(idempotency_key_max) +
                               " visible ASCII characters",
                           "string_pattern_mismatch"};
  }
  return std::nullopt;
}

} // namespace crm::http
