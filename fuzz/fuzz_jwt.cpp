// Access-token verification: any bytes are a verdict, never a crash, and whatever verifies
// re-signs to a token that verifies to the same claims (no claim is read differently from
// how it is written).
#include "domain/jwt.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace crm::domain;
  constexpr std::string_view key = "fuzz-secret-0123456789abcdef0123456789";
  constexpr std::int64_t now = 1'700'000'000;
  std::string_view token(reinterpret_cast<const char*>(data), size);
  auto r = verify_jwt(token, key, now);
  if (!r.claims) return 0;
  auto again = verify_jwt(sign_jwt(*r.claims, key), key, now);
  const auto& a = *r.claims;
  if (!again.claims) __builtin_trap();
  const auto& b = *again.claims;
  if (a.user_id != b.user_id || a.tenant_id != b.tenant_id || a.role != b.role || a.typ != b.typ ||
      a.sid != b.sid || a.jti != b.jti || a.iat != b.iat || a.exp != b.exp)
    __builtin_trap();
  return 0;
}
