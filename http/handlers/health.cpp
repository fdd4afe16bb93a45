// GET /healthz (the process answers) and GET /readyz (Postgres and Redis answer), no auth.
#include "http/api.hpp"

#include "persistence/pg_pool.hpp"
#include "persistence/redis_client.hpp"

#include <atomic>

namespace crm::http {

void add_health_routes(router& r, services& s) {
  r.add({verb::get,
         "/healthz",
         access::open,
         {},
         [](const exchange_ptr& ex) { ex->json(200, R"({"status":"ok"})"); },
         "Liveness: the process answers",
         "operations"});

  r.add({verb::get,
         "/readyz",
         access::open,
         {},
         [&s](const exchange_ptr& ex) {
           // Both checks run at once; the second to finish answers.
           struct state {
             std::atomic<int> pending{2};
             std::atomic<bool> pg_ok{false};
             std::atomic<bool> redis_ok{false};
           };
           auto st = std::make_shared<state>();
           auto finish = [ex, st] {
             if (--st->pending != 0) return;
             if (st->pg_ok && st->redis_ok) {
               ex->json(200, R"({"status":"ready"})");
               return;
             }
             std::string what = !st->pg_ok && !st->redis_ok ? "postgres and redis are"
                                : !st->pg_ok                ? "postgres is"
                                                            : "redis is";
             ex->fail(domain::failure::of(domain::errc::service_unavailable,
                                          what + std::string(" unreachable")));
           };
           s.pool.run<domain::done>(
               [](persistence::pg_conn& c) {
                 persistence::pg_ping(c);
                 return domain::done{};
               },
               [st, finish](domain::outcome<domain::done> r) {
                 st->pg_ok = static_cast<bool>(r);
                 finish();
               });
           s.redis.command({"PING"}, [st, finish](persistence::redis_reply r) {
             st->redis_ok = r.ok();
             finish();
           });
         },
         "Readiness: Postgres and Redis are reachable",
         "operations"});
}

} // namespace crm::http
