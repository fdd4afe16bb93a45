// Logging to stderr: one line per event, `{}` placeholders, as text or as one JSON object per
// line (--log-format), and the access log, one line per request (--access-log).
// Never log tokens, passwords, secrets or health data (an access line names the route, never
// the path or the query).
#pragma once
#include <cstdint>
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

enum class log_style : std::uint8_t { text, json };
void set_log_style(log_style s);

// One answered request.
struct access_line {
  std::string_view request_id;
  std::string_view method;
  std::string_view route; // the route's pattern, e.g. /api/v1/contacts/{id}; empty: none matched
  std::string_view remote;
  std::int64_t tenant_id = 0; // 0: none (not signed in)
  std::int64_t user_id = 0;
  int status = 0;
  double seconds = 0;
};
// Buffered: written with the lines before it, at the latest `flush` after (the log writer's
// period, 100 ms, while it runs; at once without it).
void log_access(const access_line& a);
// Names the calling thread as `top -H`, `perf` and /proc/PID/task/*/comm show it (up to 15
// characters; longer names are cut).
void name_this_thread(const char* name);

// The thread that writes buffered access lines (serve starts it and stops it last).
void start_log_writer();
void stop_log_writer();

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
