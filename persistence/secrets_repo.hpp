// Secrets at rest across the tables that hold them (persistence/sealed_columns.hpp): counting
// them by the key they name, sealing plaintext left from before sealing existed, and moving
// everything to the active key (`carecrm secrets status | rotate`, docs/operations.md).
// Blocking: call from the command line or at start-up, never on an actor or asio thread.
#pragma once
#include "persistence/pg_pool.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pqxx {
class transaction_base;
}
namespace crm::domain {
class secret_keys;
class data_key;
} // namespace crm::domain

namespace crm::persistence {

struct secrets_census {
  std::map<std::string, std::int64_t> sealed; // key id → values sealed with it
  std::map<std::string, std::int64_t> hashed; // key id → keyed hashes under it
  std::int64_t plaintext = 0;                 // written before sealing existed
};
// `all_runs`: finished workflow runs too (they are never opened again, but a key cannot be
// retired while they name it); otherwise only what `serve` opens.
secrets_census count_secrets(pg_conn& c, bool all_runs);

struct reseal_result {
  std::int64_t resealed = 0;    // values now sealed (or hashed) with the active key
  std::int64_t hashes_left = 0; // keyed hashes under an older key: moved on their next use
};
// Seals every value with the active key: sealed values are opened and sealed again, plaintext
// is sealed (an inbound secret hashed). `only_plaintext`: leaves sealed values as they are.
// Row by row under FOR UPDATE, a transaction per table (runs in slices), so running servers
// keep working meanwhile. Throws domain::secret_error when a value does not open.
reseal_result reseal_secrets(pg_conn& c, bool only_plaintext);

// `serve` at start: seals the plaintext of rows written before sealing existed (once, under an
// advisory lock, so one node of several does it), then checks that every key a stored secret
// names is configured; returns the ids that are not (a server should not start without them).
std::vector<std::string> prepare_secrets(pg_conn& c);

// Migration 017, in its transaction: seals again every sensitive contact value sealed before
// values were bound to their contact and field (sealed::legacy_contact_field), bound now.
// Answers how many contacts changed; throws when a tenant's data key does not open.
std::int64_t bind_sensitive_values(pqxx::transaction_base& tx, const domain::secret_keys& keys);
// One contact's custom_fields with its values sealed before binding sealed again, bound;
// nothing when it holds none.
std::optional<std::string> bind_legacy_values(const domain::data_key& key, std::int64_t contact_id,
                                              std::string_view custom_fields);

} // namespace crm::persistence
