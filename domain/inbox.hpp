// The shared inbox's teams (contract §12, docs/channels.md "Teams and assignment"): who answers
// the conversations of which channels, and who is available. A new conversation on a team's
// channel goes to the available member with the fewest open conversations (under the team's
// cap), round-robin among equals. And its canned responses ("Canned responses"): answers kept
// under a shortcode, with {{contact.*}} placeholders filled in for the conversation's contact.
// The inbox actor's store (docs/aggregates.md): its state and rules, unit-tested without an
// actor.
#pragma once
#include "domain/failure.hpp"
#include "domain/page.hpp"

#include <boost/json/fwd.hpp>

#include <array>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

struct contact;
struct conversation;

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

// A canned response: `text` sent as a message in place of typing it.
struct canned_response {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string shortcode; // unique in the tenant
  std::string text;
  std::optional<std::int64_t> created_by; // the user (none: an API key)
  std::int64_t created_at = 0;
  std::int64_t updated_at = 0;
};

namespace canned_rules {
// A shortcode: 1 to shortcode_max of a-z, 0-9, '_' and '-' (what staff type after "/").
inline constexpr std::size_t shortcode_max = 32;
inline constexpr std::size_t text_max = 4096; // as a message's text
inline constexpr std::size_t query_max = 100;
// The placeholders a text may use, each filled from the conversation's contact (empty when the
// contact has no value).
inline constexpr std::array<std::string_view, 5> placeholders{
    "contact.first_name", "contact.last_name", "contact.full_name", "contact.email",
    "contact.phone"};
} // namespace canned_rules

bool is_shortcode(std::string_view s);
// The placeholders of `text` that are not canned_rules::placeholders ("{{contact.age}}").
std::vector<std::string> unknown_placeholders(std::string_view text);
// `text` with its placeholders filled from `c`.
std::string fill_for_contact(std::string_view text, const contact& c);

boost::json::object canned_to_json(const canned_response& r);

struct canned_patch {
  std::optional<std::string> shortcode;
  std::optional<std::string> text;
};

// Where a channel's new conversations go: its team, the members and the cap.
struct team_route {
  std::int64_t team_id = 0;
  std::vector<std::int64_t> members;
  std::optional<int> max_open;
};

struct inbox_store {
  std::map<std::int64_t, team> teams;             // by id
  std::set<std::int64_t> unavailable;             // users who said they are not available
  std::map<std::int64_t, canned_response> canned; // by id

  outcome<team> get(std::int64_t id) const;
  page<team> list(int number, int per_page) const; // by name, then id

  // What a change would store, or why it may not: a channel another team holds → 409.
  outcome<team> plan_create(team t, std::int64_t tenant, std::int64_t now) const;
  outcome<team> plan_update(std::int64_t id, const team_patch& p, std::int64_t now) const;
  outcome<team> plan_delete(std::int64_t id) const;
  // A channel's team set from the channel (PATCH /channels/{id} team_id; none: no team): the
  // teams whose channel_ids change (taken from one, given to the other). No such team → 404.
  outcome<std::vector<team>> plan_channel_team(std::int64_t channel,
                                               std::optional<std::int64_t> team_id,
                                               std::int64_t now) const;

  void put(const team& t);
  void erase(std::int64_t id);
  void set_available(std::int64_t user, bool available);
  bool available(std::int64_t user) const { return !unavailable.count(user); }

  // Canned responses: a shortcode another one has → 409. `query` picks those whose shortcode
  // starts with it or whose text holds it (case aside); listed by shortcode.
  outcome<canned_response> get_canned(std::int64_t id) const;
  page<canned_response> list_canned(const std::string& query, int number, int per_page) const;
  outcome<canned_response> plan_create_canned(canned_response r, std::int64_t tenant,
                                              std::int64_t now) const;
  outcome<canned_response> plan_update_canned(std::int64_t id, const canned_patch& p,
                                              std::int64_t now) const;
  void put_canned(const canned_response& r);
  void erase_canned(std::int64_t id);

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

// Each assignee's open (not closed) conversations, kept as conversations change: a new
// conversation's assignment reads it instead of counting all of a tenant's conversations.
class open_load {
public:
  using counts = std::map<std::int64_t, std::int64_t>; // user id → open conversations
  // `before` is what was held (none: new), `after` what is held now (none: gone).
  void change(const conversation* before, const conversation* after) {
    adjust(counts_, before, after);
  }
  void clear() { counts_.clear(); }
  const counts& of_assignees() const { return counts_; }
  // The same change applied to a copy (a conversation staged but not committed yet).
  static void adjust(counts& c, const conversation* before, const conversation* after);

private:
  counts counts_;
};

} // namespace crm::domain
