#include "domain/contact.hpp"

#include "domain/json_check.hpp"

#include <array>
#include <utility>

namespace crm::domain {
namespace {

using detail::lookup;
using detail::name_of;

constexpr std::array<std::pair<contact_status, std::string_view>, 4> statuses = {{
    {contact_status::active, "active"},
    {contact_status::inactive, "inactive"},
    {contact_status::qualified, "qualified"},
    {contact_status::unqualified, "unqualified"},
}};

constexpr std::array<std::pair<contact_source, std::string_view>, 7> sources = {{
    {contact_source::website, "website"},
    {contact_source::referral, "referral"},
    {contact_source::social, "social"},
    {contact_source::ads, "ads"},
    {contact_source::api, "api"},
    {contact_source::import, "import"},
    {contact_source::manual, "manual"},
}};

constexpr std::array<std::pair<contact_sort, std::string_view>, 9> sorts = {{
    {contact_sort::id, "id"},
    {contact_sort::first_name, "first_name"},
    {contact_sort::last_name, "last_name"},
    {contact_sort::email, "email"},
    {contact_sort::phone, "phone"},
    {contact_sort::status, "status"},
    {contact_sort::source, "source"},
    {contact_sort::created_at, "created_at"},
    {contact_sort::updated_at, "updated_at"},
}};

} // namespace

std::optional<contact_status> parse_contact_status(std::string_view s) {
  return lookup(statuses, s);
}
std::string_view to_string(contact_status s) {
  return name_of(statuses, s);
}
std::optional<contact_source> parse_contact_source(std::string_view s) {
  return lookup(sources, s);
}
std::string_view to_string(contact_source s) {
  return name_of(sources, s);
}
std::optional<contact_sort> parse_contact_sort(std::string_view s) {
  return lookup(sorts, s);
}

} // namespace crm::domain
