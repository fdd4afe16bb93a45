#include "domain/inbox.hpp"

#include "domain/channel.hpp"
#include "domain/clock.hpp"
#include "domain/contact.hpp"
#include "domain/placeholders.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <tuple>

namespace crm::domain {

namespace json = boost::json;

json::object team_to_json(const team& t) {
  json::array members(t.member_ids.begin(), t.member_ids.end());
  json::array channels(t.channel_ids.begin(), t.channel_ids.end());
  json::object o;
  o["id"] = t.id;
  o["name"] = t.name;
  o["member_ids"] = std::move(members);
  o["channel_ids"] = std::move(channels);
  o["max_open_per_member"] =
      t.max_open_per_member ? json::value(*t.max_open_per_member) : json::value(nullptr);
  o["created_at"] = format_rfc3339(t.created_at);
  o["updated_at"] = format_rfc3339(t.updated_at);
  return o;
}

namespace {

failure not_found() {
  return failure::of(errc::not_found, "team not found");
}

// Sorted, without repeats.
std::vector<std::int64_t> set_of(std::vector<std::int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// A channel of `t` that another team serves already.
std::optional<failure> channel_taken(const inbox_store& s, const team& t) {
  for (auto& [id, other] : s.teams) {
    if (id == t.id) continue;
    for (auto c : t.channel_ids)
      if (std::find(other.channel_ids.begin(), other.channel_ids.end(), c) !=
          other.channel_ids.end())
        return failure::of(errc::conflict, "channel " + std::to_string(c) + " is team " +
                                               std::to_string(id) + "'s already");
  }
  return std::nullopt;
}

} // namespace

outcome<team> inbox_store::get(std::int64_t id) const {
  auto it = teams.find(id);
  if (it == teams.end()) return not_found();
  return it->second;
}

page<team> inbox_store::list(int number, int per_page) const {
  std::vector<const team*> all;
  for (auto& [id, t] : teams) all.push_back(&t);
  std::sort(all.begin(), all.end(), [](const team* a, const team* b) {
    return std::tie(a->name, a->id) < std::tie(b->name, b->id);
  });
  return page_of(all, number, per_page);
}

outcome<team> inbox_store::plan_create(team t, std::int64_t tenant, std::int64_t now) const {
  t.id = 0;
  t.tenant_id = tenant;
  t.member_ids = set_of(std::move(t.member_ids));
  t.channel_ids = set_of(std::move(t.channel_ids));
  t.created_at = t.updated_at = now;
  if (auto taken = channel_taken(*this, t)) return *taken;
  return t;
}

outcome<team> inbox_store::plan_update(std::int64_t id, const team_patch& p,
                                       std::int64_t now) const {
  auto found = get(id);
  if (!found) return found;
  auto next = *found;
  if (p.name) next.name = *p.name;
  if (p.member_ids) next.member_ids = set_of(*p.member_ids);
  if (p.channel_ids) next.channel_ids = set_of(*p.channel_ids);
  if (p.max_open_per_member) next.max_open_per_member = *p.max_open_per_member;
  next.updated_at = std::max(now, found->updated_at + 1);
  if (auto taken = channel_taken(*this, next)) return *taken;
  return next;
}

outcome<team> inbox_store::plan_delete(std::int64_t id) const {
  return get(id);
}

outcome<std::vector<team>> inbox_store::plan_channel_team(std::int64_t channel,
                                                          std::optional<std::int64_t> team_id,
                                                          std::int64_t now) const {
  if (team_id && !teams.count(*team_id)) return not_found();
  std::vector<team> changed;
  for (auto& [id, t] : teams) {
    const bool has = std::binary_search(t.channel_ids.begin(), t.channel_ids.end(), channel);
    const bool wants = team_id && *team_id == id;
    if (has == wants) continue;
    auto next = t;
    if (wants) {
      next.channel_ids.push_back(channel);
      next.channel_ids = set_of(std::move(next.channel_ids));
    } else {
      std::erase(next.channel_ids, channel);
    }
    next.updated_at = std::max(now, t.updated_at + 1);
    changed.push_back(std::move(next));
  }
  return changed;
}

void inbox_store::put(const team& t) {
  teams[t.id] = t;
}

void inbox_store::erase(std::int64_t id) {
  teams.erase(id);
}

void inbox_store::set_available(std::int64_t user, bool available) {
  if (available)
    unavailable.erase(user);
  else
    unavailable.insert(user);
}

std::map<std::int64_t, team_route> inbox_store::routes() const {
  std::map<std::int64_t, team_route> out;
  for (auto& [id, t] : teams)
    for (auto c : t.channel_ids) out[c] = {id, t.member_ids, t.max_open_per_member};
  return out;
}

// ---- canned responses ----------------------------------------------------------------------

bool is_shortcode(std::string_view s) {
  if (s.empty() || s.size() > canned_rules::shortcode_max) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::vector<std::string> unknown_placeholders(std::string_view text) {
  std::vector<std::string> out;
  for (auto& name : placeholder_names(text))
    if (std::find(canned_rules::placeholders.begin(), canned_rules::placeholders.end(), name) ==
        canned_rules::placeholders.end())
      out.push_back(name);
  return out;
}

std::string fill_for_contact(std::string_view text, const contact& c) {
  return fill_placeholders(text, [&c](std::string_view name) -> std::optional<std::string> {
    if (name == "contact.first_name") return c.first_name;
    if (name == "contact.last_name") return c.last_name;
    if (name == "contact.full_name")
      return c.last_name ? c.first_name + " " + *c.last_name : c.first_name;
    if (name == "contact.email") return c.email;
    if (name == "contact.phone") return c.phone;
    return std::nullopt;
  });
}

json::object canned_to_json(const canned_response& r) {
  json::object o;
  o["id"] = r.id;
  o["shortcode"] = r.shortcode;
  o["text"] = r.text;
  o["created_by"] = r.created_by ? json::value(*r.created_by) : json::value(nullptr);
  o["created_at"] = format_rfc3339(r.created_at);
  o["updated_at"] = format_rfc3339(r.updated_at);
  return o;
}

namespace {

failure canned_not_found() {
  return failure::of(errc::not_found, "canned response not found");
}

// A shortcode another canned response has.
std::optional<failure> shortcode_taken(const inbox_store& s, const canned_response& r) {
  for (auto& [id, other] : s.canned)
    if (id != r.id && other.shortcode == r.shortcode)
      return failure::of(errc::conflict, "the shortcode \"" + r.shortcode +
                                             "\" is canned response " + std::to_string(id) +
                                             "'s already");
  return std::nullopt;
}

} // namespace

outcome<canned_response> inbox_store::get_canned(std::int64_t id) const {
  auto it = canned.find(id);
  if (it == canned.end()) return canned_not_found();
  return it->second;
}

page<canned_response> inbox_store::list_canned(const std::string& query, int number,
                                               int per_page) const {
  auto q = ascii_lower(query);
  std::vector<const canned_response*> all;
  for (auto& [id, r] : canned)
    if (q.empty() || r.shortcode.starts_with(q) || ascii_lower(r.text).find(q) != std::string::npos)
      all.push_back(&r);
  std::sort(all.begin(), all.end(), [](const canned_response* a, const canned_response* b) {
    return a->shortcode < b->shortcode;
  });
  return page_of(all, number, per_page);
}

outcome<canned_response> inbox_store::plan_create_canned(canned_response r, std::int64_t tenant,
                                                         std::int64_t now) const {
  r.id = 0;
  r.tenant_id = tenant;
  r.created_at = r.updated_at = now;
  if (auto taken = shortcode_taken(*this, r)) return *taken;
  return r;
}

outcome<canned_response> inbox_store::plan_update_canned(std::int64_t id, const canned_patch& p,
                                                         std::int64_t now) const {
  auto found = get_canned(id);
  if (!found) return found;
  auto next = *found;
  if (p.shortcode) next.shortcode = *p.shortcode;
  if (p.text) next.text = *p.text;
  next.updated_at = std::max(now, found->updated_at + 1);
  if (auto taken = shortcode_taken(*this, next)) return *taken;
  return next;
}

void inbox_store::put_canned(const canned_response& r) {
  canned[r.id] = r;
}

void inbox_store::erase_canned(std::int64_t id) {
  canned.erase(id);
}

void open_load::adjust(counts& c, const conversation* before, const conversation* after) {
  auto add = [&c](const conversation* x, std::int64_t by) {
    if (!x || !x->assignee_id || x->status == conversation_status::closed) return;
    auto it = c.try_emplace(*x->assignee_id, 0).first;
    if ((it->second += by) <= 0) c.erase(it);
  };
  add(before, -1);
  add(after, +1);
}

std::optional<std::int64_t>
pick_assignee(const team_route& r, const std::set<std::int64_t>& unavailable,
              const std::map<std::int64_t, std::int64_t>& open_counts,
              const std::map<std::int64_t, std::int64_t>& last_assigned) {
  auto get = [](const std::map<std::int64_t, std::int64_t>& m, std::int64_t k) {
    auto it = m.find(k);
    return it == m.end() ? std::int64_t{0} : it->second;
  };
  std::optional<std::int64_t> best;
  std::tuple<std::int64_t, std::int64_t, std::int64_t> best_key{};
  for (auto m : r.members) {
    if (unavailable.count(m)) continue;
    auto open = get(open_counts, m);
    if (r.max_open && open >= *r.max_open) continue;
    auto key = std::make_tuple(open, get(last_assigned, m), m);
    if (!best || key < best_key) {
      best = m;
      best_key = key;
    }
  }
  return best;
}

} // namespace crm::domain
