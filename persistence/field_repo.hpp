// SQL for custom-field definitions. Blocking: call only on a pg_pool thread.
#pragma once
#include "domain/audit.hpp"
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
  std::string sealed_data_key; // the tenant's, made with its first sensitive field
};
domain::outcome<field_saved> save_field(pg_conn& c, domain::custom_field f);

// Hard delete: the definition and every value under its name in the tenant's records of its
// entity, and the version bump, in one transaction. Returns the new version.
// The audit row of a hard delete by `who`: the values of every record under the field's name go.
domain::audit_record purge_audit(const domain::audit_context* who, const domain::custom_field& f);
// `audit`: the rows of the change (persistence/audit_repo.hpp), in the same transaction.
std::int64_t purge_field(pg_conn& c, const domain::custom_field& f,
                         const std::vector<domain::audit_record>& audit);

std::optional<std::int64_t> tenant_of_field(pg_conn& c, std::int64_t id);

} // namespace crm::persistence
