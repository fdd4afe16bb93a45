// The SSRF guard: which address literals outbound requests may connect to, by a table.
#include "net/address_guard.hpp"

#include <gtest/gtest.h>

#include <string_view>

using crm::net::is_restricted_address;

namespace {

struct address_case {
  std::string_view address;
  bool restricted;
};

constexpr address_case cases[] = {
    {"127.0.0.1", true},        // loopback
    {"127.255.0.9", true},      // all of 127/8
    {"10.1.2.3", true},         // private
    {"172.16.0.1", true},       // private, first of 172.16/12
    {"172.31.255.255", true},   // private, last of 172.16/12
    {"172.32.0.1", false},      // just past 172.16/12
    {"172.15.255.255", false},  // just before 172.16/12
    {"192.168.1.1", true},      // private
    {"100.64.0.1", true},       // shared address space
    {"100.128.0.1", false},     // just past 100.64/10
    {"169.254.169.254", true},  // link-local: cloud metadata
    {"0.0.0.0", true},          // unspecified
    {"224.0.0.1", true},        // multicast
    {"240.0.0.1", true},        // reserved
    {"255.255.255.255", true},  // broadcast
    {"8.8.8.8", false},         // public
    {"93.184.216.34", false},   // public
    {"::1", true},              // loopback
    {"::", true},               // unspecified
    {"fe80::1", true},          // link-local
    {"febf::1", true},          // still fe80::/10
    {"fc00::1", true},          // unique local
    {"fd12::1", true},          // unique local
    {"ff02::1", true},          // multicast
    {"::ffff:127.0.0.1", true}, // IPv4-mapped loopback
    {"::ffff:10.0.0.1", true},  // IPv4-mapped private
    {"::ffff:7f00:1", true},    // the same, in hex
    {"::ffff:8.8.8.8", false},  // IPv4-mapped public
    {"::127.0.0.1", true},      // IPv4-compatible loopback
    {"::169.254.169.254", true},
    {"64:ff9b::10.0.0.1", true}, // NAT64 of a private address
    {"2002:7f00:1::", true},     // 6to4 of loopback
    {"192.0.0.8", true},         // IETF protocol assignments
    {"192.0.2.10", true},        // TEST-NET-1
    {"198.18.0.1", true},        // benchmarking, first of 198.18/15
    {"198.19.255.254", true},    // benchmarking, last of 198.18/15
    {"198.20.0.1", false},       // just past 198.18/15
    {"198.51.100.7", true},      // TEST-NET-2
    {"203.0.113.9", true},       // TEST-NET-3
    {"192.0.3.1", false},        // just past TEST-NET-1
    {"64:ff9b:1::a00:1", true},  // local-use NAT64
    {"64:ff9b:2::1", false},     // just past 64:ff9b:1::/48 (no IPv4 embedded at ::/96)
    {"2001::1", true},           // Teredo
    {"2001:0:4136:e378::1", true},
    {"2001:db8::1", true}, // documentation
    {"2001:1::1", false},  // just past 2001::/32
    {"2001:4860:4860::8888", false},
    {"2606:4700:4700::1111", false},
    {"not-an-ip", true}, // what cannot be classified is refused
    {"", true},
    {"127.1", true},        // shorthand forms are not address literals here
    {"fe80::1%eth0", true}, // nor are scoped ones
    {"1.2.3.4 ", true},
};

} // namespace

TEST(address_guard, classifies_each_address_of_the_table) {
  for (const auto& c : cases)
    EXPECT_EQ(is_restricted_address(c.address), c.restricted) << "address \"" << c.address << '"';
}
