// Saved views (contract §11, docs/design.md "Views"), owned by the tenant's views actor: their
// only writer, answering reads from memory. Answers are the JSON the API returns, but `get_view`
// gives the view itself (the HTTP layer runs its search).
#pragma once
#include "actors/callback.hpp"
#include "domain/saved_view.hpp"

#include <string>

namespace crm::actors {

class runtime;

void list_views(runtime& rt, std::int64_t tenant, domain::requester by, int page, int per_page,
                callback<std::string> reply);
// A shared view or one of `by`'s own (404 otherwise; 403 for another tenant's).
void get_view(runtime& rt, std::int64_t tenant, std::int64_t id, domain::requester by,
              callback<domain::saved_view> reply);
// `v.name` and `v.filter` set (the filter already checked as a search).
void create_view(runtime& rt, std::int64_t tenant, domain::saved_view v, bool shared,
                 domain::requester by, callback<std::string> reply);
void update_view(runtime& rt, std::int64_t tenant, std::int64_t id, domain::view_patch p,
                 domain::requester by, callback<std::string> reply);
void delete_view(runtime& rt, std::int64_t tenant, std::int64_t id, domain::requester by,
                 callback<domain::done> reply);

} // namespace crm::actors
