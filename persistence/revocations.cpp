#include "persistence/revocations.hpp"

#include "domain/clock.hpp"
#include "domain/jwt.hpp"
#include "domain/validation.hpp"
#include "persistence/log.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/user_repo.hpp"

#include <future>

namespace crm::persistence {
namespace {

const std::string stream_key = "crm:revocations";
// Every token of a session issued before its revocation has expired after this long.
constexpr std::int64_t revocation_ttl = domain::refresh_token_seconds + 60;

std::string session_key(const std::string& sid) {
  return "crm:rev:sid:" + sid;
}
std::string used_key(const std::string& jti) {
  return "crm:used:jti:" + jti;
}
std::string throttle_key(const std::string& email) {
  return "crm:loginfail:" + domain::ascii_lower(email);
}

// Atomically: a revoked session stays revoked; a refresh token is accepted once; a second use
// revokes the session (reuse detection).
const char* rotate_script = R"lua(
if redis.call('EXISTS', KEYS[1]) == 1 then return 2 end
if redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], '1', 'EX', ARGV[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', '100000', '*', 'sid', ARGV[3], 'until', ARGV[4])
return 1
)lua";

} // namespace

revocation_store::revocation_store(domain::revocation_list& list, redis_client& redis,
                                   std::string redis_url)
    : list_(list), redis_(redis), redis_url_(std::move(redis_url)) {}

revocation_store::~revocation_store() {
  stop();
}

