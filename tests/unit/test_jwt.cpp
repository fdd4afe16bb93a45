// Unit tests for domain/jwt: what a bearer token must be before any request is served
// (contract §3). Hostile tokens are built by hand so each test controls every byte.
#include "domain/jwt.hpp"

#include "domain/crypto.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

using namespace crm::domain;
namespace json = boost::json;

namespace {

constexpr std::string_view secret = "test-secret-0123456789abcdef0123456789";
constexpr std::int64_t now = 1'795'256'130; // 2026-11-21T10:15:30Z

token_claims sample_claims(token_type typ = token_type::access) {
  token_claims c;
  c.user_id = 42;
  c.tenant_id = 7;
  c.role = "manager";
  c.typ = typ;
  c.sid = "session-abc";
  c.jti = "token-xyz";
  c.iat = now - 10;
  c.exp = c.iat + (typ == token_type::access ? access_token_seconds : refresh_token_seconds);
  return c;
}

json::object sample_payload() {
  return {{"sub", "42"},     {"tid", 7},          {"role", "manager"},
          {"typ", "access"}, {"sid", "sess-1"},   {"jti", "jti-1"},
          {"iat", now - 10}, {"exp", now + 1790}, {"iss", "carecrm"}};
}

// Signs any header and payload text with HS256, the way an attacker holding the key (or a test)
// would, without the checks sign_jwt has.
std::string hs256_token(std::string_view header, std::string_view payload,
                        std::string_view key = secret) {
  std::string token = base64url_encode(header) + "." + base64url_encode(payload);
  return token + "." + base64url_encode(as_bytes(hmac_sha256(key, token)));
}

std::string hs256_token(const json::object& payload) {
  return hs256_token(R"({"alg":"HS256","typ":"JWT"})", json::serialize(payload));
}

std::optional<jwt_error> error_of(std::string_view token, std::int64_t at = now) {
  const jwt_result r = verify_jwt(token, secret, at);
  if (r.claims) return std::nullopt;
  return r.error;
}

} // namespace

TEST(jwt, round_trips_every_access_claim) {
  const token_claims in = sample_claims();
  const jwt_result r = verify_jwt(sign_jwt(in, secret), secret, now);
  ASSERT_TRUE(r.claims);
  EXPECT_EQ(r.claims->user_id, in.user_id);
  EXPECT_EQ(r.claims->tenant_id, in.tenant_id);
  EXPECT_EQ(r.claims->role, in.role);
  EXPECT_EQ(r.claims->typ, token_type::access);
  EXPECT_EQ(r.claims->sid, in.sid);
  EXPECT_EQ(r.claims->jti, in.jti);
  EXPECT_EQ(r.claims->iat, in.iat);
  EXPECT_EQ(r.claims->exp, in.exp);
}

TEST(jwt, round_trips_refresh_type) {
  const jwt_result r =
      verify_jwt(sign_jwt(sample_claims(token_type::refresh), secret), secret, now);
  ASSERT_TRUE(r.claims);
  EXPECT_EQ(r.claims->typ, token_type::refresh);
  EXPECT_EQ(r.claims->exp - r.claims->iat, refresh_token_seconds);
}

TEST(jwt, signs_standard_header_and_contract_claims) {
  const std::string token = sign_jwt(sample_claims(), secret);
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = token.find('.', dot1 + 1);
  ASSERT_NE(dot2, std::string::npos);
  EXPECT_EQ(base64url_decode(token.substr(0, dot1)), R"({"alg":"HS256","typ":"JWT"})");
  const auto payload = base64url_decode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  ASSERT_TRUE(payload);
  const json::object p = json::parse(*payload).as_object();
  EXPECT_EQ(p.at("sub"), "42"); // a string, as the JWT spec wants
  EXPECT_EQ(p.at("tid"), 7);
  EXPECT_EQ(p.at("role"), "manager");
  EXPECT_EQ(p.at("typ"), "access");
  EXPECT_EQ(p.at("iss"), "carecrm");
  EXPECT_EQ(p.at("exp").as_int64() - p.at("iat").as_int64(), access_token_seconds);
  EXPECT_EQ(p.size(), 9U);
  // The signature is HMAC-SHA256 over the first two parts, 32 bytes.
  EXPECT_EQ(base64url_decode(token.substr(dot2 + 1)),
            std::string(as_bytes(hmac_sha256(secret, token.substr(0, dot2)))));
}

TEST(jwt, accepts_hand_built_hs256_token) {
  const jwt_result r = verify_jwt(hs256_token(sample_payload()), secret, now);
  ASSERT_TRUE(r.claims);
  EXPECT_EQ(r.claims->user_id, 42);
  EXPECT_EQ(r.claims->sid, "sess-1");
}

