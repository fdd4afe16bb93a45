// JSON in and out of handlers: encoders for the contract's shapes and a reader that validates
// a request body field by field, collecting every failure into the 422 shape.
#pragma once
#include "domain/failure.hpp"
#include "domain/page.hpp"
#include "domain/user.hpp"
#include "http/message.hpp"

#include <boost/json/fwd.hpp>

#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace crm::http {

std::string encode_error(std::string_view detail, std::string_view code);
std::string encode_issues(const std::vector<domain::issue>& issues);
std::string encode_user(const domain::user& u);
std::string encode_user_page(const domain::page<domain::user>& p);

struct text_rule {
  std::size_t min = 0;
  std::size_t max = 0; // 0: no limit
  bool trim = false;
};

// Reads a JSON object body. Every accessor records an issue on failure and returns nothing;
// `finish` adds `extra_forbidden` for keys no accessor asked for, and yields the failure.
class body_reader {
public:
  explicit body_reader(std::string_view body);
  ~body_reader();
  body_reader(const body_reader&) = delete;
  body_reader& operator=(const body_reader&) = delete;

  bool valid_json() const { return object_ != nullptr; }
  bool has(std::string_view key); // present (possibly null); marks it known
  bool is_null(std::string_view key);

  std::optional<std::string> text(std::string_view key, bool required, text_rule rule = {});
  std::optional<bool> boolean(std::string_view key, bool required);
  // An optional text field a client may clear: absent → nothing; null → an empty inner
  // optional (clear it); a string within `rule` → that string.
  std::optional<std::optional<std::string>> nullable_text(std::string_view key,
                                                          text_rule rule = {});
  // A positive id or an RFC 3339 instant a client may clear, as nullable_text.
  std::optional<std::optional<std::int64_t>> nullable_id(std::string_view key);
  std::optional<std::optional<std::int64_t>> nullable_timestamp(std::string_view key);
  std::optional<std::int64_t> integer(std::string_view key, bool required);
  // A positive integer (a record's id).
  std::optional<std::int64_t> id(std::string_view key, bool required);
  // An RFC 3339 instant, as µs since the epoch.
  std::optional<std::int64_t> timestamp(std::string_view key, bool required);
  // A string that must be one of `allowed`.
  std::optional<std::string> one_of(std::string_view key, bool required,
                                    std::initializer_list<std::string_view> allowed);
  std::optional<std::string> one_of(std::string_view key, bool required,
                                    std::span<const std::string_view> allowed);
  // Direct access for nested values (custom fields, arrays).
  const boost::json::value* raw(std::string_view key);

  void add(std::vector<domain::loc_part> loc, std::string msg, std::string type);
  std::vector<domain::issue>& issues() { return issues_; }
  // Rejects unknown keys; true when there are no issues.
  bool finish();
  domain::failure failure() const { return domain::failure::invalid(issues_); }

private:
  std::unique_ptr<boost::json::value> doc_;
  const boost::json::object* object_ = nullptr;
  std::vector<std::string> known_;
  std::vector<domain::issue> issues_;
};

// The paging of every list (?page=&per_page=).
namespace paging_rules {
inline constexpr int page_max = 1'000'000;
inline constexpr int per_page_default = 20;
inline constexpr int per_page_max = 100;
} // namespace paging_rules

// The sorting and custom-field filters of the lists that have them (contacts, deals, companies).
namespace list_rules {
inline constexpr std::array<std::string_view, 2> sort_orders{"asc", "desc"};
// A custom field <key> as a filter (?cf.<key>=<value>, contacts and deals) and as a column of
// the contact import.
inline constexpr std::string_view custom_prefix = "cf.";
} // namespace list_rules

// Query parameters: integers with bounds (422 with loc ["query", name]).
std::optional<int> query_int(const request& req, std::string_view name, int fallback, int min,
                             int max, std::vector<domain::issue>& issues);
// A boolean query parameter (true/1, false/0): `fallback` when absent; nothing, with a
// bool_parsing issue, when it is something else.
std::optional<bool> query_bool(const request& req, std::string_view name,
                               std::optional<bool> fallback, std::vector<domain::issue>& issues);
// A positive id (422 int_parsing at ["query", name]) and an RFC 3339 instant as µs (422
// datetime_parsing); nothing when absent (a "missing" issue when `required`).
std::optional<std::int64_t> query_id(const request& req, std::string_view name,
                                     std::vector<domain::issue>& issues, bool required = false);
std::optional<std::int64_t> query_time(const request& req, std::string_view name,
                                       std::vector<domain::issue>& issues, bool required = false);
// Path parameter as a positive int64 (422 with loc ["path", name], type int_parsing).
std::optional<std::int64_t> path_id(std::string_view value, std::string_view name,
                                    std::vector<domain::issue>& issues);

} // namespace crm::http
