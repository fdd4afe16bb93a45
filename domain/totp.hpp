// Time-based one-time passwords for two-factor sign-in: RFC 6238 (TOTP) over RFC 4226 (HOTP),
// HMAC-SHA1, 6 digits, 30-second steps, as every authenticator app speaks it; the secret in
// base32 (RFC 4648) inside an otpauth:// URI, which the apps read from a QR code. Pure: the
// time and the last step used (a code is accepted once) come from the caller.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain::totp {

inline constexpr int code_digits = 6;
inline constexpr std::int64_t step_seconds = 30;
inline constexpr std::size_t secret_bytes = 20; // RFC 4226's recommended 160 bits

std::string base32_encode(std::string_view bytes); // upper case, no padding
// Case-insensitive; spaces and '=' padding ignored. Nothing for any other character.
std::optional<std::string> base32_decode(std::string_view text);

// The HOTP value of `counter` under `key`, `digits` long with leading zeros.
std::string hotp(std::string_view key, std::uint64_t counter, int digits = code_digits);

// The time step `code` matches, within `window` steps either side of the one `now_seconds`
// falls in and later than `last_used_step` (a code is good once); nothing otherwise.
std::optional<std::int64_t> verify(std::string_view key, std::string_view code,
                                   std::int64_t now_seconds, std::int64_t last_used_step,
                                   int window = 1);

// otpauth://totp/<issuer>:<account>?secret=...&issuer=...&algorithm=SHA1&digits=6&period=30
std::string otpauth_uri(std::string_view issuer, std::string_view account,
                        std::string_view secret_base32);

// `n` single-use recovery codes "xxxxx-xxxxx" (lower-case base32, 50 bits each) from the
// CSPRNG, and the form a presented one is compared in (lower case, no spaces or dashes).
std::vector<std::string> recovery_codes(int n = 10);
std::string normalize_recovery_code(std::string_view presented);

} // namespace crm::domain::totp
