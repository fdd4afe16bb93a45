#include "http/auth.hpp"

#include "domain/clock.hpp"
#include "domain/jwt.hpp"
#include "domain/revocation_list.hpp"

#include <string>
#include <unordered_map>

namespace crm::http {

std::optional<domain::failure> authenticate(const request& req, std::string_view secret,
                                            const domain::revocation_list& revoked,
                                            principal& who) {
  auto unauthorized = [](const char* why) {
    return domain::failure::of(domain::errc::invalid_credentials, why);
  };
  auto h = req.header("authorization");
  if (!h) return unauthorized("not authenticated");
  auto v = *h;
  constexpr std::string_view scheme = "bearer ";
  if (v.size() <= scheme.size()) return unauthorized("invalid authentication scheme");
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (static_cast<char>(std::tolower(static_cast<unsigned char>(v[i]))) != scheme[i])
      return unauthorized("invalid authentication scheme");
  auto token = v.substr(scheme.size());
  auto now = domain::now_seconds();
  // Clients send the same token for many requests: each thread remembers the claims of the
  // tokens it verified (same secret), so a repeat costs a lookup instead of an HMAC, a base64
  // decode and a JSON parse. Expiry and revocation are still checked on every request.
  struct token_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view t) const { return std::hash<std::string_view>{}(t); }
  };
  thread_local std::unordered_map<std::string, domain::token_claims, token_hash, std::equal_to<>>
      verified;
  thread_local std::string cached_secret;
  if (cached_secret != secret) {
    verified.clear();
    cached_secret = std::string(secret);
  }
  const domain::token_claims* found = nullptr;
  if (auto it = verified.find(token); it != verified.end()) {
    if (it->second.exp <= now) {
      verified.erase(it);
      return unauthorized("token expired");
    }
    found = &it->second;
  } else {
    auto r = domain::verify_jwt(token, secret, now);
    if (!r.claims) {
      return unauthorized(r.error == domain::jwt_error::expired ? "token expired"
                                                                : "invalid token");
    }
    if (verified.size() >= 4096) verified.clear();
    found = &verified.emplace(std::string(token), std::move(*r.claims)).first->second;
  }
  auto& c = *found;
  if (c.typ != domain::token_type::access) return unauthorized("not an access token");
  auto role = domain::parse_role(c.role);
  if (!role) return unauthorized("invalid token");
  if (revoked.is_revoked(c.sid)) return unauthorized("token revoked");
  who.user_id = c.user_id;
  who.tenant_id = c.tenant_id;
  who.role = *role;
  who.sid = c.sid;
  who.token_exp = c.exp;
  return std::nullopt;
}

} // namespace crm::http
