#include "http/auth.hpp"

#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/jwt.hpp"
#include "domain/revocation_list.hpp"
#include "domain/user.hpp"
#include "domain/validation.hpp"

#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/address_v6.hpp>

#include <memory_resource>
#include <string>
#include <unordered_map>

namespace crm::http {

std::optional<std::string_view> bearer_token(const request& req) {
  auto h = req.header("authorization");
  if (!h) return std::nullopt;
  auto v = *h;
  constexpr std::string_view scheme = "bearer ";
  if (v.size() <= scheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (static_cast<char>(std::tolower(static_cast<unsigned char>(v[i]))) != scheme[i])
      return std::nullopt;
  return v.substr(scheme.size());
}

std::optional<domain::failure> authenticate(const request& req, std::string_view secret,
                                            const domain::revocation_list& revoked,
                                            principal& who) {
  auto unauthorized = [](const char* why) {
    return domain::failure::of(domain::errc::invalid_credentials, why);
  };
  if (!req.header("authorization")) return unauthorized("not authenticated");
  auto bearer = bearer_token(req);
  if (!bearer) return unauthorized("invalid authentication scheme");
  auto token = *bearer;
  auto now = domain::now_seconds();
  // Clients send the same token for many requests: each thread remembers the access tokens it
  // verified (same secret), so a repeat costs a lookup instead of an HMAC, a base64 decode and
  // a JSON parse. Expiry and revocation are still checked on every request. The entries live
  // in a pool of the thread's own, not among the blocks of tenant records: scattered over the
  // heap they kept pages resident after tenants passivated (benchmarks/RESULTS.md).
  struct token_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view t) const { return std::hash<std::string_view>{}(t); }
  };
  struct cached {
    std::int64_t user_id = 0;
    std::int64_t tenant_id = 0;
    std::int64_t exp = 0;
    domain::role role = domain::role::viewer;
    std::pmr::string sid;
    bool enroll_only = false;
  };
  struct token_cache {
    std::pmr::unsynchronized_pool_resource pool;
    std::pmr::unordered_map<std::pmr::string, cached, token_hash, std::equal_to<>> verified{&pool};
    std::string secret;
  };
  thread_local token_cache cache;
  if (cache.secret != secret) {
    cache.verified.clear();
    cache.secret = std::string(secret);
  }
  const cached* found = nullptr;
  if (auto it = cache.verified.find(token); it != cache.verified.end()) {
    if (it->second.exp <= now) {
      cache.verified.erase(it);
      return unauthorized("token expired");
    }
    found = &it->second;
  } else {
    auto r = domain::verify_jwt(token, secret, now);
    if (!r.claims) {
      return unauthorized(r.error == domain::jwt_error::expired ? "token expired"
                                                                : "invalid token");
    }
    if (r.claims->typ != domain::token_type::access) return unauthorized("not an access token");
    auto role = domain::parse_role(r.claims->role);
    if (!role) return unauthorized("invalid token");
    if (cache.verified.size() >= 4096) cache.verified.clear();
    cached entry{r.claims->user_id,
                 r.claims->tenant_id,
                 r.claims->exp,
                 *role,
                 std::pmr::string(r.claims->sid, &cache.pool),
                 r.claims->scope == domain::enroll_scope};
    if (!r.claims->scope.empty() && !entry.enroll_only) return unauthorized("invalid token");
    found = &cache.verified.emplace(std::pmr::string(token, &cache.pool), std::move(entry))
                 .first->second;
  }
  auto& c = *found;
  if (revoked.is_revoked(c.sid)) return unauthorized("token revoked");
  who.user_id = c.user_id;
  who.tenant_id = c.tenant_id;
  who.role = c.role;
  who.sid.assign(c.sid.data(), c.sid.size());
  who.token_exp = c.exp;
  who.enroll_only = c.enroll_only;
  return std::nullopt;
}

namespace {

// An IPv4 address, or an IPv6 one in brackets, exactly as an IP literal is written in a Host.
bool ip_literal(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    boost::system::error_code ec;
    boost::asio::ip::make_address_v6(std::string(host.substr(1, host.size() - 2)), ec);
    return !ec;
  }
  boost::system::error_code ec;
  boost::asio::ip::make_address_v4(std::string(host), ec);
  return !ec;
}

bool host_allowed(const request& req, const operator_access& ops) {
  auto h = req.header("host");
  if (!h) return true; // HTTP/1.0 without Host: no browser sends that
  std::string_view host = *h;
  if (auto colon = host.rfind(':');
      colon != std::string_view::npos && host.find(']', colon) == std::string_view::npos)
    host = host.substr(0, colon);
  auto name = domain::ascii_lower(host);
  if (ip_literal(name) || name == "localhost") return true;
  for (auto& allowed : ops.hosts)
    if (domain::ascii_lower(allowed) == name) return true;
  return false;
}

} // namespace

std::optional<domain::failure> authorize_operator(const request& req, const operator_access& ops,
                                                  bool token_required) {
  if (!host_allowed(req, ops))
    return domain::failure::of(domain::errc::insufficient_permissions,
                               "this Host is not allowed on the operations listener");
  if (!token_required) return std::nullopt;
  if (ops.token.empty())
    return domain::failure::of(domain::errc::insufficient_permissions,
                               "operator routes are off: no metrics token is configured");
  auto h = req.header("authorization");
  constexpr std::string_view scheme = "Bearer ";
  if (!h || h->size() <= scheme.size() ||
      domain::ascii_lower(h->substr(0, scheme.size())) != "bearer " ||
      !domain::secrets_equal(h->substr(scheme.size()), ops.token))
    return domain::failure::of(domain::errc::invalid_credentials,
                               "missing or wrong operator token");
  return std::nullopt;
}

} // namespace crm::http
