#include "domain/totp.hpp"

#include "domain/crypto.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sodium.h>

#include <array>

namespace crm::domain::totp {

namespace {

constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

// Percent-encoding of a URI component (RFC 3986 unreserved characters kept).
std::string uri_component(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

} // namespace

std::string base32_encode(std::string_view bytes) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 5) {
      out.push_back(alphabet[(buffer >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  if (bits > 0) out.push_back(alphabet[(buffer << (5 - bits)) & 31]);
  return out;
}

std::optional<std::string> base32_decode(std::string_view text) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char ch : text) {
    if (ch == ' ' || ch == '=') continue;
    char c = (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 'a' + 'A') : ch;
    auto v = alphabet.find(c);
    if (v == std::string_view::npos) return std::nullopt;
    buffer = (buffer << 5) | static_cast<std::uint32_t>(v);
    bits += 5;
    if (bits >= 8) {
      out.push_back(static_cast<char>((buffer >> (bits - 8)) & 0xff));
      bits -= 8;
    }
  }
  return out;
}

std::string hotp(std::string_view key, std::uint64_t counter, int digits) {
  std::array<unsigned char, 8> msg{};
  for (int i = 7; i >= 0; --i) {
    msg[static_cast<std::size_t>(i)] = static_cast<unsigned char>(counter & 0xff);
    counter >>= 8;
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha1(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), mac, &len);
  int offset = mac[len - 1] & 0x0f;
  std::uint32_t bin = (static_cast<std::uint32_t>(mac[offset] & 0x7f) << 24) |
                      (static_cast<std::uint32_t>(mac[offset + 1]) << 16) |
                      (static_cast<std::uint32_t>(mac[offset + 2]) << 8) |
                      static_cast<std::uint32_t>(mac[offset + 3]);
  std::uint32_t mod = 1;
  for (int i = 0; i < digits; ++i) mod *= 10;
  auto value = std::to_string(bin % mod);
  return std::string(static_cast<std::size_t>(digits) - value.size(), '0') + value;
}

std::optional<std::int64_t> verify(std::string_view key, std::string_view code,
                                   std::int64_t now_seconds, std::int64_t last_used_step,
                                   int window) {
  if (code.size() != static_cast<std::size_t>(code_digits)) return std::nullopt;
  for (char c : code)
    if (c < '0' || c > '9') return std::nullopt;
  auto now_step = now_seconds / step_seconds;
  std::optional<std::int64_t> matched;
  // Every step of the window is computed and compared in constant time, whatever matches.
  for (std::int64_t s = now_step - window; s <= now_step + window; ++s) {
    if (s < 0) continue;
    auto expected = hotp(key, static_cast<std::uint64_t>(s));
    bool same = sodium_memcmp(expected.data(), code.data(), expected.size()) == 0;
    if (same && s > last_used_step && !matched) matched = s;
  }
  return matched;
}

std::string otpauth_uri(std::string_view issuer, std::string_view account,
                        std::string_view secret_base32) {
  auto label = uri_component(issuer) + ":" + uri_component(account);
  return "otpauth://totp/" + label + "?secret=" + std::string(secret_base32) +
         "&issuer=" + uri_component(issuer) + "&algorithm=SHA1&digits=6&period=30";
}

std::vector<std::string> recovery_codes(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::array<unsigned char, 7> raw{};
    randombytes_buf(raw.data(), raw.size());
    auto text =
        base32_encode(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()))
            .substr(0, 10);
    for (auto& c : text) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    out.push_back(text.substr(0, 5) + "-" + text.substr(5));
  }
  return out;
}

std::string normalize_recovery_code(std::string_view presented) {
  std::string out;
  for (char c : presented) {
    if (c == '-' || c == ' ') continue;
    out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return out;
}

} // namespace crm::domain::totp
