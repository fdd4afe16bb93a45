// The API's rate limits (contract §9, docs/operations.md): token buckets per user and per
// tenant for authenticated requests, per source address for the others (login, inbound
// webhooks, the rest), and the IETF RateLimit-Policy / RateLimit headers every API response
// carries. Over a limit: 429 RATE_LIMITED with Retry-After.
#pragma once
#include "domain/failure.hpp"
#include "domain/rate_limit.hpp"
#include "http/router.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crm::http {

struct principal;

// Requests per minute for each policy; 0 turns a policy off.
struct rate_quotas {
  double user = 6000, tenant = 30000, login = 600, webhook = 12000, address = 6000;
};

class rate_limits {
public:
  explicit rate_limits(const rate_quotas& q);

  struct verdict {
    std::vector<std::pair<std::string, std::string>> headers; // RateLimit-Policy, RateLimit
    std::optional<domain::failure> refused;                   // 429 with retry_after
  };
  // Charges one request of class `c` (`who` for user routes, `remote` for the others) and says
  // what to answer. A user route's request charges the user's bucket, then the tenant's.
  verdict charge(rate_class c, const principal* who, std::string_view remote);

private:
  domain::rate_limiter user_, tenant_, login_, webhook_, address_;
};

} // namespace crm::http
