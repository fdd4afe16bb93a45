// Saved views (contract §11, docs/design.md "Views"): a named contact search kept for one user,
// or shared with the whole tenant. The views actor's store: its state and rules, unit-tested
// without an actor.
#pragma once
#include "domain/failure.hpp"
#include "domain/page.hpp"
#include "domain/user.hpp"

#include <boost/json/fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace crm::domain {

struct saved_view {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::optional<std::int64_t> owner_id; // none: shared with the tenant
  std::string name;
  std::string filter = "{}"; // the search's JSON text: filter_groups and sort
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;

  bool shared() const { return !owner_id; }
};

namespace view_rules {
inline constexpr std::size_t name_max = 100;  // characters
inline constexpr std::size_t views_max = 200; // a user's own views, and the tenant's shared ones
} // namespace view_rules

boost::json::object view_to_json(const saved_view& v);

struct view_patch {
  std::optional<std::string> name;
  std::optional<std::string> filter;
};

struct view_store {
  std::map<std::int64_t, saved_view> views; // by id

  // A shared view, or one of the asker's own; another user's view is not found (404).
  outcome<saved_view> get(std::int64_t id, const requester& by) const;
  // The tenant's shared views, then the asker's own, each by name.
  page<saved_view> list(const requester& by, int number, int per_page) const;

  // A shared view is a manager's or an admin's to make, change and delete (403 otherwise); an
  // own view needs a signed-in user (an API key is nobody: 422 at body.shared) and is only its
  // owner's. Names are unique among the shared views, and among each user's own (409).
  outcome<saved_view> plan_create(saved_view v, bool shared, std::int64_t tenant,
                                  const requester& by, std::int64_t now) const;
  outcome<saved_view> plan_update(std::int64_t id, const view_patch& p, const requester& by,
                                  std::int64_t now) const;
  outcome<saved_view> plan_delete(std::int64_t id, const requester& by) const;

  void put(const saved_view& v);
  void erase(std::int64_t id);
};

} // namespace crm::domain
