// API keys for integrators (docs/operations.md "API keys"): `Authorization: Bearer
// ck_<id>_<secret>`. A key is its own principal (no user): the role it was created with, its
// tenant, audited as actor `api_key` with `actor_ref` "api_key:<id>". Its secret is compared
// with the stored keyed hash through the secret gate (http/secret_gate.hpp), so a wrong or
// unknown key costs at most one Postgres round trip per id a second and never wakes a tenant;
// a key that matched is read again within 10 s, and a revocation is refused at once on the node
// that made it and, through the revocation feed, on every other one.
#pragma once
#include "domain/failure.hpp"
#include "http/exchange.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace crm::domain {
class revocation_list;
}
namespace crm::persistence {
class pg_pool;
}

namespace crm::http {

class secret_gate;

inline constexpr std::string_view api_key_scheme = "ck_";
inline constexpr std::size_t api_key_secret_chars = 43; // 32 random bytes, base64url

// The gate every API key of this process passes.
secret_gate& api_key_gate();
// What revokes a key in the revocation list (as a session id revokes a session).
std::string api_key_sid(std::int64_t id);
// Whether the bearer token is an API key (else a JWT access token).
bool is_api_key(std::string_view token);

// What only a person may do (manage keys, credentials, a second factor, a session): true, with
// the 403 answered saying `why`, when `ex` was made with an API key.
bool refused_to_api_key(const exchange_ptr& ex, std::string_view why);

// `done(nullopt, who)` for a key that matches and is in force, else `done(401 failure, {})`:
// on the caller's thread when memory answers, else on a database thread.
using api_key_done = std::function<void(std::optional<domain::failure>, principal)>;
void authenticate_api_key(persistence::pg_pool& pool, const domain::revocation_list& revoked,
                          std::string_view token, api_key_done done);

// Each asio thread remembers the keys it admitted in the last 5 s (as it remembers verified
// access tokens), so a repeat costs a lookup instead of the gate's lock, a keyed hash and a hop
// through the scheduler. Expiry and revocation are still checked on every request; after 5 s
// the key goes through the gate again (which reads Postgres once its match is 5 s old).
bool recall_api_key(const domain::revocation_list& revoked, std::string_view token, principal& who);
void remember_api_key(std::string_view token, const principal& who);

} // namespace crm::http
