#include "domain/contact_merge.hpp"

#include "domain/json_parse.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <set>
#include <unordered_map>

namespace crm::domain {
namespace merge_detail {

namespace json = boost::json;

bool takes_duplicate(const merge_preferences& prefer, std::string_view field) {
  auto it = prefer.find(field);
  return it != prefer.end() && it->second == merge_side::duplicate;
}

template <class T>
void choose(std::optional<T>& mine, const std::optional<T>& theirs, bool prefer_theirs) {
  if (theirs && (prefer_theirs || !mine)) mine = theirs;
}

json::object object_of(std::string_view text) {
  json::error_code ec;
  auto v = parse_json(text, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.as_object());
}

std::string combined_custom(std::string_view mine, std::string_view theirs, bool prefer_theirs) {
  auto out = object_of(mine);
  for (auto& [key, value] : object_of(theirs)) {
    auto it = out.find(key);
    bool missing = it == out.end() || it->value().is_null();
    if (value.is_null() || (!missing && !prefer_theirs)) continue;
    out[key] = value;
  }
  return json::serialize(out);
}

// Levenshtein distance, stopping once it exceeds `limit`.
std::size_t distance(std::string_view a, std::string_view b, std::size_t limit) {
  if (a.size() > b.size()) std::swap(a, b);
  if (b.size() - a.size() > limit) return limit + 1;
  std::vector<std::size_t> row(a.size() + 1);
  for (std::size_t i = 0; i <= a.size(); ++i) row[i] = i;
  for (std::size_t j = 1; j <= b.size(); ++j) {
    std::size_t diagonal = row[0];
    row[0] = j;
    std::size_t best = row[0];
    for (std::size_t i = 1; i <= a.size(); ++i) {
      auto above = row[i];
      row[i] = std::min({row[i] + 1, row[i - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
      best = std::min(best, row[i]);
    }
    if (best > limit) return limit + 1;
  }
  return row[a.size()];
}

using pair_key = std::pair<std::int64_t, std::int64_t>;

pair_key ordered(std::int64_t a, std::int64_t b) {
  return a < b ? pair_key{a, b} : pair_key{b, a};
}

} // namespace merge_detail

contact merged_contact(const contact& survivor, const contact& duplicate,
                       const merge_preferences& prefer, std::string_view duplicate_custom_fields) {
  using merge_detail::choose;
  using merge_detail::takes_duplicate;
  auto out = survivor;
  if (takes_duplicate(prefer, "first_name") && !duplicate.first_name.empty())
    out.first_name = duplicate.first_name;
  choose(out.last_name, duplicate.last_name, takes_duplicate(prefer, "last_name"));
  choose(out.email, duplicate.email, takes_duplicate(prefer, "email"));
  choose(out.phone, duplicate.phone, takes_duplicate(prefer, "phone"));
  choose(out.company_id, duplicate.company_id, takes_duplicate(prefer, "company_id"));
  choose(out.owner_id, duplicate.owner_id, takes_duplicate(prefer, "owner_id"));
  if (takes_duplicate(prefer, "status")) out.status = duplicate.status;
  choose(out.source, duplicate.source, takes_duplicate(prefer, "source"));
  for (auto& tag : duplicate.tags) {
    auto lower = ascii_lower(tag);
    bool known = std::any_of(out.tags.begin(), out.tags.end(),
                             [&](const std::string& t) { return ascii_lower(t) == lower; });
    if (!known) out.tags.push_back(tag);
  }
  out.custom_fields = merge_detail::combined_custom(survivor.custom_fields, duplicate_custom_fields,
                                                    takes_duplicate(prefer, "custom_fields"));
  return out;
}

std::string mailbox_of(std::string_view email) {
  auto lower = ascii_lower(email);
  auto at = lower.rfind('@');
  if (at == std::string::npos) return lower;
  auto local = lower.substr(0, at);
  auto host = lower.substr(at + 1);
  if (auto plus = local.find('+'); plus != std::string::npos && plus > 0) local.resize(plus);
  if (host == "gmail.com" || host == "googlemail.com") {
    std::erase(local, '.');
    host = "gmail.com";
  }
  return local + "@" + host;
}

std::string name_key(const contact& c) {
  std::string out;
  auto add = [&](std::string_view part) {
    for (char ch : part) {
      bool gap = ch == ' ' || ch == '.' || ch == '-' || ch == '\t';
      if (gap) {
        if (!out.empty() && out.back() != ' ') out += ' ';
      } else {
        out += (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
      }
    }
    if (!out.empty() && out.back() != ' ') out += ' ';
  };
  add(c.first_name);
  if (c.last_name) add(*c.last_name);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

bool close_names(const contact& a, const contact& b) {
  auto ka = name_key(a), kb = name_key(b);
  if (ka.empty() || kb.empty()) return false;
  if (ka == kb) return true;
  auto shorter = std::min(ka.size(), kb.size());
  if (shorter < 5) return false;
  std::size_t limit = shorter >= 10 ? 2 : 1;
  return merge_detail::distance(ka, kb, limit) <= limit;
}

std::vector<duplicate_pair> find_duplicates(const std::vector<const contact*>& contacts) {
  using merge_detail::ordered;
  using merge_detail::pair_key;
  std::map<pair_key, std::set<int>> found; // reason order: 0 phone, 1 email, 2 name
  std::unordered_map<std::string, std::vector<const contact*>> phones, mailboxes;
  std::unordered_map<std::int64_t, std::vector<const contact*>> companies;
  for (auto* c : contacts) {
    if (c->phone && !c->phone->empty()) phones[*c->phone].push_back(c);
    if (c->email && !c->email->empty()) mailboxes[mailbox_of(*c->email)].push_back(c);
    if (c->company_id) companies[*c->company_id].push_back(c);
  }
  auto by_id = [](const contact* a, const contact* b) { return a->id < b->id; };
  auto pairs_of = [&](auto& groups, int reason) {
    for (auto& [key, members] : groups) {
      if (members.size() < 2) continue;
      std::sort(members.begin(), members.end(), by_id);
      auto n = std::min(members.size(), duplicate_group_max);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i + 1; j < n; ++j) {
          auto& reasons = found[ordered(members[i]->id, members[j]->id)];
          reasons.insert(reason);
          if (close_names(*members[i], *members[j])) reasons.insert(2);
        }
    }
  };
  pairs_of(phones, 0);
  pairs_of(mailboxes, 1);
  constexpr std::size_t neighbours = 3;
  for (auto& [company, members] : companies) {
    if (members.size() < 2) continue;
    std::vector<std::pair<std::string, const contact*>> keyed;
    keyed.reserve(members.size());
    for (auto* c : members) keyed.emplace_back(name_key(*c), c);
    std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second->id < b.second->id;
    });
    for (std::size_t i = 0; i < keyed.size(); ++i)
      for (std::size_t j = i + 1; j < keyed.size() && j <= i + neighbours; ++j)
        if (close_names(*keyed[i].second, *keyed[j].second))
          found[ordered(keyed[i].second->id, keyed[j].second->id)].insert(2);
  }
  static constexpr std::array<const char*, 3> names{"phone", "email", "name"};
  std::vector<duplicate_pair> out;
  out.reserve(found.size());
  for (auto& [key, reasons] : found) {
    duplicate_pair p{key.first, key.second, {}};
    for (auto r : reasons) p.reasons.emplace_back(names[static_cast<std::size_t>(r)]);
    out.push_back(std::move(p));
  }
  return out;
}

} // namespace crm::domain
