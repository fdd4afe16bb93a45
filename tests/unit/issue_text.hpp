// Validation issues as text, to compare whole lists at once in unit tests: each issue as
// "body/contact/phone:value_error.phone" (its loc joined by '/', then its type).
#pragma once
#include "domain/failure.hpp"

#include <string>
#include <variant>
#include <vector>

namespace crm::testing {

inline std::vector<std::string> described(const std::vector<domain::issue>& issues) {
  std::vector<std::string> out;
  for (auto& i : issues) {
    std::string s;
    for (auto& p : i.loc) {
      if (!s.empty()) s += '/';
      if (auto k = std::get_if<std::string>(&p))
        s += *k;
      else
        s += std::to_string(std::get<std::int64_t>(p));
    }
    out.push_back(s + ":" + i.type);
  }
  return out;
}

} // namespace crm::testing
