// Which peers may say who the client is (issue 31 item 5; docs/operations.md "Behind a proxy").
// A request whose TCP peer is one of the configured --trusted-proxies (addresses or CIDR blocks,
// IPv4 or IPv6) has its client taken from X-Forwarded-For: walking the header from its right end
// (each proxy appends the address it saw), the first address that is not itself a trusted proxy.
// So only what our own proxies wrote is believed, and a client cannot choose the address its
// rate limits and audit rows are charged to by sending the header itself. From any other peer,
// and with no proxies configured (the default), the header is ignored.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::net {

class trusted_proxies {
public:
  trusted_proxies() = default;
  // "127.0.0.1, 10.0.0.0/8, ::1, fd00::/8" (commas or spaces between items). Throws
  // std::invalid_argument naming the first item that is not an address or a block.
  static trusted_proxies parse(std::string_view spec);

  bool empty() const { return blocks_.empty(); }
  bool contains(std::string_view ip) const;
  // The client of a request from `peer` that carried `forwarded_for` (nothing: no header).
  std::string client_of(std::string_view peer, std::optional<std::string_view> forwarded_for) const;

private:
  struct block {
    std::array<unsigned char, 16> addr{}; // IPv4 as IPv4-mapped IPv6
    int bits = 128;
  };
  std::vector<block> blocks_;
};

} // namespace crm::net
