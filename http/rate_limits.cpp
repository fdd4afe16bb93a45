#include "http/rate_limits.hpp"

#include "http/exchange.hpp"

#include <chrono>

namespace crm::http {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One item of the RateLimit-Policy field: "name";q=600;w=60
void append_policy(std::string& out, const domain::rate_policy& p) {
  if (!out.empty()) out += ", ";
  out += '"' + p.name + "\";q=" + std::to_string(static_cast<long long>(p.quota)) +
         ";w=" + std::to_string(static_cast<long long>(p.window));
}

} // namespace

rate_limits::rate_limits(const rate_quotas& q)
    : user_({"user", q.user, 60}), tenant_({"tenant", q.tenant, 60}),
      login_({"login", q.login, 60}), webhook_({"webhook", q.webhook, 60}),
      address_({"address", q.address, 60}) {}

rate_limits::verdict rate_limits::charge(rate_class c, const principal* who,
                                         std::string_view remote) {
  verdict v;
  if (c == rate_class::none) return v;
  const double now = now_seconds();
  // The policies this request counts against, with their keys.
  std::pair<domain::rate_limiter*, std::string> charged[2];
  int n = 0;
  if (c == rate_class::user && who) {
    // An API key has a bucket of its own, as a user does.
    charged[n++] = {&user_, who->api_key_id ? "k" + std::to_string(who->api_key_id)
                                            : std::to_string(who->user_id)};
    charged[n++] = {&tenant_, std::to_string(who->tenant_id)};
  } else {
    auto* l = c == rate_class::login ? &login_ : c == rate_class::webhook ? &webhook_ : &address_;
    charged[n++] = {l, std::string(remote)};
  }
  std::string policies, current;
  double tightest = 2;
  for (int i = 0; i < n; ++i) {
    auto& [limiter, key] = charged[i];
    if (!limiter->enabled()) continue;
    append_policy(policies, limiter->policy());
    // A request refused by the user's bucket does not spend the tenant's.
    if (v.refused) continue;
    auto d = limiter->take(key, now);
    // RateLimit names the policy closest to running out.
    double left = static_cast<double>(d.remaining) / limiter->policy().quota;
    if (!d.allowed || left < tightest) {
      tightest = d.allowed ? left : -1;
      current = '"' + limiter->policy().name + "\";r=" + std::to_string(d.remaining) +
                ";t=" + std::to_string(d.reset);
    }
    if (!d.allowed) {
      auto f = domain::failure::of(domain::errc::rate_limited,
                                   "rate limit of the " + limiter->policy().name +
                                       " policy reached, retry after " +
                                       std::to_string(d.retry_after) + " s");
      f.retry_after = static_cast<int>(d.retry_after);
      v.refused = std::move(f);
    }
  }
  if (!policies.empty()) {
    v.headers.emplace_back("RateLimit-Policy", std::move(policies));
    v.headers.emplace_back("RateLimit", std::move(current));
  }
  return v;
}

} // namespace crm::http
