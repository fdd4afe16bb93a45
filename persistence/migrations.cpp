#include "persistence/migrations.hpp"

#include "persistence/log.hpp"

#include <pqxx/pqxx>

#include <cstdlib>

namespace crm::persistence {

int apply_migrations(const std::string& database_url) {
  pqxx::connection conn(database_url);
  {
    pqxx::nontransaction tx(conn);
    // A fixed key: concurrent nodes starting together apply each migration once.
    tx.exec("SELECT pg_advisory_lock(7263001)");
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