TEST(jwt, rejects_tampered_payload) {
  const std::string token = sign_jwt(sample_claims(), secret);
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = token.find('.', dot1 + 1);
  json::object p = sample_payload();
  p["role"] = "admin";
  const std::string forged =
      token.substr(0, dot1 + 1) + base64url_encode(json::serialize(p)) + token.substr(dot2);
  EXPECT_EQ(error_of(forged), jwt_error::bad_signature);
}

TEST(jwt, rejects_wrong_secret) {
  EXPECT_EQ(error_of(sign_jwt(sample_claims(), "another-secret")), jwt_error::bad_signature);
  EXPECT_EQ(error_of(hs256_token(R"({"alg":"HS256"})", json::serialize(sample_payload()), "")),
            jwt_error::bad_signature);
}

TEST(jwt, rejects_missing_or_truncated_signature) {
  const std::string token = sign_jwt(sample_claims(), secret);
  const std::string unsigned_token = token.substr(0, token.rfind('.') + 1);
  EXPECT_EQ(error_of(unsigned_token), jwt_error::bad_signature);
  const sha256_digest full =
      hmac_sha256(secret, unsigned_token.substr(0, unsigned_token.size() - 1));
  const std::string half = unsigned_token + base64url_encode(as_bytes(full).substr(0, 16));
  EXPECT_EQ(error_of(half), jwt_error::bad_signature);
}

TEST(jwt, rejects_every_single_character_change) {
  const std::string token = sign_jwt(sample_claims(), secret);
  for (std::size_t i = 0; i < token.size(); ++i) {
    for (const char replacement : {'A', 'B', '.', '-', '_', '='}) {
      if (token[i] == replacement) continue;
      std::string mutated = token;
      mutated[i] = replacement;
      EXPECT_FALSE(verify_jwt(mutated, secret, now).claims) << i << " -> " << replacement;
    }
  }
}

TEST(jwt, rejects_alg_none) {
  const std::string payload = json::serialize(sample_payload());
  const std::string none =
      base64url_encode(R"({"alg":"none","typ":"JWT"})") + "." + base64url_encode(payload) + ".";
  EXPECT_EQ(error_of(none), jwt_error::bad_algorithm);
  // Even with a signature that would be valid for HS256.
  EXPECT_EQ(error_of(hs256_token(R"({"alg":"none","typ":"JWT"})", payload)),
            jwt_error::bad_algorithm);
}

TEST(jwt, rejects_hs512_header_even_with_valid_hs256_signature) {
  const std::string payload = json::serialize(sample_payload());
  EXPECT_EQ(error_of(hs256_token(R"({"alg":"HS512","typ":"JWT"})", payload)),
            jwt_error::bad_algorithm);
}

TEST(jwt, rejects_every_other_algorithm_spelling) {
  const std::string payload = json::serialize(sample_payload());
  for (const char* header :
       {R"({"alg":"RS256"})", R"({"alg":"hs256"})", R"({"alg":"HS256 "})", R"({"alg":"NONE"})",
        R"({"alg":""})", R"({"alg":null})", R"({"alg":256})", R"({"alg":["HS256"]})",
        R"({"typ":"JWT"})", R"({})"}) {
    EXPECT_EQ(error_of(hs256_token(header, payload)), jwt_error::bad_algorithm) << header;
  }
}

TEST(jwt, rejects_header_that_is_not_a_json_object) {
  const std::string payload = json::serialize(sample_payload());
  for (const char* header : {"", "HS256", R"(["HS256"])", R"("HS256")", R"({"alg":"HS256")",
                             R"({"alg":"HS256"} x)", "null"}) {
    EXPECT_EQ(error_of(hs256_token(header, payload)), jwt_error::malformed) << header;
  }
}

TEST(jwt, rejects_expired_token) {
  const token_claims c = sample_claims();
  const std::string token = sign_jwt(c, secret);
  EXPECT_TRUE(verify_jwt(token, secret, c.exp - 1).claims);
  EXPECT_EQ(error_of(token, c.exp), jwt_error::expired); // exp itself is already too late
  EXPECT_EQ(error_of(token, c.exp + 1), jwt_error::expired);
}

TEST(jwt, rejects_wrong_issuer) {
  json::object p = sample_payload();
  p["iss"] = "someone-else";
  EXPECT_EQ(error_of(hs256_token(p)), jwt_error::wrong_issuer);
  p["iss"] = "CareCRM";
  EXPECT_EQ(error_of(hs256_token(p)), jwt_error::wrong_issuer);
}

TEST(jwt, checks_issuer_before_expiry) {
  json::object p = sample_payload();
  p["iss"] = "someone-else";
  p["exp"] = now - 1;
  EXPECT_EQ(error_of(hs256_token(p)), jwt_error::wrong_issuer);
}

TEST(jwt, rejects_each_missing_claim) {
  for (const char* claim : {"sub", "tid", "role", "typ", "sid", "jti", "iat", "iss"}) {
    json::object p = sample_payload();
    p.erase(claim);
    EXPECT_EQ(error_of(hs256_token(p)), jwt_error::malformed) << claim;
  }
}

