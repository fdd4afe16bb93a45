// Reading nullable columns and stored JSON out of libpqxx rows, shared by the repositories.
// Includes pqxx: only for persistence/*.cpp.
#pragma once
#include "domain/clock.hpp"
#include "domain/json_parse.hpp"

#include <boost/json.hpp>
#include <pqxx/pqxx>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// A timestamptz column read as microseconds since the epoch (a bigint), inside SQL text.
#define CRM_MICROS(col) "(extract(epoch from " col ") * 1000000)::bigint"

namespace crm::persistence {

// Microseconds since the epoch as the RFC 3339 text a timestamptz parameter takes.
inline std::string ts(std::int64_t micros) {
  return domain::format_rfc3339(micros);
}

// A nullable microseconds column (CRM_MICROS) with NULL read as 0, "never".
inline std::int64_t micros_or_zero(const pqxx::field& f) {
  return f.is_null() ? 0 : f.as<std::int64_t>();
}

inline std::optional<std::string> opt_text(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::string>();
}

inline std::optional<std::int64_t> opt_int(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::int64_t>();
}

// The first column of every row, as ids (the tenants a sweep wakes, ...).
inline std::vector<std::int64_t> first_ids(const pqxx::result& rows) {
  std::vector<std::int64_t> out;
  out.reserve(rows.size());
  for (auto r : rows) out.push_back(r[0].as<std::int64_t>());
  return out;
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
