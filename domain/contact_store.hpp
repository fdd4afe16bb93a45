// The in-memory contacts of one tenant with the indexes the list queries need: every sort key,
// case-insensitive substring search over names, e-mail and phone (a trigram index), e-mail
// uniqueness, and tag counts. Owned by the tenant's contacts actor, so it needs no locks.
#pragma once
#include "domain/contact.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

// A filter the store answers from its value index instead of testing every contact: the
// contact search's filters on status, source, tag, owner and company, and the list's filters
// on them (docs/design.md "Contact search").
// A term holds when the contact has one of `keys` (`negated`: none of them); the terms of a
// group are AND-ed, the groups OR-ed. Keys are made by the *_value_key functions.
struct value_term {
  std::vector<std::string> keys;
  bool negated = false;
};
using value_plan = std::vector<std::vector<value_term>>;
std::string status_value_key(contact_status s);
std::string source_value_key(std::optional<contact_source> s);      // nothing: no source
std::string tag_value_key(std::string_view tag);                    // "": no tag at all
std::string owner_value_key(std::optional<std::int64_t> owner);     // nothing: no owner
std::string company_value_key(std::optional<std::int64_t> company); // nothing: no company

struct contact_query {
  std::optional<contact_status> status;
  std::optional<contact_source> source;
  std::optional<std::int64_t> company_id;
  std::optional<std::int64_t> owner_id;
  std::vector<std::string> tags;              // the contact has every one (case-insensitive)
  std::optional<std::int64_t> created_after;  // created_at >  value (microseconds)
  std::optional<std::int64_t> created_before; // created_at <  value
  std::optional<std::int64_t> updated_after;  // updated_at >  value
  std::string search;                         // case-insensitive substring, see matches_search
  std::function<bool(const contact&)> extra;  // further predicate (custom fields), may be empty
  // The same filter as `extra`, answered from the value index when no other filter is set
  // (`extra` is then not called); none: `extra` decides.
  std::shared_ptr<const value_plan> plan;
  contact_sort sort = contact_sort::id;
  bool descending = false;
  std::int64_t offset = 0;
  std::int64_t limit = 20;
};

struct contact_page {
  std::vector<const contact*> items;
  std::int64_t total = 0; // every match, not only this page
};

struct tag_count {
  std::string name; // the spelling first seen
  std::int64_t count = 0;
};

class contact_store {
public:
  contact_store();
  ~contact_store();
  contact_store(contact_store&&) noexcept;
  contact_store& operator=(contact_store&&) noexcept;

  const contact* find(std::int64_t id) const;
  const contact* find_by_email(std::string_view email) const; // case-insensitive
  std::size_t size() const;

  // Inserts, or replaces the contact with the same id, keeping every index in step.
  void upsert(contact c);
  bool erase(std::int64_t id);

  // Order: the sort key (strings compared case-insensitively in ASCII, then byte-wise; absent
  // values after present ones when ascending, before them when descending), ties by id
  // ascending in both directions. `total` counts every match.
  contact_page list(const contact_query& q) const;
  // Every match in the query's order, ignoring offset and limit.
  void for_each(const contact_query& q, const std::function<void(const contact&)>& f) const;

  // Tags in use with the number of contacts carrying each, ordered by lower-cased name.
  std::vector<tag_count> tags() const;
  // Ids of the contacts that carry `tag` (case-insensitive), ascending.
  std::vector<std::int64_t> with_tag(std::string_view tag) const;
  // Ids of the contacts of `company_id`, ascending.
  std::vector<std::int64_t> of_company(std::int64_t company_id) const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// The search rule on its own (the reference the index must agree with): the lower-cased query
// is a substring of the lower-cased first name, last name, "first last", e-mail or phone.
// An empty query matches everything.
bool matches_search(const contact& c, std::string_view query);

// The whole query rule on its own, without paging (reference for tests and exports).
bool matches(const contact& c, const contact_query& q);

} // namespace crm::domain
