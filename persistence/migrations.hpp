// Numbered SQL migrations (persistence/migrations/NNN_name.sql, embedded in the binary at build
// time), applied in order under an advisory lock and recorded in `schema_migrations`.
#pragma once
#include <string>
#include <vector>

namespace crm::persistence {

struct migration_source {
  const char* name; // "001_init.sql"
  const char* sql;
};

const std::vector<migration_source>& embedded_migrations();

// Applies every migration not yet recorded; returns how many were applied. Throws on failure.
int apply_migrations(const std::string& database_url);

} // namespace crm::persistence
