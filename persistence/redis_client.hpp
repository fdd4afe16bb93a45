// A Redis connection owned by one thread. Commands are queued and run there with hiredis'
// blocking API (short timeouts), so no asio or actor thread ever waits on Redis. A broken
// connection is re-established on the next command, at most once per `retry_interval`; in
// between, commands fail at once with `connected == false` so callers can fail closed.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct redisContext;

namespace crm::persistence {

struct redis_reply {
  enum kind_t : std::uint8_t { nil, integer, string, status, array, error };
  bool connected = false; // false: Redis unreachable, nothing else is meaningful
  kind_t kind = nil;
  std::int64_t number = 0;
  std::string text; // string, status or error text
  std::vector<redis_reply> elements;

  bool ok() const { return connected && kind != error; }
};

struct redis_endpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string password;
};

// Parses redis://[:password@]host[:port][/db]. Throws std::invalid_argument.
redis_endpoint parse_redis_url(const std::string& url);

// A synchronous connection (used by the worker thread and by the revocation feed).
class redis_connection {
public:
  explicit redis_connection(redis_endpoint ep, std::chrono::milliseconds timeout);
  ~redis_connection();
  redis_connection(const redis_connection&) = delete;
  redis_connection& operator=(const redis_connection&) = delete;

  redis_reply command(const std::vector<std::string>& args);
  void set_timeout(std::chrono::milliseconds t);
  bool connected() const { return ctx_ != nullptr; }

private:
  bool ensure();
  void drop();

  redis_endpoint ep_;
  std::chrono::milliseconds timeout_;
  redisContext* ctx_ = nullptr;
  std::chrono::steady_clock::time_point next_attempt_{};
};

class redis_client {
public:
  using callback = std::function<void(redis_reply)>;

  explicit redis_client(const std::string& url);
  ~redis_client();
  redis_client(const redis_client&) = delete;
  redis_client& operator=(const redis_client&) = delete;

  // Runs the command on the client's thread; `cb` is called there with the reply.
  void command(std::vector<std::string> args, callback cb);
  // Runs several commands back to back (pipelined in order); one reply each.
  void commands(std::vector<std::vector<std::string>> batch,
                std::function<void(std::vector<redis_reply>)> cb);

  const redis_endpoint& endpoint() const { return ep_; }
  void stop();

private:
  void loop();

  redis_endpoint ep_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void(redis_connection&)>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace crm::persistence
