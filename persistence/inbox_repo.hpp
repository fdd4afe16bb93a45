// The shared inbox's teams, who is available and the canned responses (migrations 026, 027,
// domain/inbox.hpp): the inbox actor's load and its writes, each in one transaction with the
// tenant's fence.
#pragma once
#include "domain/inbox.hpp"

#include <cstdint>
#include <optional>

namespace crm::persistence {

class pg_conn;

// The tenant's teams, and the users who are not available (said so, or deactivated).
domain::inbox_store load_inbox(pg_conn& c, std::int64_t tenant_id);
std::optional<std::int64_t> tenant_of_team(pg_conn& c, std::int64_t id);

// The team as stored. A member that is not an active user of the tenant, or a channel not the
// tenant's: 422 at body.member_ids / body.channel_ids, nothing written.
domain::outcome<domain::team> insert_team(pg_conn& c, const domain::team& t);
domain::outcome<domain::team> update_team(pg_conn& c, const domain::team& t);
domain::outcome<domain::team> delete_team(pg_conn& c, const domain::team& t);
// Several teams' changes in one transaction (a channel moved from one team to another).
domain::outcome<std::vector<domain::team>>
update_teams(pg_conn& c, const std::vector<domain::team>& teams, std::int64_t tenant_id);
// Canned responses, as stored. A shortcode another one has (written by another node meanwhile)
// → 409, nothing written.
std::optional<std::int64_t> tenant_of_canned(pg_conn& c, std::int64_t id);
domain::outcome<domain::canned_response> insert_canned(pg_conn& c,
                                                       const domain::canned_response& r);
domain::outcome<domain::canned_response> update_canned(pg_conn& c,
                                                       const domain::canned_response& r);
domain::outcome<domain::canned_response> delete_canned(pg_conn& c,
                                                       const domain::canned_response& r);
void set_availability(pg_conn& c, std::int64_t tenant_id, std::int64_t user_id, bool available);
// Whether new conversations may go to the user now: active, and not said otherwise.
bool available_now(pg_conn& c, std::int64_t tenant_id, std::int64_t user_id);

} // namespace crm::persistence
