// The contact's timeline (contract §11, domain/timeline.hpp): read from Postgres, where every
// source of it is, in one snapshot.
#pragma once
#include "domain/timeline.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace crm::persistence {

class pg_conn;

// The response body of GET /contacts/{id}/timeline: up to `limit` items after `after` (none:
// from the newest), each its own resource's JSON with "type", "at" and "summary", and
// next_cursor (null on the last page).
std::string contact_timeline(pg_conn& c, std::int64_t tenant_id, std::int64_t contact_id,
                             const std::optional<domain::timeline_position>& after, int limit);

} // namespace crm::persistence
