// Micro-benchmarks of the hot pieces of a request: route matching, access-token verification,
// and JSON encoding. Run by benchmarks/run; compare ratios within one run.
#include "domain/audit.hpp"
#include "domain/clock.hpp"
#include "domain/contact_json.hpp"
#include "domain/contact_merge.hpp"
#include "domain/contact_store.hpp"
#include "domain/crypto.hpp"
#include "domain/jwt.hpp"
#include "domain/schedule.hpp"
#include "http/json.hpp"
#include "http/router.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
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

// GET /contacts/duplicates computes the pairs over the whole tenant in the contacts actor.
void find_duplicates_100k(benchmark::State& state) {
  auto store = sample_store(100000);
  std::vector<const domain::contact*> all;
  store.for_each(domain::contact_query{}, [&](const domain::contact& c) { all.push_back(&c); });
  for (auto _ : state) benchmark::DoNotOptimize(domain::find_duplicates(all));
}
BENCHMARK(find_duplicates_100k)->Unit(benchmark::kMillisecond);

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

// Free slots of one service over 7 days on a calendar holding 500 live appointments (issue 33:
// p99 ≤ 2 ms in process). The calendar is open 08:00-18:00 every day in São Paulo on a 15-minute
// grid; the service takes 30 minutes plus a 10-minute buffer; appointments start every 90
// minutes from 08:00 on the days from the window's start until 500 are booked (72 days; the
// window holds 49 of them). Counters: p50 and p99 of single calls, in µs, and the slots found.
void schedule_availability_7_days_500_booked(benchmark::State& state) {
  using namespace domain;
  constexpr std::int64_t minute = 60'000'000;
  schedule_store s;
  calendar c;
  c.id = 1;
  c.name = "Dra. Ana";
  c.time_zone = "America/Sao_Paulo";
  for (auto& d : c.hours) d.push_back({8 * 60, 18 * 60});
  c.slot_step = 15;
  s.put(c);
  service v;
  v.id = 5;
  v.name = "Check-up";
  v.duration = 30;
  v.buffer = 10;
  v.calendar_ids = {1};
  s.put(v);
  const std::int64_t from = *parse_rfc3339("2030-01-07T03:00:00Z"); // Monday 00:00 local
  std::int64_t booked = 0;
  for (std::int64_t day = 0; booked < 500; ++day)
    for (std::int64_t h = 8 * 60; h + 40 <= 18 * 60 && booked < 500; h += 90) {
      booking b{9, 5, 1, from + (day * 1440 + h) * minute, "", appointment_source::staff};
      auto a = s.plan_book(b, 1, 0);
      if (!a) continue;
      a->id = ++booked;
      s.put(*a);
    }
  std::vector<double> us;
  us.reserve(1 << 16);
  std::size_t slots = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = s.availability(5, from, from + 7 * 1440 * minute, std::nullopt, 0);
    auto t1 = std::chrono::steady_clock::now();
    slots = r ? r->size() : 0;
    benchmark::DoNotOptimize(r);
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) { return us.empty() ? 0.0 : us[std::size_t(p * (us.size() - 1))]; };
  state.counters["p50_us"] = pct(0.50);
  state.counters["p99_us"] = pct(0.99);
  state.counters["slots"] = static_cast<double>(slots);
  state.counters["appointments"] = static_cast<double>(booked);
}
BENCHMARK(schedule_availability_7_days_500_booked)->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
