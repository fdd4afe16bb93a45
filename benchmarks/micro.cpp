// Micro-benchmarks of the hot pieces of a request: route matching, access-token verification,
// and JSON encoding. Run by benchmarks/run; compare ratios within one run.
#include "domain/audit.hpp"
#include "domain/clock.hpp"
#include "domain/contact_json.hpp"
#include "domain/contact_store.hpp"
#include "domain/crypto.hpp"
#include "domain/jwt.hpp"
#include "http/json.hpp"
#include "http/router.hpp"

#include <benchmark/benchmark.h>

#include <vector>

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

domain::contact_store sample_store(int n) {
  static const char* first[] = {"Anna", "Marie", "Jonas", "Lukas", "Sofia", "Mia", "Leon", "Noah"};
  static const char* last[] = {"Smith", "Nguyen", "Lee", "Berg", "Johansson", "Schmidt", "Kim"};
  domain::contact_store store;
  for (int i = 1; i <= n; ++i) {
    domain::contact c;
    c.id = i;
    c.first_name = first[i % 8];
    c.last_name = std::string(last[(i / 8) % 7]);
    c.email = "c" + std::to_string(i) + "@example.org";
    c.phone = "+4930" + std::to_string(1000000 + i);
    c.tags = {"vip"};
    c.created_at = c.updated_at = 1'700'000'000'000'000 + i;
    store.upsert(std::move(c));
  }
  return store;
}

// A tenant's load fills its store one contact at a time (the cold tenant's first request).
void store_fill_10k(benchmark::State& state) {
  const auto filled = sample_store(10000);
  std::vector<domain::contact> contacts;
  for (std::int64_t id = 1; id <= 10000; ++id) contacts.push_back(*filled.find(id));
  for (auto _ : state) {
    domain::contact_store store;
    for (const auto& c : contacts) store.upsert(c);
    benchmark::DoNotOptimize(store.size());
  }
}
BENCHMARK(store_fill_10k)->Unit(benchmark::kMillisecond);

void store_page_by_id(benchmark::State& state) {
  auto store = sample_store(10000);
  domain::contact_query q;
  q.offset = 4000;
  for (auto _ : state) benchmark::DoNotOptimize(store.list(q));
}
BENCHMARK(store_page_by_id);

void store_page_by_last_name_desc(benchmark::State& state) {
  auto store = sample_store(10000);
  domain::contact_query q;
  q.sort = domain::contact_sort::last_name;
  q.descending = true;
  q.offset = 2000;
  for (auto _ : state) benchmark::DoNotOptimize(store.list(q));
}
BENCHMARK(store_page_by_last_name_desc);

void store_search(benchmark::State& state) {
  auto store = sample_store(10000);
  domain::contact_query q;
  q.search = "berg";
  for (auto _ : state) benchmark::DoNotOptimize(store.list(q));
}
BENCHMARK(store_search);

void json_encode_contact_page(benchmark::State& state) {
  auto store = sample_store(100);
  domain::contact_query q;
  auto page = store.list(q);
  for (auto _ : state)
    benchmark::DoNotOptimize(domain::encode_contact_page(page.items, 100, 1, 20));
}
BENCHMARK(json_encode_contact_page);

// The ids a list read records in the audit trail, read back from the rendered page of 20.
void audit_list_ids_contact_page(benchmark::State& state) {
  auto store = sample_store(100);
  domain::contact_query q;
  auto body = domain::encode_contact_page(store.list(q).items, 100, 1, 20);
  for (auto _ : state) benchmark::DoNotOptimize(domain::list_ids(body, "items"));
}
BENCHMARK(audit_list_ids_contact_page);

void json_encode_contact_full(benchmark::State& state) {
  auto store = sample_store(1);
  auto c = *store.find(1);
  for (auto _ : state) benchmark::DoNotOptimize(domain::encode_contact_full(c, nullptr));
}
BENCHMARK(json_encode_contact_full);

// One Argon2id verification: the unit of login cost.
void password_verify(benchmark::State& state) {
  domain::init_crypto();
  auto hash = domain::hash_password("correct horse battery staple");
  for (auto _ : state)
    benchmark::DoNotOptimize(domain::verify_password(hash, "correct horse battery staple"));
}
BENCHMARK(password_verify)->Unit(benchmark::kMillisecond)->Iterations(10);

} // namespace

BENCHMARK_MAIN();
