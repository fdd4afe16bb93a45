#include "domain/json_nul.hpp"

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
