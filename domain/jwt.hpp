// HS256 JSON Web Tokens as contract §3 defines them. Only HS256 is accepted.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace crm::domain {

enum class token_type : std::uint8_t { access, refresh };

inline constexpr std::int64_t access_token_seconds = 1800;
inline constexpr std::int64_t refresh_token_seconds = 604800;

struct token_claims {
  std::int64_t user_id = 0;   // `sub`, a decimal string in the token
  std::int64_t tenant_id = 0; // `tid`
  std::string role;           // `role`
  token_type typ = token_type::access;
  std::string sid; // session id
  std::string jti; // token id
  std::int64_t iat = 0;
  std::int64_t exp = 0;
  // `scp`, only when not empty: "enroll" for a session that may only set up two-factor
  // sign-in (its tenant requires it and the user has none yet).
  std::string scope;
};
inline constexpr std::string_view enroll_scope = "enroll";

// Header {"alg":"HS256","typ":"JWT"}, payload with every claim plus `iss` = "carecrm".
std::string sign_jwt(const token_claims& claims, std::string_view secret);

enum class jwt_error : std::uint8_t {
  malformed,     // not three base64url parts, not JSON, missing or mistyped claims
  bad_algorithm, // header alg is not exactly "HS256" (including "none")
  bad_signature,
  expired, // exp <= now, or exp missing
  wrong_issuer,
};

struct jwt_result {
  std::optional<token_claims> claims;
  jwt_error error = jwt_error::malformed;
};

// Verifies structure, algorithm, signature (constant time), `iss`, `exp` > now, and that every
// claim is present with the right JSON type. The caller checks `typ` and revocation.
jwt_result verify_jwt(std::string_view token, std::string_view secret, std::int64_t now_seconds);

} // namespace crm::domain
