// The tenant and the secret of an id an inbound webhook names (a workflow's, a channel's), for
// the HTTP layer to check a caller's secret before it wakes the tenant (http/webhook_gate.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace crm::persistence {

class pg_conn;

struct webhook_owner {
  std::int64_t tenant_id = 0;
  // A workflow's secret opened (its HMAC needs it); a channel's as stored, a keyed hash
  // (secret_keys::verify compares a presented one with it). Nothing: the id has no secret.
  std::optional<std::string> secret;
};

// Nothing when Postgres knows no such id.
std::optional<webhook_owner> webhook_owner_of_workflow(pg_conn& c, std::int64_t id);
std::optional<webhook_owner> webhook_owner_of_channel(pg_conn& c, std::int64_t id);

} // namespace crm::persistence
