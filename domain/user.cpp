#include "domain/user.hpp"

#include <iterator>

namespace crm::domain {

std::optional<role> parse_role(std::string_view s) {
  if (s == "viewer") return role::viewer;
  if (s == "agent") return role::agent;
  if (s == "manager") return role::manager;
  if (s == "admin") return role::admin;
  return std::nullopt;
}

std::string_view to_string(role r) {
  switch (r) {
  case role::viewer: return "viewer";
  case role::agent: return "agent";
  case role::manager: return "manager";
  case role::admin: return "admin";
  }
  return "viewer";
}

outcome<user> user_directory::get(std::int64_t id) const {
  if (auto it = users.find(id); it != users.end()) return it->second;
  return failure::of(errc::not_found, "user not found");
}

page<user> user_directory::list(int number, int per_page) const {
  page<user> out;
  out.number = number;
  out.per_page = per_page;
  out.total = static_cast<std::int64_t>(users.size());
  auto skip = static_cast<std::int64_t>(number - 1) * per_page;
  auto it = users.begin();
  if (skip < out.total)
    std::advance(it, skip);
  else
    it = users.end();
  for (; it != users.end() && static_cast<int>(out.items.size()) < per_page; ++it)
    out.items.push_back(it->second);
  return out;
}

std::size_t user_directory::active_admins() const {
  std::size_t n = 0;
  for (auto& [id, u] : users)
    if (u.is_active && u.user_role == role::admin) ++n;
  return n;
}

outcome<user_update> user_directory::plan_update(std::int64_t id, const user_patch& p) const {
  auto it = users.find(id);
  if (it == users.end()) return failure::of(errc::not_found, "user not found");
  const auto& cur = it->second;
  user_update out{cur, false};
  auto& next = out.next;
  if (p.full_name) next.full_name = *p.full_name;
  if (p.role && *p.role != next.user_role) {
    next.user_role = *p.role;
    out.revoke = true;
  }
  if (p.is_active && *p.is_active != next.is_active) {
    next.is_active = *p.is_active;
    out.revoke = out.revoke || !next.is_active;
  }
  if (p.password_hash) {
    next.password_hash = *p.password_hash;
    out.revoke = true;
  }
  bool was_admin = cur.is_active && cur.user_role == role::admin;
  bool stays_admin = next.is_active && next.user_role == role::admin;
  if (was_admin && !stays_admin && active_admins() <= 1)
    return failure::of(errc::conflict,
                       "the last active admin of a tenant cannot be demoted or deactivated");
  return out;
}

} // namespace crm::domain
