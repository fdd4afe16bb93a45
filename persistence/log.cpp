#include "persistence/log.hpp"

#include "domain/clock.hpp"
#include "domain/json_writer.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace crm {

namespace {

std::atomic<log_style> style{log_style::text};

// Lines wait in `pending` (appended under `buffer_mutex`, a few hundred nanoseconds); whoever
// writes them holds `write_mutex` and takes everything pending at once, so lines reach stderr
// in the order they were made, whole, and a request thread never waits on a slow reader of
// stderr unless the buffer has grown past `flush_at`.
std::mutex buffer_mutex;
std::mutex write_mutex;
std::string pending;
constexpr std::size_t flush_at = 64 * 1024;

struct writer_state {
  std::mutex mutex;
  std::condition_variable wake;
  std::thread thread;
  // Read without the mutex by append (a line waits for the writer only while it runs).
  std::atomic<bool> running{false};
  bool stopping = false;
  // A process that leaves without stop_log_writer (an exception out of serve) still ends the
  // thread rather than terminating on a joinable std::thread.
  ~writer_state() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
      wake.notify_one();
    }
    if (thread.joinable()) thread.join();
  }
};
writer_state& writer() {
  static writer_state w;
  return w;
}

void write_all(std::string_view s) {
  while (!s.empty()) {
    auto n = ::write(STDERR_FILENO, s.data(), s.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return; // stderr closed: nothing better to do with a log line
    }
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Writes everything pending (with `line` after it, when given).
void flush(std::string_view line = {}) {
  std::lock_guard w(write_mutex);
  std::string out;
  {
    std::lock_guard b(buffer_mutex);
    out.swap(pending);
  }
  out += line;
  write_all(out);
}

void append(std::string_view line) {
  bool now;
  {
    std::lock_guard b(buffer_mutex);
    pending += line;
    now = pending.size() >= flush_at || !writer().running.load(std::memory_order_relaxed);
  }
  if (now) flush();
}

} // namespace

void set_log_style(log_style s) {
  style.store(s, std::memory_order_relaxed);
}

namespace detail {

void log_write(const char* level, const std::string& line) {
  auto ts = domain::rfc3339(domain::now_micros());
  std::string out;
  if (style.load(std::memory_order_relaxed) == log_style::json) {
    domain::json_writer w(out);
    w.begin_object().key("ts").value(ts.view()).key("level").value(level);
    w.key("msg").value(line).end_object();
  } else {
    out.append(ts.view()).append(" ").append(level).append(" ").append(line);
  }
  out += '\n';
  flush(out);
}

} // namespace detail

void log_access(const access_line& a) {
  thread_local std::string out;
  out.clear();
  auto ts = domain::rfc3339(domain::now_micros());
  auto route = a.route.empty() ? std::string_view("unmatched") : a.route;
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.3f", a.seconds * 1000);
  if (style.load(std::memory_order_relaxed) == log_style::json) {
    domain::json_writer w(out);
    w.begin_object().key("ts").value(ts.view()).key("level").value("info");
    w.key("msg").value("request").key("request_id").value(a.request_id);
    w.key("method").value(a.method).key("route").value(route);
    w.key("status").value(static_cast<std::int64_t>(a.status));
    w.key("duration_ms").raw(ms);
    w.key("tenant_id");
    if (a.tenant_id)
      w.value(a.tenant_id);
    else
      w.null();
    w.key("user_id");
    if (a.user_id)
      w.value(a.user_id);
    else
      w.null();
    w.key("remote").value(a.remote).end_object();
  } else {
    out.append(ts.view()).append(" info request ").append(a.method).append(" ").append(route);
    out.append(" ").append(std::to_string(a.status)).append(" ").append(ms).append("ms");
    out.append(" request_id=").append(a.request_id);
    if (a.tenant_id) out.append(" tenant=").append(std::to_string(a.tenant_id));
    if (a.user_id) out.append(" user=").append(std::to_string(a.user_id));
    out.append(" remote=").append(a.remote);
  }
  out += '\n';
  append(out);
}

void start_log_writer() {
  auto& w = writer();
  std::lock_guard lock(w.mutex);
  if (w.running) return;
  w.running = true;
  w.stopping = false;
  w.thread = std::thread([&w] {
    name_this_thread("crm.log");
    std::unique_lock lock(w.mutex);
    while (!w.stopping) {
      w.wake.wait_for(lock, std::chrono::milliseconds(100), [&] { return w.stopping; });
      lock.unlock();
      flush();
      lock.lock();
    }
  });
}

void stop_log_writer() {
  auto& w = writer();
  {
    std::lock_guard lock(w.mutex);
    if (!w.running) return;
    w.stopping = true;
    w.wake.notify_one();
  }
  w.thread.join();
  {
    std::lock_guard lock(w.mutex);
    w.running = false;
  }
  flush();
}

void name_this_thread(const char* name) {
  char cut[16] = {};
  for (std::size_t i = 0; i < sizeof cut - 1 && name[i]; ++i) cut[i] = name[i];
  pthread_setname_np(pthread_self(), cut);
}

} // namespace crm
