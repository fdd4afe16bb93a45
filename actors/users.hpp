// The users of a tenant (contract §3), owned by the tenant's users actor: the only writer of
// its users, answering reads from memory. Password hashes arrive already computed (hashing is
// slow and runs on the hashing pool, never in an actor).
#pragma once
#include "actors/callback.hpp"
#include "domain/page.hpp"
#include "domain/user.hpp"

#include <optional>
#include <string>
#include <vector>

namespace crm::actors {

class runtime;

using user_patch = domain::user_patch;

struct user_change {
  domain::user user;
  std::vector<std::string> revoked_sessions; // sessions to refuse from now on
};

// 404 if the id exists nowhere, 403 if it belongs to another tenant.
void get_user(runtime& rt, std::int64_t tenant, std::int64_t user_id, callback<domain::user> reply);
void list_users(runtime& rt, std::int64_t tenant, int page, int per_page,
                callback<domain::page<domain::user>> reply);
// `u.tenant_id` is set from `tenant`. Duplicate e-mail anywhere → errc::duplicate_email.
void create_user(runtime& rt, std::int64_t tenant, domain::user u, callback<domain::user> reply);
// Applies the fields present. Role, password and deactivation changes revoke the user's
// sessions. The tenant's last active admin cannot be demoted or deactivated (errc::conflict).
void update_user(runtime& rt, std::int64_t tenant, std::int64_t user_id, user_patch patch,
                 callback<user_change> reply);

} // namespace crm::actors
