// Minimal structured logging to stderr: one line per event, `{}` placeholders.
// Never log tokens, passwords or secrets.
#pragma once
#include <exception>
#include <sstream>
#include <string>
#include <string_view>

namespace crm {

namespace detail {
inline void log_format(std::ostringstream& os, std::string_view fmt) {
  os << fmt;
}
template <class T, class... Ts>
void log_format(std::ostringstream& os, std::string_view fmt, const T& x, const Ts&... xs) {
  auto p = fmt.find("{}");
  if (p == std::string_view::npos) {
    os << fmt;
    return;
  }
  os << fmt.substr(0, p) << x;
  log_format(os, fmt.substr(p + 2), xs...);
}
void log_write(const char* level, const std::string& line);
} // namespace detail

template <class... Ts>
void log_info(std::string_view fmt, const Ts&... xs) {
  std::ostringstream os;
  detail::log_format(os, fmt, xs...);
  detail::log_write("info", os.str());
}
template <class... Ts>
void log_warn(std::string_view fmt, const Ts&... xs) {
  std::ostringstream os;
  detail::log_format(os, fmt, xs...);
  detail::log_write("warn", os.str());
}
template <class... Ts>
void log_error(std::string_view fmt, const Ts&... xs) {
  std::ostringstream os;
  detail::log_format(os, fmt, xs...);
  detail::log_write("error", os.str());
}

// Runs `f` on a long-lived thread of ours (a pool worker, a sweeper, an io_context): an
// exception is logged with `what` instead of ending the thread and, with it, the process.
// True when `f` returned normally.
template <class F>
bool run_guarded(const char* what, F&& f) noexcept {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    log_error("{} threw: {}", what, e.what());
  } catch (...) {
    log_error("{} threw a non-standard exception", what);
  }
  return false;
}

} // namespace crm

namespace crm::persistence {
using crm::log_error;
using crm::log_info;
using crm::log_warn;
} // namespace crm::persistence
