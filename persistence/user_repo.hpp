// SQL for tenants, users and login sessions. Blocking: call only on a pg_pool thread (or in
// the CLI). Failures other than the ones returned as values throw.
#pragma once
#include "domain/failure.hpp"
#include "domain/user.hpp"
#include "persistence/pg_pool.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crm::persistence {

struct tenant_created {
  std::int64_t tenant_id = 0;
  std::int64_t user_id = 0;
};

// Creates a tenant (with its default sales pipeline and default currency, ISO 4217) and its
// first admin in one transaction; duplicate e-mail → errc::duplicate_email.
domain::outcome<tenant_created> create_tenant(pg_conn& c, const std::string& name,
                                              const domain::user& admin,
                                              const std::string& currency = "USD");

// `carecrm tenant list`.
struct tenant_summary {
  std::int64_t id = 0;
  std::string name;
  std::int64_t created_at = 0; // micros
  std::int64_t users = 0;
  std::int64_t active_users = 0;
  std::int64_t contacts = 0;
};
std::vector<tenant_summary> list_tenants(pg_conn& c);

std::optional<domain::user> find_user_by_email(pg_conn& c, const std::string& email);
std::vector<domain::user> users_of_tenant(pg_conn& c, std::int64_t tenant_id);
std::optional<std::int64_t> tenant_of_user(pg_conn& c, std::int64_t user_id);

// Inserts `u` (id and timestamps are set from the database); duplicate e-mail →
// errc::duplicate_email.
domain::outcome<domain::user> insert_user(pg_conn& c, domain::user u);

struct user_update_result {
  domain::user stored;
  std::vector<std::string> revoked_sessions; // sids revoked in the same transaction
};

// Writes the mutable fields of `u`; when `revoke_sessions`, revokes the user's live sessions
// in the same transaction and returns their ids.
user_update_result update_user(pg_conn& c, const domain::user& u, bool revoke_sessions);

// Sessions.
void insert_session(pg_conn& c, const std::string& sid, std::int64_t user_id,
                    std::int64_t tenant_id);
// Marks a refresh: true if the session exists and is not revoked.
bool touch_session(pg_conn& c, const std::string& sid);
// Revokes one session (logout); returns whether it was live.
bool revoke_session(pg_conn& c, const std::string& sid);

struct revoked_session {
  std::string sid;
  std::int64_t revoked_at = 0; // seconds since the epoch
};
// Sessions revoked within the last `seconds` (start-up load of the revocation list).
std::vector<revoked_session> recently_revoked_sessions(pg_conn& c, std::int64_t seconds);

} // namespace crm::persistence