void revocation_store::start(pg_pool& pool) {
  pool_ = &pool;
  // Note the stream position first, so nothing announced during the Postgres load is missed.
  {
    redis_connection conn(parse_redis_url(redis_url_), std::chrono::milliseconds(1000));
    auto r = conn.command({"XREVRANGE", stream_key, "+", "-", "COUNT", "1"});
    if (r.ok() && r.kind == redis_reply::array && !r.elements.empty() &&
        !r.elements[0].elements.empty())
      last_id_ = r.elements[0].elements[0].text;
    else if (r.ok())
      last_id_ = "0";
  }
  std::promise<void> loaded;
  pool.submit([&](pg_conn& c) {
    try {
      auto now = domain::now_seconds();
      for (auto& s : recently_revoked_sessions(c, revocation_ttl))
        list_.revoke(s.sid, s.revoked_at + revocation_ttl);
      list_.prune(now);
    } catch (const std::exception& e) {
      c.reset();
      loaded.set_exception(std::current_exception());
      return;
    }
    loaded.set_value();
  });
  loaded.get_future().get();
  feed_ = std::thread([this] {
    name_this_thread("crm.revocations");
    while (!run_guarded("the revocation feed", [this] { follow(); }) && !stopping_)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
}

void revocation_store::stop() {
  stopping_ = true;
  if (feed_.joinable()) feed_.join();
}

void revocation_store::follow() {
  redis_connection conn(parse_redis_url(redis_url_), std::chrono::milliseconds(2000));
  auto last_prune = domain::now_seconds();
  while (!stopping_) {
    if (last_id_ == "$") {
      // Redis was down at start-up: take the newest position once it answers.
      auto r = conn.command({"XREVRANGE", stream_key, "+", "-", "COUNT", "1"});
      if (!r.ok()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      last_id_ = (r.kind == redis_reply::array && !r.elements.empty())
                     ? r.elements[0].elements[0].text
                     : "0";
    }
    auto r =
        conn.command({"XREAD", "COUNT", "1000", "BLOCK", "500", "STREAMS", stream_key, last_id_});
    if (!r.connected) {
      if (!behind_since_) behind_since_ = domain::now_seconds();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    if (auto since = behind_since_.exchange(0)) catch_up(since);
    announce_pending(); // Redis answers again: what it missed goes out now
    if (r.kind == redis_reply::array) {
      for (auto& stream : r.elements) {
        if (stream.elements.size() < 2) continue;
        for (auto& entry : stream.elements[1].elements) {
          if (entry.elements.size() < 2) continue;
          last_id_ = entry.elements[0].text;
          auto& fields = entry.elements[1].elements;
          std::string sid;
          std::int64_t until = 0;
          for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
            if (fields[i].text == "sid")
              sid = fields[i + 1].text;
            else if (fields[i].text == "until")
              until = std::atoll(fields[i + 1].text.c_str());
          }
          if (!sid.empty()) list_.revoke(sid, until);
        }
      }
    }
    auto now = domain::now_seconds();
    if (now - last_prune > 60) {
      list_.prune(now);
      last_prune = now;
    }
  }
}

void revocation_store::catch_up(std::int64_t since) {
  if (!pool_) return;
  // A margin for the clocks of the nodes and of Postgres, and for a revocation committed just
  // before this node lost Redis but announced just after.
  auto window = domain::now_seconds() - since + 30;
  pool_->submit([this, window](pg_conn& c) {
    try {
      for (auto& s : recently_revoked_sessions(c, window))
        list_.revoke(s.sid, s.revoked_at + revocation_ttl);
      ++caught_up_;
    } catch (const std::exception& e) {
      c.reset();
      log_warn("revocations: catching up from postgres failed: {}", e.what());
      behind_since_ = domain::now_seconds() - window; // tried again on the next read
    }
  });
}

void revocation_store::revoke(const std::vector<std::string>& sids,
                              std::function<void(bool)> done) {
  auto until = domain::now_seconds() + revocation_ttl;
  std::vector<std::pair<std::string, std::int64_t>> revoked;
  for (auto& sid : sids) {
    list_.revoke(sid, until);
    revoked.emplace_back(sid, until);
  }
  announce(std::move(revoked), std::move(done));
}

void revocation_store::announce(std::vector<std::pair<std::string, std::int64_t>> revoked,
                                std::function<void(bool)> done) {
  if (revoked.empty()) {
    done(true);
    return;
  }
  auto now = domain::now_seconds();
  std::vector<std::vector<std::string>> batch;
  for (auto& [sid, until] : revoked) {
    auto ttl = std::max<std::int64_t>(until - now, 1);
    batch.push_back({"SET", session_key(sid), "1", "EX", std::to_string(ttl)});
    batch.push_back({"XADD", stream_key, "MAXLEN", "~", "100000", "*", "sid", sid, "until",
                     std::to_string(until)});
  }
  redis_.commands(std::move(batch), [this, revoked = std::move(revoked),
                                     done = std::move(done)](const std::vector<redis_reply>& rs) {
    bool ok = rs.size() == revoked.size() * 2;
    for (auto& r : rs) ok = ok && r.ok();
    if (!ok) {
      log_warn("redis: {} revocation(s) recorded in Postgres only, announced when Redis answers",
               revoked.size());
      std::lock_guard lock(pending_mutex_);
      // Bounded: past the limit the oldest are dropped (Postgres still refuses their refresh,
      // and every node loads recent revocations from it when it starts).
      for (auto& r : revoked) pending_.push_back(r);
      if (pending_.size() > 100000)
        pending_.erase(pending_.begin(), pending_.begin() + (pending_.size() - 100000));
    }
    done(ok);
  });
}

void revocation_store::announce_pending() {
  std::vector<std::pair<std::string, std::int64_t>> batch;
  {
    std::lock_guard lock(pending_mutex_);
    if (announcing_ || pending_.empty()) return;
    auto now = domain::now_seconds();
    for (auto& p : pending_)
      if (p.second > now) batch.push_back(std::move(p)); // expired ones need no announcement
    pending_.clear();
    if (batch.empty()) return;
    announcing_ = true;
  }
  auto n = batch.size();
  announce(std::move(batch), [this, n](bool ok) {
    if (ok) log_info("redis: {} revocation(s) made while it was down announced", n);
    std::lock_guard lock(pending_mutex_);
    announcing_ = false;
  });
}

std::size_t revocation_store::unannounced() const {
  std::lock_guard lock(pending_mutex_);
  return pending_.size() + (announcing_ ? 1 : 0);
}

void revocation_store::unrotate(const std::string& jti, std::function<void()> then) {
  redis_.command({"DEL", used_key(jti)}, [then = std::move(then)](const redis_reply& r) {
    if (!r.ok()) log_warn("redis: a failed refresh could not be taken back ({})", r.text);
    then();
  });
}

void revocation_store::rotate(const std::string& sid, const std::string& jti,
                              std::int64_t ttl_seconds, std::function<void(rotation)> done) {
  auto until = domain::now_seconds() + revocation_ttl;
  redis_.command({"EVAL", rotate_script, "3", session_key(sid), used_key(jti), stream_key,
                  std::to_string(std::max<std::int64_t>(ttl_seconds, 1)),
                  std::to_string(revocation_ttl), sid, std::to_string(until)},
                 [this, sid, until, done = std::move(done)](const redis_reply& r) {
                   if (!r.ok() || r.kind != redis_reply::integer) {
                     if (r.connected) log_warn("redis: rotation script failed: {}", r.text);
                     done(rotation::unavailable);
                     return;
                   }
                   if (r.number == 0) {
                     done(rotation::fresh);
                   } else if (r.number == 1) {
                     list_.revoke(sid, until);
                     done(rotation::reused);
                   } else {
                     list_.revoke(sid, until);
                     done(rotation::revoked);
                   }
                 });
}

login_throttle::login_throttle(redis_client& redis, int max_failures, int window_seconds)
    : redis_(redis), max_failures_(max_failures), window_(window_seconds) {}

void login_throttle::admit(const std::string& email, std::function<void(int)> done) {
  redis_.commands({{"GET", throttle_key(email)}, {"TTL", throttle_key(email)}},
                  [this, email, done = std::move(done)](std::vector<redis_reply> rs) mutable {
                    if (rs.size() == 2 && rs[0].ok() && rs[1].ok()) {
                      auto count =
                          rs[0].kind == redis_reply::string ? std::atoll(rs[0].text.c_str()) : 0;
                      auto ttl = rs[1].number > 0 ? rs[1].number : window_;
                      return admit_with(email, count, ttl, std::move(done));
                    }
                    std::int64_t count = 0, ttl = window_;
                    {
                      std::lock_guard<std::mutex> lock(mutex_);
                      auto it = local_.find(domain::ascii_lower(email));
                      auto now = domain::now_seconds();
                      if (it != local_.end() && it->second.second > now) {
                        count = it->second.first;
                        ttl = it->second.second - now;
                      }
                    }
                    admit_with(email, count, ttl, std::move(done));
                  });
}

void login_throttle::admit_with(const std::string& email, std::int64_t failures,
                                std::int64_t retry_after, std::function<void(int)> done) {
  if (failures >= max_failures_)
    return done(static_cast<int>(std::max<std::int64_t>(retry_after, 1)));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& f = in_flight_[domain::ascii_lower(email)];
    if (failures + f.checks >= max_failures_) {
      // Each check in flight may still turn into a failure: wait for one to end, then look
      // at the count again.
      f.waiting.push_back(
          [this, email, done = std::move(done)]() mutable { admit(email, std::move(done)); });
      return;
    }
    f.checks++;
  }
  done(0);
}

void login_throttle::check_ended(const std::string& email) {
  std::deque<std::function<void()>> again;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = in_flight_.find(domain::ascii_lower(email));
    if (it == in_flight_.end()) return;
    it->second.checks--;
    again = std::move(it->second.waiting);
    if (it->second.checks <= 0) in_flight_.erase(it);
  }
  for (auto& k : again) k();
}

void login_throttle::finish(const std::string& email, std::optional<bool> right) {
  // The count changes first; the check ends (and waiting attempts look again) only after
  // Redis has applied it: its commands run in order, so their GET sees the new count.
  if (!right) return check_ended(email);
  auto key = throttle_key(email);
  if (*right) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      local_.erase(domain::ascii_lower(email));
    }
    redis_.command({"DEL", key}, [this, email](const redis_reply&) { check_ended(email); });
    return;
  }
  redis_.commands({{"INCR", key}, {"EXPIRE", key, std::to_string(window_), "NX"}},
                  [this, email](std::vector<redis_reply> rs) {
                    if (rs.empty() || !rs[0].ok()) {
                      std::lock_guard<std::mutex> lock(mutex_);
                      auto now = domain::now_seconds();
                      auto& e = local_[domain::ascii_lower(email)];
                      if (e.second <= now) e = {0, now + window_};
                      ++e.first;
                    }
                    check_ended(email);
                  });
}

} // namespace crm::persistence
