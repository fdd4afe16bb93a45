// Two-factor sign-in state (migration 019): each user's TOTP secret, the last step accepted and
// the recovery codes left, and whether the tenant requires it. The secrets are sealed at rest and
// opened here; the conditional updates make a code or a recovery code good once, whatever runs
// at the same time. Blocking: run on the database pool.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crm::persistence {

class pg_conn;

struct totp_state {
  std::optional<std::string> secret;      // raw bytes, opened; in force
  std::optional<std::string> pending;     // raw bytes, opened; set up, not yet confirmed
  std::optional<std::int64_t> enabled_at; // microseconds
  std::int64_t last_step = 0;
  std::vector<std::string> recovery_hashes; // keyed hashes of the codes left
  bool required = false;                    // by the tenant
};

totp_state load_totp(pg_conn& c, std::int64_t tenant, std::int64_t user);
// Keeps `secret` (raw) as the user's pending one; false when a secret is in force already.
bool set_pending_totp(pg_conn& c, std::int64_t tenant, std::int64_t user,
                      const std::string& secret);
// Puts the pending secret in force, with `step` as used and the recovery codes' keyed hashes;
// false when there was no pending secret (or one was enabled meanwhile).
bool enable_totp(pg_conn& c, std::int64_t tenant, std::int64_t user, std::int64_t step,
                 const std::vector<std::string>& recovery_hashes);
// Marks `step` used: false when it (or a later one) was used already.
bool consume_totp_step(pg_conn& c, std::int64_t user, std::int64_t step);
// Removes the stored recovery hash `stored`: false when it was used already.
bool consume_recovery_code(pg_conn& c, std::int64_t user, const std::string& stored);
// Removes the user's second factor; false when there was none.
bool disable_totp(pg_conn& c, std::int64_t tenant, std::int64_t user);
bool totp_required(pg_conn& c, std::int64_t tenant);
// The account name an authenticator shows.
std::string user_email(pg_conn& c, std::int64_t user);
void set_totp_required(pg_conn& c, std::int64_t tenant, bool required);

} // namespace crm::persistence
