// The SSRF guard of outbound requests: which resolved addresses a webhook or an http_request
// action may connect to. Pure: no resolution here.
#pragma once
#include <string_view>

namespace crm::net {

// True for loopback, private (10/8, 172.16/12, 192.168/16, 100.64/10 shared, fc00::/7),
// link-local (169.254/16, fe80::/10), unspecified (0.0.0.0/8, ::), multicast, broadcast,
// reserved 240/4, and IPv4-mapped/compatible IPv6 forms of those (::ffff:127.0.0.1).
// Text that is not an IP address literal → true (refuse what cannot be classified).
bool is_restricted_address(std::string_view ip_literal);

} // namespace crm::net
