// Two-factor codes (domain/totp.hpp) against the test vectors of RFC 4226 and RFC 6238.
#include "domain/totp.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace totp = crm::domain::totp;

namespace {
const std::string rfc_key = "12345678901234567890";
}

TEST(Totp, HotpMatchesRfc4226AppendixD) {
  const char* expected[] = {"755224", "287082", "359152", "969429", "338314",
                            "254676", "287922", "162583", "399871", "520489"};
  for (std::uint64_t i = 0; i < 10; ++i) EXPECT_EQ(totp::hotp(rfc_key, i), expected[i]) << i;
}

TEST(Totp, TotpMatchesRfc6238AppendixBForSha1) {
  struct vec {
    std::int64_t t;
    const char* code;
  };
  for (auto v :
       {vec{59, "94287082"}, vec{1111111109, "07081804"}, vec{1111111111, "14050471"},
        vec{1234567890, "89005924"}, vec{2000000000, "69279037"}, vec{20000000000, "65353130"}})
    EXPECT_EQ(totp::hotp(rfc_key, static_cast<std::uint64_t>(v.t / totp::step_seconds), 8), v.code)
        << v.t;
}

TEST(Totp, ACodeIsGoodWithinOneStepEitherSideAndOnlyOnce) {
  const std::int64_t now = 1'800'000'015; // in step 60'000'000
  const std::int64_t step = now / 30;
  auto code = totp::hotp(rfc_key, static_cast<std::uint64_t>(step));
  EXPECT_EQ(totp::verify(rfc_key, code, now, 0), step);
  EXPECT_EQ(totp::verify(rfc_key, code, now + 30, 0), step); // the clock ran one step on
  EXPECT_EQ(totp::verify(rfc_key, code, now - 30, 0), step); // the phone's ran ahead
  EXPECT_FALSE(totp::verify(rfc_key, code, now + 60, 0));
  EXPECT_FALSE(totp::verify(rfc_key, code, now, step)); // used already: a replay
  auto next = totp::hotp(rfc_key, static_cast<std::uint64_t>(step + 1));
  EXPECT_EQ(totp::verify(rfc_key, next, now, step), step + 1);
  EXPECT_FALSE(totp::verify(rfc_key, "12345", now, 0));
  EXPECT_FALSE(totp::verify(rfc_key, "12345a", now, 0));
  EXPECT_FALSE(totp::verify("another key 12345678", code, now, 0));
}

TEST(Totp, Base32RoundTripsAndReadsWhatAppsShow) {
  // RFC 4648 section 10.
  EXPECT_EQ(totp::base32_encode("foobar"), "MZXW6YTBOI");
  EXPECT_EQ(totp::base32_decode("mzxw 6ytb oi======"), std::optional<std::string>("foobar"));
  EXPECT_FALSE(totp::base32_decode("MZXW1"));
  std::string bytes(20, '\0');
  for (int i = 0; i < 20; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>(i * 13);
  EXPECT_EQ(totp::base32_decode(totp::base32_encode(bytes)), bytes);
  auto uri = totp::otpauth_uri("carecrm Clinic A", "ana@example.org", "MZXW6YTBOI");
  EXPECT_EQ(uri, "otpauth://totp/carecrm%20Clinic%20A:ana%40example.org?secret=MZXW6YTBOI"
                 "&issuer=carecrm%20Clinic%20A&algorithm=SHA1&digits=6&period=30");
}

TEST(Totp, RecoveryCodesAreDistinctAndComparedWithoutCaseOrDashes) {
  auto codes = totp::recovery_codes(10);
  ASSERT_EQ(codes.size(), 10u);
  std::set<std::string> distinct(codes.begin(), codes.end());
  EXPECT_EQ(distinct.size(), 10u);
  for (auto& c : codes) {
    ASSERT_EQ(c.size(), 11u) << c;
    EXPECT_EQ(c[5], '-');
    auto upper = c;
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    EXPECT_EQ(totp::normalize_recovery_code(upper), c.substr(0, 5) + c.substr(6));
  }
}
