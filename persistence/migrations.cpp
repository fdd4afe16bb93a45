#include "persistence/migrations.hpp"

#include "persistence/audit_repo.hpp"
#include "persistence/log.hpp"
#include "persistence/secrets_repo.hpp"

#include <pqxx/pqxx>

#include <cstdlib>
#include <stdexcept>

namespace crm::persistence {

namespace {
constexpr int signed_heads_version = 16; // 016_audit_signed_heads.sql
constexpr int bound_values_version = 17; // 017_bound_sensitive_values.sql

[[noreturn]] void needs_keys(const char* name, const char* what) {
  throw std::runtime_error("migration " + std::string(name) + " " + what +
                           ": --secret-keys is needed");
}
} // namespace

int apply_migrations(const std::string& database_url, const domain::secret_keys* keys) {
  pqxx::connection conn(database_url);
  {
    pqxx::nontransaction tx(conn);
    // A fixed key: concurrent nodes starting together apply each migration once.
    tx.exec("SELECT pg_advisory_lock(7263001)");
    // Created only when missing: a role that may not create tables (docs/operations.md
    // "Database roles") still starts against a migrated database.
    if (tx.exec1("SELECT to_regclass('schema_migrations') IS NULL")[0].as<bool>())
      tx.exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
              " version integer PRIMARY KEY, name text NOT NULL,"
              " applied_at timestamptz NOT NULL DEFAULT now())");
  }
  int applied = 0;
  try {
    for (const auto& m : embedded_migrations()) {
      int version = std::atoi(m.name);
      pqxx::work tx(conn);
      auto r = tx.exec_params("SELECT 1 FROM schema_migrations WHERE version = $1", version);
      if (!r.empty()) continue;
      tx.exec(m.sql);
      if (version == signed_heads_version) {
        if (keys)
          sign_audit_heads(tx, *keys);
        else if (!tx.exec("SELECT 1 FROM audit_heads UNION ALL SELECT 1 FROM audit_pruned "
                          "LIMIT 1")
                      .empty())
          needs_keys(m.name, "signs the audit trail's heads");
      }
      if (version == bound_values_version) {
        if (keys) {
          if (auto n = bind_sensitive_values(tx, *keys))
            log_info("migration {}: the sensitive values of {} contacts bound to them", m.name, n);
        } else if (!tx.exec("SELECT 1 FROM tenant_data_keys LIMIT 1").empty()) {
          needs_keys(m.name, "binds sensitive values to their contact and field");
        }
      }
      tx.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version,
                     std::string(m.name));
      tx.commit();
      log_info("migration {} applied", m.name);
      ++applied;
    }
  } catch (...) {
    pqxx::nontransaction tx(conn);
    tx.exec("SELECT pg_advisory_unlock(7263001)");
    throw;
  }
  pqxx::nontransaction tx(conn);
  tx.exec("SELECT pg_advisory_unlock(7263001)");
  return applied;
}

} // namespace crm::persistence
