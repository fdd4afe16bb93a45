// GET /healthz (the process answers) and GET /readyz (Postgres and Redis answer), no auth.
#include "http/api.hpp"

#include "http/openapi_schema.hpp"
#include "http/placement.hpp"
#include "http/services.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/redis_client.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

namespace crm::http {
namespace {

// /readyz needs no token, so its answer comes from a probe at most a second old: however
// many callers ask, Postgres and Redis see one ping each per second, and callers that come
// while a probe runs wait for it instead of starting another.
class readiness {
public:
  void answer(services& s, const exchange_ptr& ex) {
    // A node stopping (it still answers during --shutdown-grace, so a load balancer's health
    // check takes it out first), or a cluster member out of touch with Postgres.
    if (s.stopping && s.stopping->load())
      return ex->fail(domain::failure::of(domain::errc::service_unavailable, "stopping"));
    if (s.placement && !s.placement->fresh())
      return ex->fail(
          domain::failure::of(domain::errc::service_unavailable, "out of touch with the cluster"));
    {
      std::lock_guard lock(mutex_);
      if (probed_ && clock::now() - probed_at_ < std::chrono::seconds(1)) {
        auto verdict = verdict_;
        return reply(ex, verdict);
      }
      waiting_.push_back(ex);
      if (probing_) return;
      probing_ = true;
    }
    probe(s);
  }

private:
  using clock = std::chrono::steady_clock;
  struct verdict {
    bool pg_ok = false, redis_ok = false;
  };

  static void reply(const exchange_ptr& ex, verdict v) {
    if (v.pg_ok && v.redis_ok) return ex->json(200, R"({"status":"ready"})");
    std::string what = !v.pg_ok && !v.redis_ok ? "postgres and redis are"
                       : !v.pg_ok              ? "postgres is"
                                               : "redis is";
    ex->fail(domain::failure::of(domain::errc::service_unavailable, what + " unreachable"));
  }

  // Both checks run at once; the second to finish answers everyone waiting.
  void probe(services& s) {
    struct state {
      std::atomic<int> pending{2};
      std::atomic<bool> pg_ok{false}, redis_ok{false};
    };
    auto st = std::make_shared<state>();
    auto finish = [this, st] {
      if (--st->pending != 0) return;
      std::vector<exchange_ptr> waiting;
      verdict v{st->pg_ok, st->redis_ok};
      {
        std::lock_guard lock(mutex_);
        verdict_ = v;
        probed_ = true;
        probed_at_ = clock::now();
        probing_ = false;
        waiting.swap(waiting_);
      }
      for (auto& ex : waiting) reply(ex, v);
    };
    // Submitted past the queue limit: a ping stuck behind a flood of lookups would say
    // "unreachable" for a database that answers.
    s.pool.submit([st, finish](persistence::pg_conn& c) {
      try {
        persistence::pg_ping(c);
        st->pg_ok = true;
      } catch (const std::exception&) {
        c.reset();
      }
      finish();
    });
    s.redis.command({"PING"}, [st, finish](persistence::redis_reply r) {
      st->redis_ok = r.ok();
      finish();
    });
  }

  std::mutex mutex_;
  bool probing_ = false, probed_ = false;
  clock::time_point probed_at_{};
  verdict verdict_;
  std::vector<exchange_ptr> waiting_;
};

// One probe for both listeners' /readyz.
readiness& shared_readiness() {
  static readiness r;
  return r;
}

} // namespace

void add_health_routes(router& r, services& s, access a) {
  using namespace schema;
  define(r, "Liveness", object({{"status", constant("ok")}}));
  define(r, "Readiness", object({{"status", constant("ready")}}));
  r.add({verb::get,
         "/healthz",
         a,
         {},
         [](const exchange_ptr& ex) { ex->json(200, R"({"status":"ok"})"); },
         "Liveness: the process answers",
         "operations"},
        {"", "Liveness"});

  r.add({verb::get,
         "/readyz",
         a,
         {},
         [&s](const exchange_ptr& ex) { shared_readiness().answer(s, ex); },
         "Readiness: Postgres and Redis are reachable",
         "operations"},
        {"", "Readiness"});
}

} // namespace crm::http