TEST(jwt, treats_missing_exp_as_expired) {
  json::object p = sample_payload();
  p.erase("exp");
  EXPECT_EQ(error_of(hs256_token(p)), jwt_error::expired);
}

TEST(jwt, rejects_mistyped_claims) {
  const std::vector<std::pair<const char*, json::value>> cases = {
      {"sub", 42},
      {"sub", nullptr},
      {"tid", "7"},
      {"tid", 7.0},
      {"tid", nullptr},
      {"role", 3},
      {"typ", "id"},
      {"typ", "ACCESS"},
      {"typ", 1},
      {"sid", 1},
      {"jti", json::array{}},
      {"iat", "0"},
      {"iat", 1.5},
      {"exp", "9999999999"},
      {"exp", 1.0e10},
      {"iss", 1},
      {"exp", 18446744073709551615ULL},
  };
  for (const auto& [claim, value] : cases) {
    json::object p = sample_payload();
    p[claim] = value;
    EXPECT_EQ(error_of(hs256_token(p)), jwt_error::malformed) << claim << " = " << value;
  }
}

TEST(jwt, rejects_sub_that_is_not_a_positive_decimal) {
  for (const char* sub : {"", "abc", "12x", "x12", "-5", "0", "+1", " 1", "1 ", "1.0", "1e3",
                          "0x10", "9223372036854775808", "99999999999999999999"}) {
    json::object p = sample_payload();
    p["sub"] = sub;
    EXPECT_EQ(error_of(hs256_token(p)), jwt_error::malformed) << '"' << sub << '"';
  }
  json::object p = sample_payload();
  p["sub"] = "9223372036854775807";
  const jwt_result r = verify_jwt(hs256_token(p), secret, now);
  ASSERT_TRUE(r.claims);
  EXPECT_EQ(r.claims->user_id, INT64_MAX);
}

TEST(jwt, rejects_payload_that_is_not_a_json_object) {
  for (const char* payload : {"", "[]", "42", R"("sub")", "{", R"({"sub":"42",})", "{}x"}) {
    EXPECT_EQ(error_of(hs256_token(R"({"alg":"HS256"})", payload)), jwt_error::malformed)
        << payload;
  }
}

TEST(jwt, rejects_two_or_four_parts) {
  const std::string token = sign_jwt(sample_claims(), secret);
  EXPECT_EQ(error_of(token.substr(0, token.rfind('.'))), jwt_error::malformed);
  EXPECT_EQ(error_of(token + "."), jwt_error::malformed);
  EXPECT_EQ(error_of(token + ".AAAA"), jwt_error::malformed);
  EXPECT_EQ(error_of(token.substr(0, token.find('.'))), jwt_error::malformed);
}

TEST(jwt, rejects_parts_that_are_not_base64url) {
  const std::string token = sign_jwt(sample_claims(), secret);
  EXPECT_EQ(error_of(token + "="), jwt_error::malformed);
  EXPECT_EQ(error_of("!" + token), jwt_error::malformed);
  EXPECT_EQ(error_of(std::string(token).insert(token.find('.') + 1, "+")), jwt_error::malformed);
  EXPECT_EQ(error_of("Bearer " + token), jwt_error::malformed);
}

TEST(jwt, rejects_garbage_without_throwing) {
  EXPECT_EQ(error_of(""), jwt_error::malformed);
  EXPECT_EQ(error_of("."), jwt_error::malformed);
  EXPECT_EQ(error_of(".."), jwt_error::malformed);
  EXPECT_EQ(error_of("a.b.c"), jwt_error::malformed);
  EXPECT_EQ(error_of("not a token"), jwt_error::malformed);
  EXPECT_EQ(error_of(std::string_view("\0.\0.\0", 5)), jwt_error::malformed);
  EXPECT_EQ(error_of(std::string(10'000, '.')), jwt_error::malformed);
  // Deterministic pseudo-random bytes (a fixed LCG), with dots sprinkled in.
  std::uint32_t state = 12345;
  for (int i = 0; i < 2000; ++i) {
    std::string junk;
    const std::size_t length = state % 200;
    for (std::size_t j = 0; j < length; ++j) {
      state = state * 1'103'515'245U + 12'345U;
      junk.push_back((state >> 24) % 16 == 0 ? '.' : static_cast<char>(state >> 16));
    }
    state = state * 1'103'515'245U + 12'345U;
    EXPECT_NO_THROW(EXPECT_FALSE(verify_jwt(junk, secret, now).claims));
  }
}

TEST(jwt, survives_deeply_nested_json) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_EQ(error_of(hs256_token(deep, json::serialize(sample_payload()))), jwt_error::malformed);
  EXPECT_EQ(error_of(hs256_token(R"({"alg":"HS256"})", deep)), jwt_error::malformed);
}
