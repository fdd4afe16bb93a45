// Signing and verification of the HS256 tokens of contract §3. Verification treats the token as
// hostile input: it never throws, and it trusts nothing in it before the signature is checked.
#include "domain/jwt.hpp"

#include "domain/crypto.hpp"
#include "domain/json_parse.hpp"

#include <array>
#include <charconv>

#include <boost/json.hpp>

namespace crm::domain {

namespace {

namespace json = boost::json;

constexpr std::string_view issuer = "carecrm";
constexpr std::string_view header_json = R"({"alg":"HS256","typ":"JWT"})";

std::string_view to_string(token_type t) {
  return t == token_type::refresh ? "refresh" : "access";
}

std::optional<token_type> parse_token_type(std::string_view s) {
  if (s == "access") {
    return token_type::access;
  }
  if (s == "refresh") {
    return token_type::refresh;
  }
  return std::nullopt;
}

// `sub` carries the user id as a decimal string: digits only, positive, within int64.
std::optional<std::int64_t> parse_user_id(std::string_view s) {
  if (s.empty() || s.front() < '0' || s.front() > '9') {
    return std::nullopt;
  }
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v <= 0) {
    return std::nullopt;
  }
  return v;
}

// Splits `a.b.c` into exactly three parts.
std::optional<std::array<std::string_view, 3>> split_parts(std::string_view token) {
  const std::size_t first = token.find('.');
  if (first == std::string_view::npos) {
    return std::nullopt;
  }
  const std::size_t second = token.find('.', first + 1);
  if (second == std::string_view::npos) {
    return std::nullopt;
  }
  if (token.find('.', second + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  return std::array<std::string_view, 3>{token.substr(0, first),
                                         token.substr(first + 1, second - first - 1),
                                         token.substr(second + 1)};
}

std::optional<json::object> parse_object(std::string_view text) {
  json::error_code ec;
  json::value v = crm::domain::parse_json(text, ec);
  if (ec || !v.is_object()) {
    return std::nullopt;
  }
  return std::move(v.as_object());
}

const json::string* string_claim(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v == nullptr ? nullptr : v->if_string();
}

const std::int64_t* int_claim(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v == nullptr ? nullptr : v->if_int64();
}

jwt_result fail(jwt_error e) {
  return {std::nullopt, e};
}

jwt_result verify(std::string_view token, std::string_view secret, std::int64_t now) {
  const auto parts = split_parts(token);
  if (!parts) {
    return fail(jwt_error::malformed);
  }
  const auto header_text = base64url_decode((*parts)[0]);
  const auto payload_text = base64url_decode((*parts)[1]);
  const auto signature = base64url_decode((*parts)[2]);
  if (!header_text || !payload_text || !signature) {
    return fail(jwt_error::malformed);
  }

  const auto header = parse_object(*header_text);
  if (!header) {
    return fail(jwt_error::malformed);
  }
  // Exactly HS256: anything else ("none", "HS512", "RS256", "hs256", missing, not a string) is
  // how algorithm-confusion attacks start.
  const json::string* alg = string_claim(*header, "alg");
  if (alg == nullptr || *alg != "HS256") {
    return fail(jwt_error::bad_algorithm);
  }

  const std::size_t signed_length = (*parts)[0].size() + 1 + (*parts)[1].size();
  const sha256_digest expected = hmac_sha256(secret, token.substr(0, signed_length));
  if (!constant_time_equal(as_bytes(expected), *signature)) {
    return fail(jwt_error::bad_signature);
  }

  const auto payload = parse_object(*payload_text);
  if (!payload) {
    return fail(jwt_error::malformed);
  }
  const json::string* sub = string_claim(*payload, "sub");
  const std::int64_t* tid = int_claim(*payload, "tid");
  const json::string* role = string_claim(*payload, "role");
  const json::string* typ = string_claim(*payload, "typ");
  const json::string* sid = string_claim(*payload, "sid");
  const json::string* jti = string_claim(*payload, "jti");
  const std::int64_t* iat = int_claim(*payload, "iat");
  const json::string* iss = string_claim(*payload, "iss");
  const json::value* scp = payload->if_contains("scp");
  if (scp != nullptr && !scp->is_string()) {
    return fail(jwt_error::malformed);
  }
  if (sub == nullptr || tid == nullptr || role == nullptr || typ == nullptr || sid == nullptr ||
      jti == nullptr || iat == nullptr || iss == nullptr) {
    return fail(jwt_error::malformed);
  }
  const auto user_id = parse_user_id(*sub);
  const auto type = parse_token_type(*typ);
  if (!user_id || !type) {
    return fail(jwt_error::malformed);
  }
  // A missing `exp` counts as expired (jwt.hpp); one of the wrong type is malformed.
  const json::value* exp_value = payload->if_contains("exp");
  if (exp_value != nullptr && !exp_value->is_int64()) {
    return fail(jwt_error::malformed);
  }

  if (*iss != issuer) {
    return fail(jwt_error::wrong_issuer);
  }
  if (exp_value == nullptr || exp_value->get_int64() <= now) {
    return fail(jwt_error::expired);
  }

  token_claims claims;
  claims.user_id = *user_id;
  claims.tenant_id = *tid;
  claims.role = std::string(role->subview());
  claims.typ = *type;
  claims.sid = std::string(sid->subview());
  claims.jti = std::string(jti->subview());
  claims.iat = *iat;
  claims.exp = exp_value->get_int64();
  if (scp != nullptr) claims.scope = std::string(scp->get_string().subview());
  return {std::move(claims), jwt_error::malformed};
}

} // namespace

std::string sign_jwt(const token_claims& claims, std::string_view secret) {
  json::object payload;
  payload["sub"] = std::to_string(claims.user_id);
  payload["tid"] = claims.tenant_id;
  payload["role"] = claims.role;
  payload["typ"] = to_string(claims.typ);
  payload["sid"] = claims.sid;
  payload["jti"] = claims.jti;
  payload["iat"] = claims.iat;
  payload["exp"] = claims.exp;
  payload["iss"] = issuer;
  if (!claims.scope.empty()) payload["scp"] = claims.scope;

  std::string token = base64url_encode(header_json);
  token.push_back('.');
  token += base64url_encode(json::serialize(payload));
  const sha256_digest signature = hmac_sha256(secret, token);
  token.push_back('.');
  token += base64url_encode(as_bytes(signature));
  return token;
}

jwt_result verify_jwt(std::string_view token, std::string_view secret, std::int64_t now_seconds) {
  // Untrusted input must never take the request down: any surprise (even bad_alloc) is a
  // malformed token, which the caller answers with 401.
  try {
    return verify(token, secret, now_seconds);
  } catch (...) {
    return fail(jwt_error::malformed);
  }
}

} // namespace crm::domain
