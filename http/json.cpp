#include "http/json.hpp"

#include "domain/json_check.hpp"

#include "domain/json_nul.hpp"

#include "domain/clock.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>

namespace json = boost::json;

namespace crm::http {
namespace {

json::array loc_array(const std::vector<domain::loc_part>& loc) {
  json::array a;
  for (auto& p : loc) {
    if (auto s = std::get_if<std::string>(&p))
      a.emplace_back(*s);
    else
      a.emplace_back(std::get<std::int64_t>(p));
  }
  return a;
}

json::object user_object(const domain::user& u) {
  json::object o;
  o["id"] = u.id;
  o["email"] = u.email;
  o["full_name"] = u.full_name;
  o["tenant_id"] = u.tenant_id;
  o["role"] = std::string(domain::to_string(u.user_role));
  o["is_active"] = u.is_active;
  o["created_at"] = domain::format_rfc3339(u.created_at);
  return o;
}

} // namespace

std::string encode_error(std::string_view detail, std::string_view code) {
  json::object o;
  o["detail"] = detail;
  o["code"] = code;
  return json::serialize(o);
}

std::string encode_issues(const std::vector<domain::issue>& issues) {
  json::array items;
  for (auto& i : issues) {
    json::object o;
    o["loc"] = loc_array(i.loc);
    o["msg"] = i.msg;
    o["type"] = i.type;
    items.emplace_back(std::move(o));
  }
  json::object root;
  root["detail"] = std::move(items);
  return json::serialize(root);
}

std::string encode_user(const domain::user& u) {
  return json::serialize(user_object(u));
}

std::string encode_user_page(const domain::page<domain::user>& p) {
  json::array items;
  for (auto& u : p.items) items.emplace_back(user_object(u));
  json::object o;
  o["items"] = std::move(items);
  o["total"] = p.total;
  o["page"] = p.number;
  o["per_page"] = p.per_page;
  o["pages"] = p.pages();
  return json::serialize(o);
}

body_reader::body_reader(std::string_view body) {
  json::error_code ec;
  auto v = crm::domain::parse_json(body, ec);
  if (ec) {
    add({"body"}, "JSON decode error", "json_invalid");
    return;
  }
  if (auto at = domain::nul_location(body, v)) {
    issues_.push_back(domain::nul_issue(std::move(*at)));
    return;
  }
  doc_ = std::make_unique<json::value>(std::move(v));
  object_ = doc_->if_object();
  if (!object_) add({"body"}, "Input should be a valid dictionary", "json_invalid");
}

body_reader::~body_reader() = default;

void body_reader::add(std::vector<domain::loc_part> loc, std::string msg, std::string type) {
  issues_.push_back({std::move(loc), std::move(msg), std::move(type)});
}

bool body_reader::has(std::string_view key) {
  known_.emplace_back(key);
  return object_ && object_->contains(key);
}

std::optional<std::optional<std::string>> body_reader::nullable_text(std::string_view key,
                                                                     text_rule rule) {
  if (is_null(key)) {
    raw(key);
    return std::optional<std::string>();
  }
  if (auto s = text(key, false, rule)) return std::optional<std::string>(std::move(*s));
  return std::nullopt;
}

std::optional<std::optional<std::int64_t>> body_reader::nullable_id(std::string_view key) {
  if (is_null(key)) {
    raw(key);
    return std::optional<std::int64_t>();
  }
  if (auto v = id(key, false)) return std::optional<std::int64_t>(*v);
  return std::nullopt;
}

std::optional<std::optional<std::int64_t>> body_reader::nullable_timestamp(std::string_view key) {
  if (is_null(key)) {
    raw(key);
    return std::optional<std::int64_t>();
  }
  if (auto v = timestamp(key, false)) return std::optional<std::int64_t>(*v);
  return std::nullopt;
}

bool body_reader::is_null(std::string_view key) {
  if (!object_) return false;
  auto it = object_->find(key);
  return it != object_->end() && it->value().is_null();
}

const json::value* body_reader::raw(std::string_view key) {
  known_.emplace_back(key);
  if (!object_) return nullptr;
  auto it = object_->find(key);
  return it == object_->end() ? nullptr : &it->value();
}

std::optional<std::string> body_reader::text(std::string_view key, bool required, text_rule rule) {
  auto v = raw(key);
  if (!object_) return std::nullopt;
  if (!v) {
    if (required) add({"body", std::string(key)}, "Field required", "missing");
    return std::nullopt;
  }
  auto s = v->if_string();
  if (!s) {
    add({"body", std::string(key)}, "Input should be a valid string", "string_type");
    return std::nullopt;
  }
  std::string_view sv(s->data(), s->size());
  if (rule.trim) sv = domain::trim(sv);
  auto len = domain::utf8_length(sv);
  if (len < rule.min) {
    add({"body", std::string(key)},
        "String should have at least " + std::to_string(rule.min) +
            (rule.min == 1 ? " character" : " characters"),
        "string_too_short");
    return std::nullopt;
  }
  if (rule.max && len > rule.max) {
    add({"body", std::string(key)},
        "String should have at most " + std::to_string(rule.max) + " characters",
        "string_too_long");
    return std::nullopt;
  }
  return std::string(sv);
}

std::optional<bool> body_reader::boolean(std::string_view key, bool required) {
  auto v = raw(key);
  if (!object_) return std::nullopt;
  if (!v) {
    if (required) add({"body", std::string(key)}, "Field required", "missing");
    return std::nullopt;
  }
  if (auto b = v->if_bool()) return *b;
  add({"body", std::string(key)}, "Input should be a valid boolean", "bool_parsing");
  return std::nullopt;
}

std::optional<std::int64_t> body_reader::integer(std::string_view key, bool required) {
  auto v = raw(key);
  if (!object_) return std::nullopt;
  if (!v) {
    if (required) add({"body", std::string(key)}, "Field required", "missing");
    return std::nullopt;
  }
  // A double out of the int64 range (1e300) is not converted: that would be undefined.
  if (auto i = domain::detail::as_integer(*v)) return *i;
  add({"body", std::string(key)}, "Input should be a valid integer", "int_parsing");
  return std::nullopt;
}

std::optional<std::int64_t> body_reader::id(std::string_view key, bool required) {
  auto v = integer(key, required);
  if (!v || *v >= 1) return v;
  add({"body", std::string(key)}, "Input should be greater than or equal to 1",
      "greater_than_equal");
  return std::nullopt;
}

std::optional<std::int64_t> body_reader::timestamp(std::string_view key, bool required) {
  auto s = text(key, required, {.min = 1, .max = 64});
  if (!s) return std::nullopt;
  auto t = domain::parse_rfc3339(*s);
  if (!t)
    add({"body", std::string(key)}, "Input should be a valid RFC 3339 datetime",
        "datetime_parsing");
  return t;
}

std::optional<std::string> body_reader::one_of(std::string_view key, bool required,
                                               std::initializer_list<std::string_view> allowed) {
  return one_of(key, required, std::span<const std::string_view>(allowed.begin(), allowed.size()));
}

std::optional<std::string> body_reader::one_of(std::string_view key, bool required,
                                               std::span<const std::string_view> allowed) {
  auto s = text(key, required);
  if (!s) return std::nullopt;
  if (std::find(allowed.begin(), allowed.end(), *s) != allowed.end()) return s;
  std::string msg = "Input should be ";
  std::size_t i = 0;
  for (auto a : allowed) {
    if (i > 0) msg += (i + 1 == allowed.size()) ? " or " : ", ";
    msg += "'" + std::string(a) + "'";
    ++i;
  }
  add({"body", std::string(key)}, msg, "enum");
  return std::nullopt;
}

bool body_reader::finish() {
  if (object_) {
    for (auto& kv : *object_) {
      std::string_view k(kv.key().data(), kv.key().size());
      if (std::find(known_.begin(), known_.end(), k) == known_.end())
        add({"body", std::string(k)}, "Extra inputs are not permitted", "extra_forbidden");
    }
  }
  return issues_.empty();
}

std::optional<int> query_int(const request& req, std::string_view name, int fallback, int min,
                             int max, std::vector<domain::issue>& issues) {
  auto v = req.query_value(name);
  if (!v) return fallback;
  long long n = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (v->empty() || ec != std::errc{} || p != v->data() + v->size()) {
    issues.push_back({{"query", std::string(name)},
                      "Input should be a valid integer, unable to parse string as an integer",
                      "int_parsing"});
    return std::nullopt;
  }
  if (n < min) {
    issues.push_back({{"query", std::string(name)},
                      "Input should be greater than or equal to " + std::to_string(min),
                      "greater_than_equal"});
    return std::nullopt;
  }
  if (n > max) {
    issues.push_back({{"query", std::string(name)},
                      "Input should be less than or equal to " + std::to_string(max),
                      "less_than_equal"});
    return std::nullopt;
  }
  return static_cast<int>(n);
}

std::optional<bool> query_bool(const request& req, std::string_view name,
                               std::optional<bool> fallback, std::vector<domain::issue>& issues) {
  auto v = req.query_value(name);
  if (!v) return fallback;
  if (*v == "true" || *v == "1") return true;
  if (*v == "false" || *v == "0") return false;
  issues.push_back(
      {{"query", std::string(name)}, "Input should be a valid boolean", "bool_parsing"});
  return std::nullopt;
}

std::optional<std::int64_t> query_id(const request& req, std::string_view name,
                                     std::vector<domain::issue>& issues, bool required) {
  auto v = req.query_value(name);
  if (!v) {
    if (required) issues.push_back({{"query", std::string(name)}, "Field required", "missing"});
    return std::nullopt;
  }
  std::int64_t n = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || ptr != v->data() + v->size() || n < 1) {
    issues.push_back(
        {{"query", std::string(name)}, "Input should be a valid integer", "int_parsing"});
    return std::nullopt;
  }
  return n;
}

std::optional<std::int64_t> query_time(const request& req, std::string_view name,
                                       std::vector<domain::issue>& issues, bool required) {
  auto v = req.query_value(name);
  if (!v) {
    if (required) issues.push_back({{"query", std::string(name)}, "Field required", "missing"});
    return std::nullopt;
  }
  auto t = domain::parse_rfc3339(*v);
  if (!t)
    issues.push_back({{"query", std::string(name)},
                      "Input should be a valid RFC 3339 datetime",
                      "datetime_parsing"});
  return t;
}

std::optional<std::int64_t> path_id(std::string_view value, std::string_view name,
                                    std::vector<domain::issue>& issues) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc{} || p != value.data() + value.size()) {
    issues.push_back({{"path", std::string(name)},
                      "Input should be a valid integer, unable to parse string as an integer",
                      "int_parsing"});
    return std::nullopt;
  }
  return n;
}

} // namespace crm::http
