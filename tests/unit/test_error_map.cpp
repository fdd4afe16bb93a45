// The one mapping from errc to HTTP status and contract code (contract §2), as a table.
#include "http/error_map.hpp"
#include "http/exchange.hpp"

#include <gtest/gtest.h>

using crm::domain::errc;
using crm::http::describe;

TEST(error_map, maps_every_errc_to_the_contract_status_and_code) {
  struct row {
    errc e;
    int status;
    const char* code;
  };
  const row table[] = {
      {errc::invalid_credentials, 401, "INVALID_CREDENTIALS"},
      {errc::insufficient_permissions, 403, "INSUFFICIENT_PERMISSIONS"},
      {errc::not_found, 404, "NOT_FOUND"},
      {errc::method_not_allowed, 405, "METHOD_NOT_ALLOWED"},
      {errc::duplicate_email, 409, "DUPLICATE_EMAIL"},
      {errc::conflict, 409, "CONFLICT"},
      {errc::payload_too_large, 413, "PAYLOAD_TOO_LARGE"},
      {errc::validation, 422, ""},
      {errc::rate_limited, 429, "RATE_LIMITED"},
      {errc::service_unavailable, 503, "SERVICE_UNAVAILABLE"},
      {errc::internal, 500, "INTERNAL_ERROR"},
      {errc::second_factor_required, 401, "TOTP_REQUIRED"},
  };
  for (auto& r : table) {
    EXPECT_EQ(describe(r.e).status, r.status) << r.code;
    EXPECT_EQ(describe(r.e).code, r.code);
  }
  static_assert(describe(errc::not_found).status == 404, "usable at compile time");
}

TEST(error_map, unauthorized_responses_carry_www_authenticate) {
  auto r = crm::http::error_response(errc::invalid_credentials, "no");
  EXPECT_EQ(r.status, 401);
  bool found = false;
  for (auto& [k, v] : r.headers) found = found || (k == "WWW-Authenticate" && v == "Bearer");
  EXPECT_TRUE(found);
  EXPECT_EQ(r.body, R"({"detail":"no","code":"INVALID_CREDENTIALS"})");
}

TEST(error_map, rate_limited_responses_carry_retry_after) {
  auto f = crm::domain::failure::of(errc::rate_limited, "slow down");
  f.retry_after = 42;
  auto r = crm::http::error_response(f);
  EXPECT_EQ(r.status, 429);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
  EXPECT_EQ(r.headers[0].second, "42");
}

TEST(error_map, validation_failures_use_the_http_validation_error_shape) {
  auto f = crm::domain::failure::invalid(
      {{{"body", "email"}, "value is not a valid email address", "value_error.email"},
       {{"body", "tags", std::int64_t{2}},
        "String should have at most 50 characters",
        "string_too_long"}});
  auto r = crm::http::error_response(f);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body,
            R"({"detail":[{"loc":["body","email"],"msg":"value is not a valid email address",)"
            R"("type":"value_error.email"},{"loc":["body","tags",2],"msg":"String should have at )"
            R"(most 50 characters","type":"string_too_long"}]})");
}
