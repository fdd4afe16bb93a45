// The shared inbox of a tenant (contract §12, docs/channels.md "Teams and assignment"): its teams
// and who is available, owned by the tenant's inbox actor on the record kernel. After each change
// the channels actor is told where each channel's new conversations go. Answers are the JSON the
// API returns.
#pragma once
#include "actors/callback.hpp"
#include "domain/inbox.hpp"

#include <optional>
#include <string>

namespace crm::actors {

class runtime;

void list_teams(runtime& rt, std::int64_t tenant, int page, int per_page,
                callback<std::string> reply);
void get_team(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void create_team(runtime& rt, std::int64_t tenant, domain::team t, callback<std::string> reply);
void update_team(runtime& rt, std::int64_t tenant, std::int64_t id, domain::team_patch p,
                 callback<std::string> reply);
void delete_team(runtime& rt, std::int64_t tenant, std::int64_t id, callback<domain::done> reply);
// {"user_id", "available"}: whether new conversations may go to the user.
void get_availability(runtime& rt, std::int64_t tenant, std::int64_t user,
                      callback<std::string> reply);
void set_availability(runtime& rt, std::int64_t tenant, std::int64_t user, bool available,
                      callback<std::string> reply);
// Canned responses (docs/channels.md "Canned responses"): answered as the API shows them;
// `canned_text` answers the text alone (for a message that sends it).
void list_canned(runtime& rt, std::int64_t tenant, std::string query, int page, int per_page,
                 callback<std::string> reply);
void get_canned(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void canned_text(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void create_canned(runtime& rt, std::int64_t tenant, domain::canned_response r,
                   callback<std::string> reply);
void update_canned(runtime& rt, std::int64_t tenant, std::int64_t id, domain::canned_patch p,
                   callback<std::string> reply);
void delete_canned(runtime& rt, std::int64_t tenant, std::int64_t id, callback<domain::done> reply);
// A channel's team, set from the channel (none: no team): answered once the channels actor
// routes by it. No such team → 404 (a team of another tenant: 403).
void set_channel_team(runtime& rt, std::int64_t tenant, std::int64_t channel,
                      std::optional<std::int64_t> team_id, callback<domain::done> reply);
// A user was deactivated or activated again: routing reads whether they are available now.
// Answered once the channels actor has been told.
void user_changed(runtime& rt, std::int64_t tenant, std::int64_t user,
                  callback<domain::done> reply);

} // namespace crm::actors
