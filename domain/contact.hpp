// Contacts and companies of a tenant (spec "Contact", contract §4–§5), as plain values.
// `custom_fields` is kept as canonical JSON text of an object; JSON handling lives in http/.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

// Characters of a contact's tag, trimmed: the contact readers (contact_rules::tag_max) and the
// workflows that add tags or wait for one (workflow_rules) take it from here.
inline constexpr std::size_t contact_tag_max = 50;

enum class contact_status : std::uint8_t { active, inactive, qualified, unqualified };
enum class contact_source : std::uint8_t { website, referral, social, ads, api, import, manual };

std::optional<contact_status> parse_contact_status(std::string_view s);
std::string_view to_string(contact_status s);
std::optional<contact_source> parse_contact_source(std::string_view s);
std::string_view to_string(contact_source s);

struct contact {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string first_name;
  std::optional<std::string> last_name;
  std::optional<std::string> email;
  std::optional<std::string> phone;
  std::optional<std::int64_t> company_id;
  std::optional<std::int64_t> owner_id; // a user of the tenant (the actor checks it)
  contact_status status = contact_status::active;
  std::optional<contact_source> source;
  std::vector<std::string> tags;    // de-duplicated case-insensitively, in the order given
  std::string custom_fields = "{}"; // JSON object text
  std::int64_t created_at = 0;      // microseconds since the epoch, UTC
  std::int64_t updated_at = 0;
};

struct company {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  std::optional<std::string> domain;
  std::optional<std::string> phone;
  std::optional<std::string> industry;
  std::optional<std::string> address;
  std::string custom_fields = "{}";
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

// The keys a contact list may be sorted on (contract §4).
enum class contact_sort : std::uint8_t {
  id,
  first_name,
  last_name,
  email,
  phone,
  status,
  source,
  created_at,
  updated_at
};
std::optional<contact_sort> parse_contact_sort(std::string_view s);

} // namespace crm::domain
