// Users, roles and the permission matrix of contract §3.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace crm::domain {

enum class role : std::uint8_t { viewer, agent, manager, admin };

std::optional<role> parse_role(std::string_view s);
std::string_view to_string(role r);

enum class permission : std::uint8_t {
  read_records,      // contacts, companies, deals, pipelines, fields, conversations
  write_records,     // create/update contacts, companies, deals, tags, messages
  delete_records,    // delete contacts, companies, deals
  manage_automation, // pipelines, workflows, AI agents
  administer,        // users, custom fields, channels, webhook subscriptions, audit log
};

constexpr bool allows(role r, permission p) {
  switch (p) {
  case permission::read_records: return true;
  case permission::write_records: return r != role::viewer;
  case permission::delete_records:
  case permission::manage_automation: return r == role::manager || r == role::admin;
  case permission::administer: return r == role::admin;
  }
  return false;
}

struct user {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string email;
  std::string full_name;
  role user_role = role::viewer;
  bool is_active = true;
  std::int64_t created_at = 0; // microseconds since the Unix epoch, UTC
  std::int64_t updated_at = 0;
  std::string password_hash; // Argon2id encoded string; never serialised to clients
};

} // namespace crm::domain
