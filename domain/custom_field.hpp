// Custom-field definitions (spec "Custom field", contract §6) and the rules their values obey.
// Values are JSON; this header names no JSON library, so validation takes the value's text.
#pragma once
#include "domain/failure.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

enum class field_entity : std::uint8_t { contact, company, deal };
enum class field_type : std::uint8_t {
  text,
  textarea,
  number,
  integer,
  boolean,
  date,
  datetime,
  email,
  phone,
  url,
  select,
  multiselect
};

std::optional<field_entity> parse_field_entity(std::string_view s);
std::string_view to_string(field_entity e);
std::optional<field_type> parse_field_type(std::string_view s);
std::string_view to_string(field_type t);
bool has_options(field_type t);

// A change of type that can never invalidate a stored value.
bool widening(field_type from, field_type to);

// `^[a-z][a-z0-9_]{0,62}$`
bool valid_field_name(std::string_view s);

struct custom_field {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  field_entity entity = field_entity::contact;
  std::string name;
  std::string label;
  field_type type = field_type::text;
  std::vector<std::string> options;
  bool required = false;
  bool is_active = true;
  // Values sealed at rest, masked for roles below manager, every disclosure audited
  // (docs/compliance.md "Sensitive fields"). Contact fields only; fixed at creation.
  bool sensitive = false;
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

// A change of a definition as a client asks for it (PATCH); absent members stay as they are.
struct field_patch {
  std::optional<std::string> name;
  std::optional<std::string> label;
  std::optional<field_type> type;
  std::optional<std::vector<std::string>> options;
  std::optional<bool> required;
  std::optional<bool> is_active;
  std::optional<bool> sensitive; // fixed at creation: a change is 409
  // Syntax issues the HTTP layer found: the rules add their own and answer one 422.
  std::vector<issue> issues;
};

// The definitions of one tenant, as every record actor sees them, and the rules of their
// changes (the fields actor's store, docs/aggregates.md). `version` grows with each committed
// change, so a newer snapshot always wins over an older one.
struct field_definitions {
  std::int64_t version = 0;
  std::vector<custom_field> fields;
  // The tenant's data key as stored (sealed by the configured keys; empty until its first
  // sensitive field): it travels with the definitions to the actors that seal values.
  std::string sealed_data_key;

  const custom_field* find(field_entity e, std::string_view name) const;
  const custom_field* by_id(std::int64_t id) const;
  // The names of the sensitive fields of `e`, active or not (inactive fields keep their values).
  std::vector<std::string> sensitive(field_entity e) const;

  // Field `id` of `e`; not_found when the tenant holds no such field, or holds it for another
  // entity.
  outcome<custom_field> get(field_entity e, std::int64_t id) const;
  // The fields of `e` by id; the inactive ones too with `include_inactive`.
  std::vector<custom_field> of(field_entity e, bool include_inactive) const;

  // What a change would store, or why it may not (pure: nothing changes here).
  // A new field of `tenant` at `now`: a name taken for its entity, active or not, is 409.
  outcome<custom_field> plan_create(custom_field f, std::int64_t tenant, std::int64_t now) const;
  // Syntax issues are 422 whatever the id; then renames, sensitivity changes, narrowing type
  // changes and removed options are 409, options on a type without them 422.
  outcome<custom_field> plan_update(field_entity e, std::int64_t id, field_patch p,
                                    std::int64_t now) const;
  // A soft delete: the field kept inactive, its values too.
  outcome<custom_field> plan_deactivate(field_entity e, std::int64_t id, std::int64_t now) const;

  // Committed changes, applied to memory.
  void put(const custom_field& f, std::int64_t committed_version, const std::string& data_key);
  void erase(std::int64_t id, std::int64_t committed_version);
};

// Sensitive values live sealed inside a record's custom_fields, in memory as in Postgres:
// {"diagnosis": {"$sealed": "sb1:..."}}. Only the members named in `keys` are touched, so a
// value a client wrote under a free key never passes for a sealed one.
inline constexpr std::string_view masked_value = "***";
// A cheap test before any parsing: could the text hold a sealed value at all?
bool may_hold_sealed(std::string_view custom_fields);
// The text with the plain values of `keys` sealed (`seal` gets each value's key and JSON text,
// so that it can bind the sealed value to its field); nothing when no value needed it.
std::optional<std::string>
seal_custom_values(std::string_view text, const std::vector<std::string>& keys,
                   const std::function<std::string(std::string_view, std::string_view)>& seal);
// The patch without the members of `keys` whose value is the mask "***" (written back by a
// client that was shown it); nothing when it holds none.
std::optional<std::string> drop_masked_values(std::string_view patch,
                                              const std::vector<std::string>& keys);
// The text with each sealed value of `keys` replaced by "***".
std::string mask_custom_values(std::string_view text, const std::vector<std::string>& keys);
// The text with each sealed value of `keys` opened (`open` gets its key and sealed text and
// answers its JSON text, or nothing when it does not open: then it stays masked); `opened` gets
// the names of those disclosed.
std::string open_custom_values(
    std::string_view text, const std::vector<std::string>& keys,
    const std::function<std::optional<std::string>(std::string_view, std::string_view)>& open,
    std::vector<std::string>& opened);
// The text with each sealed value, whatever its key, replaced by `reseal(key, sealed text)`
// (nothing: left as it is); nothing when no value changed.
std::optional<std::string> reseal_custom_values(
    std::string_view text,
    const std::function<std::optional<std::string>(std::string_view, std::string_view)>& reseal);

// Checks a JSON object text of custom values against the definitions of `entity`:
// - every key of `written` that names an inactive field → value_error;
// - every key of `written` that names an active field must hold a value of its type;
// - when `creating`, every required active field must be present (not null) in `merged`.
// Issues are reported at `prefix` + "custom_fields" + key. Keys without a definition are free.
std::vector<issue> check_custom_values(const field_definitions& defs, field_entity entity,
                                       std::string_view written, std::string_view merged,
                                       bool creating, const std::vector<loc_part>& prefix);

// A record's custom_fields after a write: `patch` (a JSON object text) merged key by key into
// `current` (null removes a key), or replacing it when `replace` (a create). Nothing when the
// patch is not an object.
std::optional<std::string> merge_custom_values(const std::string& current, const std::string& patch,
                                               bool replace);

// Converts a CSV cell to the JSON text of a value of `t` ("42" → 42 for numbers, "true"/"1" for
// booleans); nothing if it cannot be converted (the caller keeps the text, validation reports).
std::optional<std::string> cell_to_json(field_type t, std::string_view cell);

// Whether a stored JSON value equals a query parameter's text, by the value's JSON type:
// strings as text, numbers numerically, booleans from true/false/1/0.
bool value_equals(std::string_view custom_fields_json, std::string_view key, std::string_view want);

} // namespace crm::domain
