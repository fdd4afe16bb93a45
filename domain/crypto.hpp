// Small cryptographic building blocks (OpenSSL and libsodium behind them): HMAC-SHA256,
// encodings, constant-time comparison, random identifiers, Argon2id password hashing.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace crm::domain {

using sha256_digest = std::array<std::uint8_t, 32>;

sha256_digest hmac_sha256(std::string_view key, std::string_view data);

// HMAC-SHA1's 20 raw bytes: only where a provider's protocol fixes it (Twilio's request
// signature, docs/channels.md "SMS").
std::string hmac_sha1(std::string_view key, std::string_view data);

std::string base64url_encode(std::string_view bytes);               // no padding
std::optional<std::string> base64url_decode(std::string_view text); // rejects padding and junk
std::string base64_encode(std::string_view bytes);                  // standard, padded
std::string hex_encode(std::string_view bytes);                     // lower case
// Hex digits (either case) back to bytes; nothing for an odd length or another character.
std::optional<std::string> hex_decode(std::string_view hex);
// Standard alphabet; padding optional (but only at the end), non-zero trailing bits ignored as
// most decoders do, so keys encoded elsewhere decode the same here.
std::optional<std::string> base64_decode(std::string_view text);

inline std::string_view as_bytes(const sha256_digest& d) {
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

// Compares in time that depends only on the lengths, never on where the inputs differ.
bool constant_time_equal(std::string_view a, std::string_view b);

// For presented secrets (webhooks): equal or not in a time independent of both lengths and of
// the contents (compares keyed digests).
bool secrets_equal(std::string_view presented, std::string_view secret);

// `n` random bytes from the OS CSPRNG, base64url-encoded.
std::string random_token(std::size_t n = 16);

// Argon2id (libsodium crypto_pwhash_str, at least the interactive limits). Slow on purpose:
// call only from the hashing pool, never on an asio or actor scheduler thread.
std::string hash_password(std::string_view password);
bool verify_password(std::string_view encoded_hash, std::string_view password);

// libsodium must be initialised once before use; safe to call repeatedly.
void init_crypto();

} // namespace crm::domain
