// Micro-benchmarks of the hot pieces of a request: route matching, access-token verification,
// and JSON encoding. Run by benchmarks/run; compare ratios within one run.
#include "domain/clock.hpp"
#include "domain/jwt.hpp"
#include "http/json.hpp"
#include "http/router.hpp"

#include <benchmark/benchmark.h>

namespace {

using namespace crm;

http::router sample_router() {
  http::router r;
  auto noop = [](const http::exchange_ptr&) {};
  for (auto p :
       {"/api/v1/auth/login", "/api/v1/auth/refresh", "/api/v1/auth/me", "/api/v1/users",
        "/api/v1/users/{id}", "/api/v1/contacts", "/api/v1/contacts/{id}",
        "/api/v1/contacts/{id}/tags", "/api/v1/contacts/{id}/tags/{tag}", "/api/v1/companies/{id}",
        "/api/v1/fields/{entity}/custom/{field_id}", "/api/v1/workflows/{id}/runs"})
    r.add({http::verb::get, p, http::access::open, {}, noop, "", ""});
  return r;
}

void router_match(benchmark::State& state) {
  auto r = sample_router();
  for (auto _ : state) {
    auto m = r.match(http::verb::get, "/api/v1/contacts/123456/tags/vip");
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(router_match);

void jwt_verify(benchmark::State& state) {
  domain::token_claims c;
  c.user_id = 42;
  c.tenant_id = 7;
  c.role = "admin";
  c.sid = "session-id-0123456789";
  c.jti = "token-id-0123456789";
  c.iat = domain::now_seconds();
  c.exp = c.iat + 1800;
  std::string secret(48, 'k');
  auto token = domain::sign_jwt(c, secret);
  for (auto _ : state) {
    auto v = domain::verify_jwt(token, secret, c.iat);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(jwt_verify);

void json_encode_user_page(benchmark::State& state) {
  domain::page<domain::user> p;
  for (int i = 0; i < 20; ++i) {
    domain::user u;
    u.id = 1000 + i;
    u.tenant_id = 7;
    u.email = "user" + std::to_string(i) + "@clinic.example";
    u.full_name = "Dr. Someone Number " + std::to_string(i);
    u.created_at = domain::now_micros();
    p.items.push_back(u);
  }
  p.total = 500;
  for (auto _ : state) {
    auto s = http::encode_user_page(p);
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(json_encode_user_page);

} // namespace

BENCHMARK_MAIN();
