// API keys for integrators (migration 018, docs/operations.md "API keys"): the rows behind
// /api-keys and the owner an API key's id names for the gate that admits it
// (http/api_key_auth.hpp). Blocking: run on the database pool.
#pragma once
#include "persistence/secret_owners.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crm::persistence {

class pg_conn;

struct api_key_row {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  std::string role;
  std::string prefix; // "ck_<id>_" and the secret's first characters: names the key in lists
  std::optional<std::int64_t> created_by;
  std::int64_t created_at = 0; // microseconds since the epoch
  std::optional<std::int64_t> expires_at;
  std::optional<std::int64_t> revoked_at;
};

struct new_api_key {
  std::int64_t tenant_id = 0;
  std::string name, role;
  std::optional<std::int64_t> created_by;
  std::optional<std::int64_t> expires_at; // microseconds
  std::string secret;                     // the plain secret: hashed here, never stored
};

// Nothing when the tenant already has `max_active` keys that are neither revoked nor expired.
std::optional<api_key_row> insert_api_key(pg_conn& c, const new_api_key& k,
                                          std::int64_t max_active);
std::vector<api_key_row> list_api_keys(pg_conn& c, std::int64_t tenant, int page, int per_page,
                                       std::int64_t& total);
// The key's tenant when the key exists (a caller of another tenant is told 403).
std::optional<api_key_row> find_api_key(pg_conn& c, std::int64_t id);
// Marks it revoked (once; a second revoke changes nothing) and answers it.
std::optional<api_key_row> revoke_api_key(pg_conn& c, std::int64_t tenant, std::int64_t id,
                                          std::optional<std::int64_t> by);
// The gate's look-up: a key that is not revoked, with its secret's keyed hash, role and expiry.
std::optional<secret_owner> secret_owner_of_api_key(pg_conn& c, std::int64_t id);
// A key presented under a master key that is not the first any more: its hash moves to it.
void rehash_api_key(pg_conn& c, std::int64_t id, const std::string& secret);

} // namespace crm::persistence
