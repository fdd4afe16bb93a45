// SQL for custom-field definitions. Blocking: call only on a pg_pool thread.
#pragma once
#include "domain/custom_field.hpp"
#include "domain/failure.hpp"
#include "persistence/pg_pool.hpp"

namespace crm::persistence {

domain::field_definitions load_fields(pg_conn& c, std::int64_t tenant_id);

// Inserts (id 0) or updates a definition and bumps the tenant's version, in one transaction.
// A name already used by the tenant and entity → errc::conflict.
struct field_saved {
  domain::custom_field field;
  std::int64_t version = 0;
};
domain::outcome<field_saved> save_field(pg_conn& c, domain::custom_field f);

// Hard delete: the definition and every value under its name in the tenant's records of its
// entity, and the version bump, in one transaction. Returns the new version.
std::int64_t purge_field(pg_conn& c, const domain::custom_field& f);

std::optional<std::int64_t> tenant_of_field(pg_conn& c, std::int64_t id);

} // namespace crm::persistence
