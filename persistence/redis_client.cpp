#include "persistence/redis_client.hpp"

#include "persistence/log.hpp"

#include <hiredis/hiredis.h>

#include <stdexcept>

namespace crm::persistence {
namespace {

redis_reply convert(const redisReply* r) {
  redis_reply out;
  out.connected = true;
  switch (r->type) {
  case REDIS_REPLY_INTEGER:
    out.kind = redis_reply::integer;
    out.number = r->integer;
    break;
  case REDIS_REPLY_STRING:
    out.kind = redis_reply::string;
    out.text.assign(r->str, r->len);
    break;
  case REDIS_REPLY_STATUS:
    out.kind = redis_reply::status;
    out.text.assign(r->str, r->len);
    break;
  case REDIS_REPLY_ERROR:
    out.kind = redis_reply::error;
    out.text.assign(r->str, r->len);
    break;
  case REDIS_REPLY_ARRAY:
    out.kind = redis_reply::array;
    for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
    break;
  default: out.kind = redis_reply::nil;
  }
  return out;
}

timeval to_timeval(std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  return tv;
}

} // namespace

redis_endpoint parse_redis_url(const std::string& url) {
  redis_endpoint ep;
  std::string rest = url;
  const std::string scheme = "redis://";
  if (rest.rfind(scheme, 0) != 0) throw std::invalid_argument("redis URL must start with redis://");
  rest = rest.substr(scheme.size());
  if (auto at = rest.find('@'); at != std::string::npos) {
    auto cred = rest.substr(0, at);
    auto colon = cred.find(':');
    ep.password = colon == std::string::npos ? cred : cred.substr(colon + 1);
    rest = rest.substr(at + 1);
  }
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    auto db = rest.substr(slash + 1);
    if (!db.empty()) ep.db = std::stoi(db);
    rest = rest.substr(0, slash);
  }
  if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    ep.port = std::stoi(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  if (!rest.empty()) ep.host = rest;
  return ep;
}

redis_connection::redis_connection(redis_endpoint ep, std::chrono::milliseconds timeout)
    : ep_(std::move(ep)), timeout_(timeout) {}

redis_connection::~redis_connection() {
  drop();
}

void redis_connection::drop() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
}

void redis_connection::set_timeout(std::chrono::milliseconds t) {
  timeout_ = t;
  if (ctx_) redisSetTimeout(ctx_, to_timeval(t));
}

bool redis_connection::ensure() {
  if (ctx_) return true;
  auto now = std::chrono::steady_clock::now();
  if (now < next_attempt_) return false;
  next_attempt_ = now + std::chrono::milliseconds(250);
  auto tv = to_timeval(std::chrono::milliseconds(1000));
  ctx_ = redisConnectWithTimeout(ep_.host.c_str(), ep_.port, tv);
  if (!ctx_ || ctx_->err) {
    if (ctx_) log_warn("redis: cannot connect to {}:{}: {}", ep_.host, ep_.port, ctx_->errstr);
    drop();
    return false;
  }
  redisSetTimeout(ctx_, to_timeval(timeout_));
  redisEnableKeepAlive(ctx_);
  auto setup = [this](const std::vector<std::string>& args) {
    auto r = command(args);
    return r.ok();
  };
  if (!ep_.password.empty() && !setup({"AUTH", ep_.password})) return false;
  if (ep_.db != 0 && !setup({"SELECT", std::to_string(ep_.db)})) return false;
  return ctx_ != nullptr;
}

redis_reply redis_connection::command(const std::vector<std::string>& args) {
  if (!ensure()) return {};
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (!r) {
    log_warn("redis: {}", ctx_->errstr);
    drop();
    return {};
  }
  auto out = convert(r);
  freeReplyObject(r);
  return out;
}

redis_client::redis_client(const std::string& url)
    : ep_(parse_redis_url(url)), thread_([this] {
        name_this_thread("crm.redis");
        loop();
      }) {}

redis_client::~redis_client() {
  stop();
}

void redis_client::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void redis_client::command(std::vector<std::string> args, callback cb) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back(
        [args = std::move(args), cb = std::move(cb)](redis_connection& c) { cb(c.command(args)); });
  }
  cv_.notify_one();
}

void redis_client::commands(std::vector<std::vector<std::string>> batch,
                            std::function<void(std::vector<redis_reply>)> cb) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back([batch = std::move(batch), cb = std::move(cb)](redis_connection& c) {
      std::vector<redis_reply> out;
      for (auto& args : batch) out.push_back(c.command(args));
      cb(std::move(out));
    });
  }
  cv_.notify_one();
}

void redis_client::loop() {
  redis_connection conn(ep_, std::chrono::milliseconds(1000));
  for (;;) {
    std::function<void(redis_connection&)> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job(conn);
  }
}

} // namespace crm::persistence
