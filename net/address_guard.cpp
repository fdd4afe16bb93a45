// The SSRF guard: classifies one resolved address literal. inet_pton only accepts the canonical
// forms (no "127.1", no octal, no scope id), and whatever it refuses is refused here too.
#include "net/address_guard.hpp"

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <string>

namespace crm::net {

namespace {

bool in_v4(std::uint32_t addr, std::uint32_t network, int prefix) {
  const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
  return (addr & mask) == (network & mask);
}

constexpr std::uint32_t v4(unsigned a, unsigned b, unsigned c, unsigned d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

bool restricted_v4(std::uint32_t a) {
  return in_v4(a, v4(0, 0, 0, 0), 8)          // "this network", unspecified
         || in_v4(a, v4(10, 0, 0, 0), 8)      // private
         || in_v4(a, v4(100, 64, 0, 0), 10)   // shared address space (carrier NAT, some clouds)
         || in_v4(a, v4(127, 0, 0, 0), 8)     // loopback
         || in_v4(a, v4(169, 254, 0, 0), 16)  // link-local, cloud metadata endpoints
         || in_v4(a, v4(172, 16, 0, 0), 12)   // private
         || in_v4(a, v4(192, 0, 0, 0), 24)    // IETF protocol assignments
         || in_v4(a, v4(192, 0, 2, 0), 24)    // TEST-NET-1 (documentation)
         || in_v4(a, v4(192, 168, 0, 0), 16)  // private
         || in_v4(a, v4(198, 18, 0, 0), 15)   // benchmarking networks
         || in_v4(a, v4(198, 51, 100, 0), 24) // TEST-NET-2
         || in_v4(a, v4(203, 0, 113, 0), 24)  // TEST-NET-3
         || in_v4(a, v4(224, 0, 0, 0), 4)     // multicast
         || in_v4(a, v4(240, 0, 0, 0), 4);    // reserved, and 255.255.255.255 broadcast
}

std::uint32_t v4_at(const std::array<unsigned char, 16>& b, int at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) |
         (std::uint32_t{b[at + 2]} << 8) | std::uint32_t{b[at + 3]};
}

bool all_zero(const std::array<unsigned char, 16>& b, int from, int to) {
  for (int i = from; i < to; ++i)
    if (b[i] != 0) return false;
  return true;
}

bool restricted_v6(const std::array<unsigned char, 16>& b) {
  // ::ffff:a.b.c.d (mapped) reaches the IPv4 address itself on a dual-stack socket.
  if (all_zero(b, 0, 10) && b[10] == 0xff && b[11] == 0xff) return restricted_v4(v4_at(b, 12));
  // ::a.b.c.d (compatible, deprecated) also covers :: and ::1, which classify as 0/8.
  if (all_zero(b, 0, 12)) return restricted_v4(v4_at(b, 12));
  // 64:ff9b::/96 (NAT64) and 2002::/16 (6to4) embed an IPv4 address a gateway will reach.
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && all_zero(b, 4, 12))
    return restricted_v4(v4_at(b, 12));
  if (b[0] == 0x20 && b[1] == 0x02) return restricted_v4(v4_at(b, 2));
  // 64:ff9b:1::/48 (local-use NAT64, RFC 8215) translates to whatever its operator chose.
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0x00 && b[5] == 0x01)
    return true;
  // 2001::/32 (Teredo) tunnels to an IPv4 address; 2001:db8::/32 is for documentation.
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00) return true;
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return true;
  return (b[0] & 0xfe) == 0xfc                      // fc00::/7 unique local
         || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) // fe80::/10 link-local
         || (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) // fec0::/10 site-local (deprecated)
         || b[0] == 0xff;                           // multicast
}

} // namespace

bool is_restricted_address(std::string_view ip_literal) {
  const std::string text(ip_literal); // inet_pton needs a terminated string
  if (text.find(':') == std::string::npos) {
    in_addr a{};
    if (inet_pton(AF_INET, text.c_str(), &a) != 1) return true;
    return restricted_v4(ntohl(a.s_addr));
  }
  std::array<unsigned char, 16> b{};
  if (inet_pton(AF_INET6, text.c_str(), b.data()) != 1) return true;
  return restricted_v6(b);
}

} // namespace crm::net
