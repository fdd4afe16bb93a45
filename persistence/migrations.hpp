// Numbered SQL migrations (persistence/migrations/NNN_name.sql, embedded in the binary at build
// time), applied in order under an advisory lock and recorded in `schema_migrations`.
#pragma once
#include <string>
#include <vector>

namespace crm::domain {
class secret_keys;
}

namespace crm::persistence {

struct migration_source {
  const char* name; // "001_init.sql"
  const char* sql;
};

const std::vector<migration_source>& embedded_migrations();

// Applies every migration not yet recorded; returns how many were applied. Throws on failure.
// Migration 016 signs the audit heads stored before it with `keys`, and 017 seals sensitive
// values again bound to their contact and field (each in its own transaction): each is refused
// without keys when there is something for it to do.
int apply_migrations(const std::string& database_url, const domain::secret_keys* keys);

} // namespace crm::persistence
