// Two-factor sign-in (docs/operations.md "Two-factor sign-in"): which routes a session that may
// only enroll can reach, and the second step of a password sign-in (http/handlers/auth.cpp).
#pragma once
#include "domain/failure.hpp"
#include "persistence/totp_repo.hpp"

#include <functional>
#include <optional>
#include <string>

namespace crm::domain {
class secret_keys;
}

namespace crm::http {

struct route;

// /auth/me, /auth/logout and the user's own /auth/totp routes (not the tenant's policy).
bool open_to_enrollment(const route& rt);

// The second factor of a sign-in whose password was right, judged without I/O: the step or the
// stored recovery hash to consume (then a session), or the failure to answer.
struct second_factor {
  enum class verdict : std::uint8_t { none_needed, enroll_only, code, recovery_code, refused };
  verdict v = verdict::none_needed;
  std::int64_t step = 0;     // code
  std::string stored;        // recovery_code: the stored hash it matched
  domain::failure failure{}; // refused
};
second_factor judge_second_factor(const domain::secret_keys& keys, std::int64_t tenant,
                                  const persistence::totp_state& state,
                                  const std::optional<std::string>& totp_code,
                                  const std::optional<std::string>& recovery_code,
                                  std::int64_t now_seconds);

} // namespace crm::http
