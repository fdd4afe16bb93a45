// Reading nullable columns and stored JSON out of libpqxx rows, shared by the repositories.
// Includes pqxx: only for persistence/*.cpp.
#pragma once
#include <boost/json.hpp>
#include <pqxx/pqxx>

#include <cstdint>
#include <optional>
#include <string>

namespace crm::persistence {

inline std::optional<std::string> opt_text(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::string>();
}

inline std::optional<std::int64_t> opt_int(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::int64_t>();
}

// jsonb prints with spaces; memory keeps the compact form the API returns.
inline std::string compact_json(const std::string& text) {
  if (text == "{}") return text;
  boost::json::error_code ec;
  auto v = boost::json::parse(text, ec);
  return ec ? std::string("{}") : boost::json::serialize(v);
}

} // namespace crm::persistence
