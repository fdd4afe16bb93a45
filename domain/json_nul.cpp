#include "domain/json_nul.hpp"

#include "domain/json_parse.hpp"

#include <boost/json.hpp>

namespace crm::domain {
namespace {

bool holds_nul(boost::json::string_view s) {
  return s.find('\0') != boost::json::string_view::npos;
}

bool find_nul(const boost::json::value& v, std::vector<loc_part>& at) {
  if (auto s = v.if_string()) return holds_nul(*s);
  if (auto a = v.if_array()) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      at.emplace_back(static_cast<std::int64_t>(i));
      if (find_nul((*a)[i], at)) return true;
      at.pop_back();
    }
  } else if (auto o = v.if_object()) {
    for (const auto& kv : *o) {
      at.emplace_back(std::string(kv.key()));
      if (holds_nul(kv.key()) || find_nul(kv.value(), at)) return true;
      at.pop_back();
    }
  }
  return false;
}

} // namespace

std::optional<std::vector<loc_part>> nul_location(std::string_view raw, const boost::json::value& v,
                                                  std::vector<loc_part> base) {
  if (raw.find("\\u0000") == std::string_view::npos) return std::nullopt;
  if (!find_nul(v, base)) return std::nullopt;
  return base;
}

issue nul_issue(std::vector<loc_part> loc) {
  return {std::move(loc), "String should not contain the NUL character (U+0000)", "value_error"};
}

} // namespace crm::domain

namespace crm::domain {

const boost::json::object* body_object(std::string_view text, boost::json::value& doc,
                                       std::vector<issue>& issues) {
  const std::vector<loc_part> body = {std::string("body")};
  boost::system::error_code ec;
  doc = parse_json(text, ec);
  if (ec) {
    issues.push_back({body, "JSON decode error", "json_invalid"});
    return nullptr;
  }
  if (auto at = nul_location(text, doc, body)) {
    issues.push_back(nul_issue(std::move(*at)));
    return nullptr;
  }
  auto o = doc.if_object();
  if (!o) issues.push_back({body, "Input should be a valid dictionary", "json_invalid"});
  return o;
}

} // namespace crm::domain
