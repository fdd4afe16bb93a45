// net::trusted_proxies (issue 31 item 5): who the client is behind a proxy.
#include "net/trusted_proxies.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

using crm::net::trusted_proxies;

TEST(TrustedProxies, ParsesAddressesAndBlocksOfBothFamilies) {
  auto p = trusted_proxies::parse("127.0.0.1, 10.0.0.0/8 ::1,fd00::/8");
  EXPECT_TRUE(p.contains("127.0.0.1"));
  EXPECT_FALSE(p.contains("127.0.0.2"));
  EXPECT_TRUE(p.contains("10.200.3.4"));
  EXPECT_FALSE(p.contains("11.0.0.1"));
  EXPECT_TRUE(p.contains("::1"));
  EXPECT_TRUE(p.contains("fd12:3456::1"));
  EXPECT_FALSE(p.contains("fe80::1"));
  EXPECT_TRUE(p.contains("::ffff:10.1.1.1")); // an IPv4 peer on a dual-stack socket
  EXPECT_FALSE(p.contains("not an address"));
  EXPECT_TRUE(trusted_proxies::parse("").empty());
}

TEST(TrustedProxies, RefusesWhatIsNotAnAddressOrABlock) {
  for (const char* bad :
       {"10.0.0.0/33", "::/129", "10.0.0.1/", "10.0.0.0/x", "host.example", "10.0.0.256", "127.1"})
    EXPECT_THROW(trusted_proxies::parse(bad), std::invalid_argument) << bad;
}

TEST(TrustedProxies, BelievesOnlyWhatOurOwnProxiesWrote) {
  auto p = trusted_proxies::parse("10.0.0.0/24");
  // The header is ignored from a peer that is not a proxy of ours.
  EXPECT_EQ(p.client_of("203.0.113.5", "198.51.100.1"), "203.0.113.5");
  // From our proxy: the address it appended.
  EXPECT_EQ(p.client_of("10.0.0.7", "198.51.100.1"), "198.51.100.1");
  // A client that sent its own header: its made-up entries are left of what our proxy saw.
  EXPECT_EQ(p.client_of("10.0.0.7", "1.2.3.4, 198.51.100.1"), "198.51.100.1");
  // Two of our proxies in a row: past both.
  EXPECT_EQ(p.client_of("10.0.0.7", "198.51.100.1, 10.0.0.9"), "198.51.100.1");
  // Garbage where the client should be: the last hop we could name.
  EXPECT_EQ(p.client_of("10.0.0.7", "evil, 10.0.0.9"), "10.0.0.9");
  EXPECT_EQ(p.client_of("10.0.0.7", ""), "10.0.0.7");
  EXPECT_EQ(p.client_of("10.0.0.7", std::nullopt), "10.0.0.7");
  EXPECT_EQ(p.client_of("10.0.0.7", " [2001:db8::1] "), "2001:db8::1");
  // No proxies configured: never believed.
  EXPECT_EQ(trusted_proxies().client_of("10.0.0.7", "198.51.100.1"), "10.0.0.7");
}

} // namespace
