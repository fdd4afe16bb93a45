// Reading nullable columns and stored JSON out of libpqxx rows, shared by the repositories.
// Includes pqxx: only for persistence/*.cpp.
#pragma once
#include "domain/json_parse.hpp"

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
  auto v = crm::domain::parse_json(text, ec);
  return ec ? std::string("{}") : boost::json::serialize(v);
}

// The tenant holding row `id` of `table` (a table name from the code, never from a request).
template <class Connection>
std::optional<std::int64_t> tenant_of_row(Connection& conn, const char* table, std::int64_t id) {
  pqxx::read_transaction tx(conn);
  auto r = tx.exec_params(std::string("SELECT tenant_id FROM ") + table + " WHERE id = $1", id);
  if (r.empty()) return std::nullopt;
  return r.front()[0].template as<std::int64_t>();
}

} // namespace crm::persistence
