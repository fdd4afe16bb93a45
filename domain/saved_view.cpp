#include "domain/saved_view.hpp"

#include "domain/clock.hpp"
#include "domain/json_parse.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <vector>

namespace crm::domain {

namespace json = boost::json;

json::object view_to_json(const saved_view& v) {
  json::object o;
  o["id"] = v.id;
  o["name"] = v.name;
  o["shared"] = v.shared();
  o["owner_id"] = v.owner_id ? json::value(*v.owner_id) : json::value(nullptr);
  json::error_code ec;
  auto filter = parse_json(v.filter, ec);
  o["filter"] = !ec && filter.is_object() ? std::move(filter) : json::value(json::object{});
  o["created_at"] = format_rfc3339(v.created_at);
  o["updated_at"] = format_rfc3339(v.updated_at);
  return o;
}

namespace view_detail {

failure view_not_found() {
  return failure::of(errc::not_found, "view not found");
}

bool manages(const requester& by) {
  return by.acting_role == role::manager || by.acting_role == role::admin;
}

// Whether `by` may see `v`: shared, or theirs.
bool visible(const saved_view& v, const requester& by) {
  return v.shared() || (by.user_id && v.owner_id == by.user_id);
}

// Whether `by` may change `v` (seen already): a shared view is a manager's, an own view its
// owner's.
std::optional<failure> refused(const saved_view& v, const requester& by) {
  if (v.shared() && !manages(by))
    return failure::of(errc::insufficient_permissions,
                       "only a manager or an admin may change the tenant's shared views");
  return std::nullopt;
}

} // namespace view_detail

outcome<saved_view> view_store::get(std::int64_t id, const requester& by) const {
  auto it = views.find(id);
  if (it == views.end() || !view_detail::visible(it->second, by))
    return view_detail::view_not_found();
  return it->second;
}

page<saved_view> view_store::list(const requester& by, int number, int per_page) const {
  std::vector<const saved_view*> found;
  for (auto& [id, v] : views)
    if (view_detail::visible(v, by)) found.push_back(&v);
  std::sort(found.begin(), found.end(), [](const saved_view* a, const saved_view* b) {
    if (a->shared() != b->shared()) return a->shared();
    if (a->name != b->name) return a->name < b->name;
    return a->id < b->id;
  });
  return page_of(found, number, per_page);
}

outcome<saved_view> view_store::plan_create(saved_view v, bool shared, std::int64_t tenant,
                                            const requester& by, std::int64_t now) const {
  if (shared && !view_detail::manages(by))
    return failure::of(errc::insufficient_permissions,
                       "only a manager or an admin may share a view with the tenant");
  if (!shared && !by.user_id)
    return failure::invalid({{{std::string("body"), std::string("shared")},
                              "an API key is nobody: its views are shared ones",
                              "value_error"}});
  v.id = 0;
  v.tenant_id = tenant;
  v.owner_id = shared ? std::nullopt : by.user_id;
  std::size_t same_scope = 0;
  for (auto& [id, other] : views) {
    if (other.owner_id != v.owner_id) continue;
    ++same_scope;
    if (other.name == v.name)
      return failure::of(errc::conflict, "a view with this name exists already");
  }
  if (same_scope >= view_rules::views_max)
    return failure::of(errc::conflict, "at most " + std::to_string(view_rules::views_max) +
                                           " views here: delete one first");
  v.created_at = v.updated_at = now;
  return v;
}

outcome<saved_view> view_store::plan_update(std::int64_t id, const view_patch& p,
                                            const requester& by, std::int64_t now) const {
  auto found = get(id, by);
  if (!found) return found;
  if (auto no = view_detail::refused(*found, by)) return *no;
  auto next = *found;
  if (p.name && *p.name != next.name) {
    for (auto& [other_id, other] : views)
      if (other_id != id && other.owner_id == next.owner_id && other.name == *p.name)
        return failure::of(errc::conflict, "a view with this name exists already");
    next.name = *p.name;
  }
  if (p.filter) next.filter = *p.filter;
  next.updated_at = std::max(now, found->updated_at + 1);
  return next;
}

outcome<saved_view> view_store::plan_delete(std::int64_t id, const requester& by) const {
  auto found = get(id, by);
  if (!found) return found;
  if (auto no = view_detail::refused(*found, by)) return *no;
  return found;
}

void view_store::put(const saved_view& v) {
  views[v.id] = v;
}

void view_store::erase(std::int64_t id) {
  views.erase(id);
}

} // namespace crm::domain
