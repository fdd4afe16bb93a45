// Reading contact and company fields from request JSON (and CSV rows), with every rule of
// contract §4–§5 that needs no state; rules that need the tenant's state (unique e-mail,
// company of the tenant) are the contacts actor's.
#pragma once
#include "actors/contacts.hpp"
#include "domain/failure.hpp"
#include "http/message.hpp"

#include <boost/json/fwd.hpp>

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace crm::http {

using loc_path = std::vector<domain::loc_part>;

// The rules of a contact's fields (contract §4), shared by the readers below and the OpenAPI
// schemas (add_contact_routes).
namespace contact_rules {
inline constexpr std::size_t first_name_max = 100;
inline constexpr std::size_t last_name_max = 100;
inline constexpr std::size_t email_max = 254;
inline constexpr std::size_t tag_max = domain::contact_tag_max; // characters, trimmed
inline constexpr std::size_t tags_max = 50;                     // distinct tags of a contact
inline constexpr std::size_t custom_fields_max = 16 * 1024;     // bytes of the custom_fields JSON
inline constexpr std::array<std::string_view, 4> statuses{"active", "inactive", "qualified",
                                                          "unqualified"};
inline constexpr std::array<std::string_view, 7> sources{"website", "referral", "social", "ads",
                                                         "api",     "import",   "manual"};
// E.164 (domain::is_e164): "+", a non-zero digit, then 1 to 14 digits.
inline constexpr std::string_view phone_pattern = "^\\+[1-9][0-9]{1,14}$";
inline constexpr std::size_t tag_rename_max = 50;
// The list's ?sort_by= (domain::parse_contact_sort reads them).
inline constexpr std::array<std::string_view, 9> sort_fields{"id",     "first_name", "last_name",
                                                             "email",  "phone",      "status",
                                                             "source", "created_at", "updated_at"};
// Bulk create and CSV import: items (rows) a request.
inline constexpr std::size_t bulk_max = 1000;
} // namespace contact_rules

// The rules of a company's fields (contract §5), shared the same way (add_company_routes).
namespace company_rules {
inline constexpr std::size_t name_max = 200;
inline constexpr std::size_t domain_max = 255;
inline constexpr std::size_t industry_max = 100;
inline constexpr std::size_t address_max = 500;
// The list's ?sort_by=.
inline constexpr std::array<std::string_view, 6> sort_fields{
    "id", "name", "domain", "industry", "created_at", "updated_at"};
} // namespace company_rules

// "Input should be 'a', 'b' or 'c'": the message of the `enum` issue of a value not in `values`.
std::string enum_message(std::span<const std::string_view> values);

// `creating`: first_name required, nulls of required fields refused. Issues get `prefix` + key.
actors::contact_fields read_contact(const boost::json::object& o, bool creating,
                                    const loc_path& prefix, std::vector<domain::issue>& issues);

// Reads a CSV row (header names → cells) as contact fields; empty cells are absent.
actors::contact_fields read_contact_row(const std::vector<std::string>& header,
                                        const std::vector<std::string>& cells,
                                        const loc_path& prefix, std::vector<domain::issue>& issues);
// The header names import accepts: the contact fields, `tags`, and `cf.<key>`.
bool importable_column(std::string_view name);

actors::company_fields read_company(const boost::json::object& o, bool creating,
                                    std::vector<domain::issue>& issues);

// Tags as sent: strings of 1–50 characters (trimmed); de-duplication is the actor's.
std::optional<std::vector<std::string>> read_tags(const boost::json::value& v, const loc_path& loc,
                                                  std::vector<domain::issue>& issues);

// The list query of contact endpoints (contract §4); paging into `page`/`per_page`.
struct contact_list_params {
  domain::contact_query query;
  int page = 1;
  int per_page = 20;
};
std::optional<contact_list_params> read_contact_query(const request& req,
                                                      std::vector<domain::issue>& issues);

} // namespace crm::http
