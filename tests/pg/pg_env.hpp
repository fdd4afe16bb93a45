// The PostgreSQL the persistence tests run against: CARECRM_TEST_PG_DSN, started by scripts/test.
#pragma once
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace crm::persistence {

inline std::string test_dsn() {
  const char* v = std::getenv("CARECRM_TEST_PG_DSN");
  if (!v || !*v) throw std::runtime_error("CARECRM_TEST_PG_DSN is not set (run scripts/test)");
  return v;
}

} // namespace crm::persistence
