// HMAC-SHA256 (OpenSSL), text encodings, constant-time comparison, random tokens and Argon2id
// password hashing (libsodium).
#include "domain/crypto.hpp"

#include <climits>
#include <mutex>
#include <stdexcept>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sodium.h>

namespace crm::domain {

namespace {

constexpr std::string_view b64_std =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view b64_url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string encode_base64(std::string_view bytes, std::string_view alphabet, bool pad) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto byte = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k]));
  };
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out.push_back(alphabet[v >> 18 & 63]);
    out.push_back(alphabet[v >> 12 & 63]);
    out.push_back(alphabet[v >> 6 & 63]);
    out.push_back(alphabet[v & 63]);
  }
  const std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    const std::uint32_t v = byte(i) << 16;
    out.push_back(alphabet[v >> 18 & 63]);
    out.push_back(alphabet[v >> 12 & 63]);
    if (pad) {
      out.append("==");
    }
  } else if (rest == 2) {
    const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8;
    out.push_back(alphabet[v >> 18 & 63]);
    out.push_back(alphabet[v >> 12 & 63]);
    out.push_back(alphabet[v >> 6 & 63]);
    if (pad) {
      out.push_back('=');
    }
  }
  return out;
}

int url_value(char c) {
  if (c >= 'A' && c <= 'Z') {
    return c - 'A';
  }
  if (c >= 'a' && c <= 'z') {
    return c - 'a' + 26;
  }
  if (c >= '0' && c <= '9') {
    return c - '0' + 52;
  }
  if (c == '-') {
    return 62;
  }
  if (c == '_') {
    return 63;
  }
  return -1;
}

} // namespace

sha256_digest hmac_sha256(std::string_view key, std::string_view data) {
  if (key.size() > INT_MAX) {
    throw std::length_error("HMAC key too long");
  }
  // OpenSSL reads a null key as "keep the previous key"; give it a real pointer even when empty.
  static constexpr unsigned char empty = 0;
  const auto* k = key.empty() ? &empty : reinterpret_cast<const unsigned char*>(key.data());
  const auto* d = data.empty() ? &empty : reinterpret_cast<const unsigned char*>(data.data());
  sha256_digest out{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), k, static_cast<int>(key.size()), d, data.size(), out.data(), &len) ==
          nullptr ||
      len != out.size()) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return out;
}

std::string hmac_sha1(std::string_view key, std::string_view data) {
  if (key.size() > INT_MAX) throw std::length_error("HMAC key too long");
  static constexpr unsigned char empty = 0;
  const auto* k = key.empty() ? &empty : reinterpret_cast<const unsigned char*>(key.data());
  const auto* d = data.empty() ? &empty : reinterpret_cast<const unsigned char*>(data.data());
  unsigned char out[20];
  unsigned int len = 0;
  if (HMAC(EVP_sha1(), k, static_cast<int>(key.size()), d, data.size(), out, &len) == nullptr ||
      len != sizeof out)
    throw std::runtime_error("HMAC-SHA1 failed");
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string base64url_encode(std::string_view bytes) {
  return encode_base64(bytes, b64_url, false);
}

std::optional<std::string> base64url_decode(std::string_view text) {
  // A length of 1 mod 4 cannot come from any input.
  if (text.size() % 4 == 1) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    const int v = url_value(c);
    if (v < 0) {
      return std::nullopt;
    }
    acc = (acc << 6 | static_cast<std::uint32_t>(v)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>(acc >> bits & 0xff));
    }
  }
  // Leftover bits must be zero: otherwise two texts would decode to the same bytes, and a token
  // signature could be altered without being rejected.
  if ((acc & ((1U << bits) - 1)) != 0) {
    return std::nullopt;
  }
  return out;
}

std::string base64_encode(std::string_view bytes) {
  return encode_base64(bytes, b64_std, true);
}

std::optional<std::string> base64_decode(std::string_view text) {
  std::size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') {
    ++pad;
  }
  if (pad > 0 && text.size() % 4 != 0) {
    return std::nullopt;
  }
  text.remove_suffix(pad);
  if (text.size() % 4 == 1) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  // The alphabet as a table (a 16 MiB file sent in base64 is 22 million look-ups).
  static const auto table = [] {
    std::array<std::int8_t, 256> t{};
    t.fill(-1);
    for (std::size_t i = 0; i < b64_std.size(); ++i)
      t[static_cast<unsigned char>(b64_std[i])] = static_cast<std::int8_t>(i);
    return t;
  }();
  for (const char c : text) {
    const auto at = table[static_cast<unsigned char>(c)];
    if (at < 0) {
      return std::nullopt;
    }
    acc = (acc << 6 | static_cast<std::uint32_t>(at)) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>(acc >> bits & 0xff));
    }
  }
  return out;
}

std::string hex_encode(std::string_view bytes) {
  constexpr std::string_view digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

std::optional<std::string> hex_decode(std::string_view hex) {
  auto val = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  if (hex.size() % 2) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    auto hi = val(hex[i]), lo = val(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    // Still touch every byte of the longer input so the time says nothing but the lengths.
    const std::string_view longer = a.size() > b.size() ? a : b;
    volatile int sink = sodium_memcmp(longer.data(), longer.data(), longer.size());
    static_cast<void>(sink);
    return false;
  }
  if (a.empty()) {
    return true;
  }
  return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool secrets_equal(std::string_view presented, std::string_view secret) {
  // Keyed digests of both sides have one fixed length, so the comparison's time depends on
  // neither the secret's length nor where the inputs differ; the key is per process, so the
  // digests say nothing outside it.
  static const std::string key = random_token(32);
  auto a = hmac_sha256(key, presented);
  auto b = hmac_sha256(key, secret);
  return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string random_token(std::size_t n) {
  init_crypto();
  std::string bytes(n, '\0');
  if (n > 0) {
    randombytes_buf(bytes.data(), n);
  }
  return base64url_encode(bytes);
}

std::string hash_password(std::string_view password) {
  init_crypto();
  std::string out(crypto_pwhash_STRBYTES, '\0');
  const char* p = password.empty() ? "" : password.data();
  if (crypto_pwhash_str_alg(out.data(), p, password.size(), crypto_pwhash_OPSLIMIT_INTERACTIVE,
                            crypto_pwhash_MEMLIMIT_INTERACTIVE,
                            crypto_pwhash_ALG_ARGON2ID13) != 0) {
    throw std::runtime_error("password hashing failed (out of memory?)");
  }
  out.resize(out.find('\0'));
  return out;
}

bool verify_password(std::string_view encoded_hash, std::string_view password) {
  init_crypto();
  // libsodium reads a NUL-terminated string of bounded size; anything else is not our hash.
  if (encoded_hash.empty() || encoded_hash.size() >= crypto_pwhash_STRBYTES ||
      encoded_hash.find('\0') != std::string_view::npos) {
    return false;
  }
  const std::string hash(encoded_hash);
  const char* p = password.empty() ? "" : password.data();
  return crypto_pwhash_str_verify(hash.c_str(), p, password.size()) == 0;
}

void init_crypto() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (sodium_init() < 0) {
      throw std::runtime_error("libsodium initialisation failed");
    }
  });
}

} // namespace crm::domain
