// Custom-field definitions of a tenant (contract §6), owned by the tenant's fields actor: their
// only writer. Every committed change is pushed to the record actors before the client is
// answered, so a field created or deactivated is in force for the very next request.
#pragma once
#include "actors/callback.hpp"
#include "domain/custom_field.hpp"

#include <optional>
#include <string>
#include <vector>

namespace crm::actors {

class runtime;

using field_patch = domain::field_patch;

void list_fields(runtime& rt, std::int64_t tenant, domain::field_entity entity,
                 bool include_inactive, callback<std::vector<domain::custom_field>> reply);
// 404 for an id of another entity or of no tenant, 403 for another tenant's.
void get_field(runtime& rt, std::int64_t tenant, domain::field_entity entity, std::int64_t id,
               callback<domain::custom_field> reply);
// Name taken (active or not) → errc::conflict.
void create_field(runtime& rt, std::int64_t tenant, domain::custom_field f,
                  callback<domain::custom_field> reply);
// Renames, narrowing type changes and removed options → errc::conflict; options on a type
// without them → 422.
void update_field(runtime& rt, std::int64_t tenant, domain::field_entity entity, std::int64_t id,
                  field_patch patch, callback<domain::custom_field> reply);
// Soft: is_active = false, values kept. Hard: the definition and every value under its name.
void delete_field(runtime& rt, std::int64_t tenant, domain::field_entity entity, std::int64_t id,
                  bool hard, callback<domain::done> reply);

} // namespace crm::actors
