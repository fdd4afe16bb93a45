// The shared inbox's teams (contract §12, docs/channels.md "Teams and assignment"): who answers
// the conversations of which channels, and who is available. A new conversation on a team's
// channel goes to the available member with the fewest open conversations (under the team's
// cap), round-robin among equals. The inbox actor's store (docs/aggregates.md): its state and
// rules, unit-tested without an actor.
#pragma once
#include "domain/failure.hpp"
#include "domain/page.hpp"

#include <boost/json/fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace crm::domain {

struct team {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string name;
  std::vector<std::int64_t> member_ids;   // active users of the tenant
  std::vector<std::int64_t> channel_ids;  // a channel belongs to one team at most
  std::optional<int> max_open_per_member; // none: no cap
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

namespace team_rules {
inline constexpr std::size_t name_max = 100;
inline constexpr std::size_t members_max = 200;
inline constexpr std::size_t channels_max = 50;
inline constexpr int max_open_max = 10000;
} // namespace team_rules

boost::json::object team_to_json(const team& t);

struct team_patch {
  std::optional<std::string> name;
  std::optional<std::vector<std::int64_t>> member_ids;
  std::optional<std::vector<std::int64_t>> channel_ids;
  std::optional<std::optional<int>> max_open_per_member;
};

// Where a channel's new conversations go: its team, the members and the cap.
struct team_route {
  std::int64_t team_id = 0;
  std::vector<std::int64_t> members;
  std::optional<int> max_open;
};

struct inbox_store {
  std::map<std::int64_t, team> teams; // by id
  std::set<std::int64_t> unavailable; // users who said they are not available

  outcome<team> get(std::int64_t id) const;
  page<team> list(int number, int per_page) const; // by name, then id

  // What a change would store, or why it may not: a channel another team holds → 409.
  outcome<team> plan_create(team t, std::int64_t tenant, std::int64_t now) const;
  outcome<team> plan_update(std::int64_t id, const team_patch& p, std::int64_t now) const;
  outcome<team> plan_delete(std::int64_t id) const;

  void put(const team& t);
  void erase(std::int64_t id);
  void set_available(std::int64_t user, bool available);
  bool available(std::int64_t user) const { return !unavailable.count(user); }

  // Each channel a team serves, with its route (for the channels actor).
  std::map<std::int64_t, team_route> routes() const;
};

// The member a new conversation of route `r` goes to: available, under the cap, with the fewest
// open conversations (`open_counts`); among equals the one assigned longest ago
// (`last_assigned`, µs; never: first), then the lowest id. Nothing when no one can take it.
std::optional<std::int64_t>
pick_assignee(const team_route& r, const std::set<std::int64_t>& unavailable,
              const std::map<std::int64_t, std::int64_t>& open_counts,
              const std::map<std::int64_t, std::int64_t>& last_assigned);

} // namespace crm::domain
