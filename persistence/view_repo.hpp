// Saved views (migration 034, domain/saved_view.hpp): the views actor's load and its writes, each
// in one transaction with the tenant's fence.
#pragma once
#include "domain/saved_view.hpp"

#include <cstdint>
#include <optional>

namespace crm::persistence {

class pg_conn;

domain::view_store load_views(pg_conn& c, std::int64_t tenant_id);
std::optional<std::int64_t> tenant_of_view(pg_conn& c, std::int64_t id);

// The view as stored (id from the database); a name taken meanwhile is errc::conflict.
domain::outcome<domain::saved_view> insert_view(pg_conn& c, const domain::saved_view& v);
// Name, filter and updated_at; not_found when the view is gone.
domain::outcome<domain::saved_view> update_view(pg_conn& c, const domain::saved_view& v);
domain::outcome<domain::saved_view> delete_view(pg_conn& c, const domain::saved_view& v);

} // namespace crm::persistence
