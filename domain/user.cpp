#include "domain/user.hpp"

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

} // namespace crm::domain
