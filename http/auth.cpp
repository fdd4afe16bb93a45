#include "http/auth.hpp"

#include "domain/clock.hpp"
#include "domain/jwt.hpp"
#include "domain/revocation_list.hpp"

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
  auto r = domain::verify_jwt(token, secret, domain::now_seconds());
  if (!r.claims) {
    return unauthorized(r.error == domain::jwt_error::expired ? "token expired" : "invalid token");
  }
  auto& c = *r.claims;
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
