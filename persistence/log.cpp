#include "persistence/log.hpp"

#include "domain/clock.hpp"

#include <cstdio>

namespace crm::detail {

void log_write(const char* level, const std::string& line) {
  auto ts = domain::format_rfc3339(domain::now_micros());
  // One fprintf per line keeps lines whole across threads.
  std::fprintf(stderr, "%s %s %s\n", ts.c_str(), level, line.c_str());
}

} // namespace crm::detail
