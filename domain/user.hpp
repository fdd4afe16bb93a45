// Users, roles and the permission matrix of contract §3.
#pragma once
#include "domain/failure.hpp"
#include "domain/page.hpp"

#include <cstdint>
#include <map>
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

// Who asks for a change of a record that has an author or an owner (a note, a task, a view): the
// user (none for an API key or a workflow) and the role they act with.
struct requester {
  std::optional<std::int64_t> user_id;
  role acting_role = role::viewer;
};

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

// A change of a user as an admin (or the user, for the password) asks for it; absent members
// stay. Password hashes arrive already computed (hashing runs on the hashing pool).
struct user_patch {
  std::optional<std::string> full_name;
  std::optional<domain::role> role;
  std::optional<bool> is_active;
  std::optional<std::string> password_hash;
};

// What a patch stores, and whether the user's sessions end with it (a role, password or
// deactivation change).
struct user_update {
  user next;
  bool revoke = false;
};

// The users of one tenant and the rules that span them (the users actor's store,
// docs/aggregates.md).
struct user_directory {
  std::map<std::int64_t, user> users; // by id, the list order

  outcome<user> get(std::int64_t id) const;
  page<user> list(int number, int per_page) const;
  std::size_t active_admins() const;
  // The tenant's last active admin cannot be demoted or deactivated (409).
  outcome<user_update> plan_update(std::int64_t id, const user_patch& p) const;
  void put(const user& u) { users[u.id] = u; }
};

} // namespace crm::domain
