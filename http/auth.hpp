// Authentication of bearer access tokens (contract §3): verified signature and claims, type
// `access`, session not revoked. Runs on the asio thread before any handler, with no I/O.
#pragma once
#include "domain/failure.hpp"
#include "http/exchange.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {
class revocation_list;
}

namespace crm::http {

// The token of an `Authorization: Bearer <token>` header (scheme in any case), if there is one.
std::optional<std::string_view> bearer_token(const request& req);

// Fills `who` from the Authorization header (a JWT access token), or returns the 401 failure.
std::optional<domain::failure> authenticate(const request& req, std::string_view secret,
                                            const domain::revocation_list& revoked, principal& who);

// The operations listener's guard (`--metrics-token`, `--metrics-require-token`,
// `--metrics-hosts`).
struct operator_access {
  std::string token;               // empty: operator routes are refused
  bool metrics_need_token = false; // /metrics asks for the token too
  std::vector<std::string> hosts;  // Host names allowed besides IP literals and localhost
};

// A request to an operations route: 403 for a Host that is not an IP literal, localhost or
// one of `hosts` (a DNS-rebinding page in a browser names the attacker's host), 403 when no
// token is configured, 401 without the right `Authorization: Bearer <token>`. The token is
// asked for when `token_required`.
std::optional<domain::failure> authorize_operator(const request& req, const operator_access& ops,
                                                  bool token_required);

} // namespace crm::http
