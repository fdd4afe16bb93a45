#include "net/trusted_proxies.hpp"

#include <arpa/inet.h>

#include <cstring>
#include <stdexcept>

namespace crm::net {

namespace {

// The address as 16 bytes (IPv4 mapped into IPv6); nothing for text that is not one. Brackets
// around an IPv6 literal are allowed (as X-Forwarded-For sometimes carries them).
std::optional<std::array<unsigned char, 16>> parse_ip(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']')
    text = text.substr(1, text.size() - 2);
  if (text.empty() || text.size() > 45) return std::nullopt;
  std::string s(text);
  std::array<unsigned char, 16> out{};
  unsigned char v4[4];
  if (inet_pton(AF_INET, s.c_str(), v4) == 1) {
    out[10] = out[11] = 0xff;
    std::memcpy(out.data() + 12, v4, 4);
    return out;
  }
  if (inet_pton(AF_INET6, s.c_str(), out.data()) == 1) return out;
  return std::nullopt;
}

bool is_v4_mapped(const std::array<unsigned char, 16>& a) {
  for (int i = 0; i < 10; ++i)
    if (a[i]) return false;
  return a[10] == 0xff && a[11] == 0xff;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

} // namespace

trusted_proxies trusted_proxies::parse(std::string_view spec) {
  trusted_proxies out;
  while (!spec.empty()) {
    auto end = spec.find_first_of(", ");
    auto item = spec.substr(0, end);
    spec = end == std::string_view::npos ? std::string_view() : spec.substr(end + 1);
    if (item.empty()) continue;
    auto slash = item.find('/');
    auto ip = parse_ip(item.substr(0, slash));
    if (!ip)
      throw std::invalid_argument("not an IP address or CIDR block: '" + std::string(item) + "'");
    block b{*ip, 128};
    if (slash != std::string_view::npos) {
      auto digits = item.substr(slash + 1);
      int bits = 0;
      if (digits.empty() || digits.size() > 3)
        throw std::invalid_argument("bad prefix length in '" + std::string(item) + "'");
      for (char c : digits) {
        if (c < '0' || c > '9')
          throw std::invalid_argument("bad prefix length in '" + std::string(item) + "'");
        bits = bits * 10 + (c - '0');
      }
      int max = is_v4_mapped(*ip) ? 32 : 128;
      if (bits > max)
        throw std::invalid_argument("prefix length over " + std::to_string(max) + " in '" +
                                    std::string(item) + "'");
      b.bits = is_v4_mapped(*ip) ? bits + 96 : bits;
    }
    out.blocks_.push_back(b);
  }
  return out;
}

bool trusted_proxies::contains(std::string_view ip) const {
  auto a = parse_ip(ip);
  if (!a) return false;
  for (const auto& b : blocks_) {
    int full = b.bits / 8, rest = b.bits % 8;
    if (std::memcmp(a->data(), b.addr.data(), static_cast<std::size_t>(full)) != 0) continue;
    if (rest) {
      unsigned char mask = static_cast<unsigned char>(0xff << (8 - rest));
      if ((((*a)[static_cast<std::size_t>(full)] ^ b.addr[static_cast<std::size_t>(full)]) &
           mask) != 0)
        continue;
    }
    return true;
  }
  return false;
}

std::string trusted_proxies::client_of(std::string_view peer,
                                       std::optional<std::string_view> forwarded_for) const {
  std::string client(peer);
  if (!forwarded_for || blocks_.empty()) return client;
  std::string_view rest = *forwarded_for;
  // From the right: while the hop we stand on is one of ours, believe what it says it saw.
  while (contains(client)) {
    if (rest.empty()) break;
    auto comma = rest.rfind(',');
    auto item = trim(comma == std::string_view::npos ? rest : rest.substr(comma + 1));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(0, comma);
    if (!parse_ip(item)) break; // garbage: keep the last hop we could name
    if (item.size() >= 2 && item.front() == '[') item = item.substr(1, item.size() - 2);
    client = std::string(item);
  }
  return client;
}

} // namespace crm::net
