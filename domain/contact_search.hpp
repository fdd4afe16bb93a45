// The contact search of contract §11 (docs/design.md "Contact search"): HubSpot's filter_groups
// shape, groups OR-ed and the filters of a group AND-ed, over the list's fields, `tag`,
// `owner_id` and `cf.<key>`. Pure: the body's rules (422 issues located in it), the check of the
// custom fields against the tenant's definitions, and the predicate a contact_query carries.
#pragma once
#include "domain/contact.hpp"
#include "domain/contact_store.hpp"
#include "domain/custom_field.hpp"
#include "domain/failure.hpp"

#include <boost/json/value.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

enum class search_op : std::uint8_t {
  eq,
  neq,
  lt,
  lte,
  gt,
  gte,
  contains,
  in,
  not_in,
  exists,
  not_exists
};

namespace search_rules {
inline constexpr std::array<std::string_view, 11> ops{
    "eq", "neq", "lt", "lte", "gt", "gte", "contains", "in", "not_in", "exists", "not_exists"};
// The built-in fields a filter may name (besides cf.<key>).
inline constexpr std::array<std::string_view, 12> fields{
    "id",       "first_name", "last_name", "email", "phone",      "company_id",
    "owner_id", "status",     "source",    "tag",   "created_at", "updated_at"};
inline constexpr std::size_t groups_max = 10;
inline constexpr std::size_t filters_max = 20; // in a group
inline constexpr std::size_t values_max = 100; // of in and not_in
inline constexpr std::size_t text_max = 200;   // characters of a compared text
} // namespace search_rules

// What a field holds, which decides the operators it takes.
enum class search_kind : std::uint8_t {
  text,
  integer,
  number,
  choice,
  time,
  date,
  flag,
  tag,
  list
};

struct search_filter {
  std::string field; // as sent: "status", "cf.plan"
  search_op op = search_op::eq;
  boost::json::value value;             // as sent (null for exists and not_exists)
  search_kind kind = search_kind::text; // decided by the field (cf: by its definition)
  std::size_t group = 0, index = 0;     // where it was sent
};

struct contact_search {
  std::vector<std::vector<search_filter>> groups; // none: every contact
  contact_sort sort = contact_sort::id;
  bool descending = false;
  int page = 1;
  int per_page = 20;
};

// The body read into a search (nothing, with the issues, when it breaks a rule). Custom fields
// are typed by check_custom_filters.
std::optional<contact_search> parse_contact_search(const boost::json::value& body,
                                                   std::vector<issue>& issues);
// Each cf.<key> filter must name an active contact field that is not sensitive, with an
// operator and a value its type takes: the issues found (empty: the search is ready).
std::vector<issue> check_custom_filters(contact_search& s, const field_definitions& defs);

// Whether a filter names a cf.<key> field (only those need the tenant's definitions).
bool names_custom_fields(const contact_search& s);

// Whether `c` matches: any group whose every filter holds (no group: every contact).
bool search_matches(const contact_search& s, const contact& c);
// The predicate for a contact_query (compiled once: the values parsed, texts lower-cased).
std::function<bool(const contact&)> search_predicate(const contact_search& s);
// The same search as a plan of the store's value index, when every filter is one the index
// answers (status, source, tag, owner_id and company_id with eq, neq, in, not_in, exists,
// not_exists); nothing otherwise (or with no group), and the predicate decides.
std::shared_ptr<const value_plan> search_value_plan(const contact_search& s);

} // namespace crm::domain
