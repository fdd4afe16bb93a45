// The pure rules of automation (docs/automation.md): names of triggers, operators and actions,
// validation of workflow definitions into 422 issues, condition evaluation, templates, cron
// schedules, retry backoff, Standard Webhooks signatures and the URL shape outbound requests use.
#include "domain/workflow.hpp"

#include "domain/consent.hpp"

#include "domain/contact.hpp"
#include "domain/crypto.hpp"
#include "domain/json_check.hpp"
#include "domain/task.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <sodium.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <tuple>
#include <utility>

namespace crm::domain {
namespace json = boost::json;
namespace {

using namespace detail;

namespace rules = workflow_rules;

constexpr auto trigger_names = table_of<trigger_type>(rules::trigger_types);
static_assert(trigger_names.size() == static_cast<std::size_t>(trigger_type::manual) + 1);
constexpr auto op_names = table_of<condition_op>(rules::condition_ops);
static_assert(op_names.size() == static_cast<std::size_t>(condition_op::changed_to) + 1);
constexpr auto action_names = table_of<action_type>(rules::action_types);
static_assert(action_names.size() == static_cast<std::size_t>(action_type::create_task) + 1);

constexpr std::string_view status_message =
    "Input should be 'active', 'inactive', 'qualified' or 'unqualified'";

bool is_template(std::string_view s) {
  return s.find(rules::template_open) != std::string_view::npos;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ascii_lower(a) == ascii_lower(b);
}

std::optional<std::int64_t> digits_value(std::string_view s) {
  std::int64_t n = 0;
  if (!all_digits(s)) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return n;
}

// ---- Validation helpers ------------------------------------------------------------------

void check_status(checker& ck, const json::value& v, const loc_path& l, bool allow_template) {
  auto s = v.if_string();
  if (s && (parse_contact_status(sv(*s)) || (allow_template && is_template(sv(*s))))) return;
  ck.add(l, std::string(status_message), "enum");
}

// A tag a run will give a contact, or wait for: a contact's tag, or (in actions) a template of
// one, which the contact's rules check when the run renders it.
void check_tag(checker& ck, const json::value& v, const loc_path& l, bool allow_template) {
  auto s = v.if_string();
  bool templated = allow_template && s && is_template(sv(*s));
  ck.string(v, l, 1, templated ? rules::tag_template_max : contact_tag_max);
}

void check_contact_id(checker& ck, const json::object& params, const loc_path& l) {
  auto v = given(params, "contact_id");
  if (!v) return;
  auto where = at(l, "contact_id");
  if (auto s = v->if_string()) {
    if (is_template(sv(*s))) return;
    auto n = digits_value(sv(*s));
    if (!n) {
      ck.add(where, "Input should be a valid integer, unable to parse string as an integer",
             "int_parsing");
      return;
    }
    if (*n < 1) ck.add(where, "Input should be greater than or equal to 1", "greater_than_equal");
    return;
  }
  ck.integer(*v, where, 1, INT64_MAX);
}

bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return rules::token_symbols.find(c) != std::string_view::npos;
}

bool updatable_field(std::string_view k) {
  auto& fields = rules::update_contact_fields;
  return std::find(fields.begin(), fields.end(), k) != fields.end();
}

void check_params(checker& ck, action_type t, const json::object& p, const loc_path& l) {
  switch (t) {
  case action_type::update_contact: {
    ck.extra_keys(p, {"fields", "contact_id"}, l);
    check_contact_id(ck, p, l);
    auto v = member(p, "fields");
    auto where = at(l, "fields");
    if (!v) {
      ck.add(where, "Field required", "missing");
      break;
    }
    auto fields = ck.object(*v, where);
    if (!fields) break;
    if (fields->empty()) {
      ck.add(where, "Dictionary should have at least 1 item after validation, not 0", "too_short");
      break;
    }
    for (auto& kv : *fields)
      if (!updatable_field(kv.key()))
        ck.add(at(where, kv.key()), "Extra inputs are not permitted", "extra_forbidden");
    break;
  }
  case action_type::set_status: {
    ck.extra_keys(p, {"status", "contact_id"}, l);
    check_contact_id(ck, p, l);
    if (auto v = member(p, "status"))
      check_status(ck, *v, at(l, "status"), true);
    else
      ck.add(at(l, "status"), "Field required", "missing");
    break;
  }
  case action_type::add_tag: {
    ck.extra_keys(p, {"tag", "tags", "contact_id"}, l);
    check_contact_id(ck, p, l);
    auto tag = given(p, "tag");
    auto tags = given(p, "tags");
    if ((tag != nullptr) == (tags != nullptr)) {
      ck.add(l, "exactly one of 'tag' or 'tags' is required", "value_error");
      break;
    }
    if (tag) {
      check_tag(ck, *tag, at(l, "tag"), true);
      break;
    }
    auto where = at(l, "tags");
    auto a = ck.array(*tags, where);
    if (!a) break;
    if (a->empty()) {
      ck.add(where, "List should have at least 1 item after validation, not 0", "too_short");
      break;
    }
    for (std::size_t i = 0; i < a->size(); ++i)
      check_tag(ck, (*a)[i], at(where, static_cast<std::int64_t>(i)), true);
    break;
  }
  case action_type::remove_tag: {
    ck.extra_keys(p, {"tag", "contact_id"}, l);
    check_contact_id(ck, p, l);
    if (auto v = member(p, "tag"))
      check_tag(ck, *v, at(l, "tag"), true);
    else
      ck.add(at(l, "tag"), "Field required", "missing");
    break;
  }
  case action_type::http_request: {
    ck.extra_keys(p, {"url", "method", "headers", "body", "timeout_seconds"}, l);
    if (auto v = member(p, "url")) {
      auto where = at(l, "url");
      if (auto s = ck.string(*v, where, 1, rules::url_max))
        if (!is_template(*s) && !parse_url(*s))
          ck.add(where, "Input should be a valid URL: http or https with a host", "value_error");
    } else {
      ck.add(at(l, "url"), "Field required", "missing");
    }
    if (auto v = given(p, "method")) {
      auto s = v->if_string();
      auto& methods = rules::http_methods;
      if (!s || (std::find(methods.begin(), methods.end(), sv(*s)) == methods.end() &&
                 !is_template(sv(*s))))
        ck.add(at(l, "method"), "Input should be 'GET', 'POST', 'PUT', 'PATCH' or 'DELETE'",
               "enum");
    }
    if (auto v = given(p, "headers")) {
      auto where = at(l, "headers");
      if (auto h = ck.object(*v, where)) {
        if (h->size() > rules::headers_max)
          ck.too_long(h->size(), rules::headers_max, where, "Dictionary");
        for (auto& kv : *h) {
          auto name = kv.key();
          auto hl = at(where, name);
          if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char)) {
            ck.add(hl, "header names must be HTTP tokens", "value_error");
            continue;
          }
          if (std::any_of(rules::client_headers.begin(), rules::client_headers.end(),
                          [&](std::string_view h) { return iequal(name, h); })) {
            ck.add(hl, "the header '" + std::string(name) + "' is set by the client",
                   "value_error");
            continue;
          }
          auto s = kv.value().if_string();
          if (kv.value().is_null()) {
            ck.add(hl, "header values are write-only and shown as null: send the value again",
                   "string_type");
            continue;
          }
          if (!s) {
            ck.add(hl, "Input should be a valid string", "string_type");
            continue;
          }
          // A line break in a value would inject headers of its own.
          if (sv(*s).find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos)
            ck.add(hl, "header values must not contain line breaks", "value_error");
        }
      }
    }
    if (auto v = given(p, "timeout_seconds"))
      ck.integer(*v, at(l, "timeout_seconds"), rules::timeout_min, rules::timeout_max);
    break;
  }
  case action_type::delay: {
    ck.extra_keys(p, {"seconds", "minutes", "hours"}, l);
    auto& units = rules::delay_units;
    int count = 0;
    for (auto& [unit, _] : units) count += given(p, unit) ? 1 : 0;
    if (count != 1) {
      ck.add(l, "exactly one of 'seconds', 'minutes' or 'hours' is required", "value_error");
      break;
    }
    for (auto& [unit, scale] : units)
      if (auto v = given(p, unit)) ck.integer(*v, at(l, unit), 1, rules::delay_max_seconds / scale);
    break;
  }
  case action_type::send_message: {
    ck.extra_keys(p, {"text", "channel_id", "contact_id", "purpose"}, l);
    check_contact_id(ck, p, l);
    if (auto v = member(p, "text"))
      ck.string(*v, at(l, "text"), 1, rules::message_text_max);
    else
      ck.add(at(l, "text"), "Field required", "missing");
    // What the message is for (docs/compliance.md "Consent"): checked against the contact's
    // consents when it is sent.
    if (auto v = given(p, "purpose"))
      if (auto s = ck.string(*v, at(l, "purpose"), 1, rules::purpose_max);
          s && !parse_consent_purpose(*s))
        ck.add(at(l, "purpose"), consent_purpose_choices(), "enum");
    if (auto v = given(p, "channel_id"))
      if (!(v->is_string() && is_template(sv(v->as_string()))))
        ck.integer(*v, at(l, "channel_id"), 1, INT64_MAX);
    break;
  }
  case action_type::create_deal: {
    ck.extra_keys(p,
                  {"title", "amount", "currency", "pipeline_id", "stage_id", "contact_id",
                   "company_id", "owner_id", "expected_close_date", "custom_fields", "lost_reason"},
                  l);
    if (auto v = member(p, "title"))
      ck.string(*v, at(l, "title"), 1, rules::deal_title_max);
    else
      ck.add(at(l, "title"), "Field required", "missing");
    for (auto key : {"contact_id", "company_id", "owner_id", "pipeline_id", "stage_id"}) {
      auto v = given(p, key);
      if (v && !(v->is_string() && is_template(sv(v->as_string()))))
        ck.integer(*v, at(l, key), 1, INT64_MAX);
    }
    if (auto v = given(p, "custom_fields")) ck.object(*v, at(l, "custom_fields"));
    break;
  }
  case action_type::move_deal: {
    ck.extra_keys(p, {"stage_id", "deal_id", "lost_reason", "position"}, l);
    if (!given(p, "stage_id")) ck.add(at(l, "stage_id"), "Field required", "missing");
    for (auto key : {"stage_id", "deal_id", "position"}) {
      auto v = given(p, key);
      if (v && !(v->is_string() && is_template(sv(v->as_string()))))
        ck.integer(*v, at(l, key), std::string_view(key) == "position" ? 0 : 1, INT64_MAX);
    }
    break;
  }
  case action_type::ai_reply: {
    // agent_id optional: else the auto-replying agent of the trigger's channel (docs/ai.md).
    ck.extra_keys(p, {"agent_id"}, l);
    if (auto v = given(p, "agent_id"); v && !(v->is_string() && is_template(sv(v->as_string()))))
      ck.integer(*v, at(l, "agent_id"), 1, INT64_MAX);
    break;
  }
  case action_type::create_task: {
    // docs/tasks.md "From a workflow": linked to the trigger's contact, deal and appointment
    // unless the params name others; due after the step runs, by at most one unit.
    ck.extra_keys(p,
                  {"title", "description", "priority", "assignee_id", "contact_id", "deal_id",
                   "appointment_id", "due_in_minutes", "due_in_hours", "due_in_days"},
                  l);
    if (auto v = member(p, "title"))
      ck.string(*v, at(l, "title"), 1, task_rules::title_max);
    else
      ck.add(at(l, "title"), "Field required", "missing");
    if (auto v = given(p, "description"))
      ck.string(*v, at(l, "description"), 0, task_rules::description_max);
    if (auto v = given(p, "priority")) {
      auto s = v->if_string();
      if (!s || (!parse_task_priority(sv(*s)) && !is_template(sv(*s))))
        ck.add(at(l, "priority"), "Input should be 'low', 'normal' or 'high'", "enum");
    }
    check_contact_id(ck, p, l);
    for (auto key : {"assignee_id", "deal_id", "appointment_id"}) {
      auto v = given(p, key);
      if (v && !(v->is_string() && is_template(sv(v->as_string()))))
        ck.integer(*v, at(l, key), 1, INT64_MAX);
    }
    int units = 0;
    for (auto& [unit, scale] : rules::task_due_units)
      if (auto v = given(p, unit)) {
        ++units;
        ck.integer(*v, at(l, unit), 0, rules::task_due_max_seconds / scale);
      }
    if (units > 1)
      ck.add(l, "at most one of 'due_in_minutes', 'due_in_hours' or 'due_in_days'", "value_error");
    break;
  }
  }
}

// Every action has its area now; kept so that a future action can be declared before its
// area exists.
std::string_view missing_area(action_type) {
  return "";
}

// ---- Evaluation helpers ------------------------------------------------------------------

// Exact comparison of JSON numbers of any representation: no int64 → double rounding.
int compare_int_double(std::int64_t i, double d) {
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  const double t = std::trunc(d);
  const auto ti = static_cast<std::int64_t>(t);
  if (i != ti) return i < ti ? -1 : 1;
  return d > t ? -1 : d < t ? 1 : 0;
}

int compare_uint_double(std::uint64_t u, double d) {
  if (d < 0) return 1;
  if (d >= 18446744073709551616.0) return -1;
  const double t = std::trunc(d);
  const auto tu = static_cast<std::uint64_t>(t);
  if (u != tu) return u < tu ? -1 : 1;
  return d > t ? -1 : 0;
}

int compare_numbers(const json::value& a, const json::value& b) {
  auto three = [](auto x, auto y) { return x < y ? -1 : x > y ? 1 : 0; };
  if (a.is_double() && b.is_double()) return three(a.get_double(), b.get_double());
  if (a.is_double()) return -compare_numbers(b, a);
  // `a` is an integer from here.
  if (b.is_double()) {
    return a.is_int64() ? compare_int_double(a.get_int64(), b.get_double())
                        : compare_uint_double(a.get_uint64(), b.get_double());
  }
  if (a.is_int64() && b.is_int64()) return three(a.get_int64(), b.get_int64());
  if (a.is_uint64() && b.is_uint64()) return three(a.get_uint64(), b.get_uint64());
  if (a.is_int64()) {
    auto i = a.get_int64();
    return i < 0 ? -1 : three(static_cast<std::uint64_t>(i), b.get_uint64());
  }
  return -compare_numbers(b, a);
}

bool json_equal(const json::value& a, const json::value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
  case json::kind::null: return true;
  case json::kind::bool_: return a.get_bool() == b.get_bool();
  case json::kind::string: return a.get_string() == b.get_string();
  case json::kind::array: {
    auto& x = a.get_array();
    auto& y = b.get_array();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!json_equal(x[i], y[i])) return false;
    return true;
  }
  case json::kind::object: {
    auto& x = a.get_object();
    auto& y = b.get_object();
    if (x.size() != y.size()) return false;
    for (auto& kv : x) {
      auto other = member(y, kv.key());
      if (!other || !json_equal(kv.value(), *other)) return false;
    }
    return true;
  }
  default: return false; // numbers were handled above
  }
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  for (;;) {
    auto dot = path.find('.');
    out.push_back(path.substr(0, dot));
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return out;
}

// Plain dotted lookup: object keys, and all-digit segments as array indexes.
const json::value* walk(const json::value* v, const std::vector<std::string_view>& segments,
                        std::size_t from) {
  for (std::size_t i = from; v && i < segments.size(); ++i) {
    auto seg = segments[i];
    if (auto o = v->if_object()) {
      v = member(*o, seg);
    } else if (auto a = v->if_array()) {
      auto n = digits_value(seg);
      v = n && static_cast<std::uint64_t>(*n) < a->size() ? &(*a)[static_cast<std::size_t>(*n)]
                                                          : nullptr;
    } else {
      v = nullptr;
    }
  }
  return v;
}

// `cf` as the first segment of a contact path means `custom_fields`.
void alias_custom_fields(std::vector<std::string_view>& segments, std::size_t at) {
  if (segments.size() > at + 1 && segments[at] == "cf") segments[at] = "custom_fields";
}

const json::value* contact_of(const json::value& payload) {
  auto o = payload.if_object();
  if (!o) return nullptr;
  auto c = member(*o, "contact");
  return c && c->is_object() ? c : nullptr;
}

bool is_null(const json::value* v) {
  return !v || v->is_null();
}

const json::value null_value;

// The old value of `path` for changed_to, or nothing when the field did not change.
std::optional<const json::value*> previous_value(const json::value& payload,
                                                 std::string_view path) {
  auto o = payload.if_object();
  auto prev = o ? member(*o, "previous") : nullptr;
  if (!prev || !prev->is_object()) return &null_value; // created: there was no old value
  auto segments = split_path(path);
  std::size_t from = 0;
  if (segments.size() > 1 && segments[0] == "contact") from = 1;
  alias_custom_fields(segments, from);
  // `previous` holds only the fields that changed: an absent field kept its value.
  if (!member(prev->get_object(), segments[from])) return std::nullopt;
  auto v = walk(prev, segments, from);
  return v ? v : &null_value;
}

// ---- Templates ---------------------------------------------------------------------------

// The value of one template expression (inside the braces), or nullptr.
const json::value* template_value(std::string_view expr, const template_context& ctx,
                                  json::value& scratch) {
  auto segments = split_path(trim(expr));
  auto root = segments[0];
  if (root == "trigger") {
    if (!ctx.trigger) return nullptr;
    return walk(ctx.trigger, segments, 1);
  }
  if (root == "contact") {
    auto c = ctx.trigger ? contact_of(*ctx.trigger) : nullptr;
    alias_custom_fields(segments, 1);
    return walk(c, segments, 1);
  }
  if (segments.size() != 2) return nullptr;
  if (root == "run" && segments[1] == "id") {
    scratch = ctx.run_id;
    return &scratch;
  }
  if (root == "workflow" && segments[1] == "id") {
    scratch = ctx.workflow_id;
    return &scratch;
  }
  if (root == "workflow" && segments[1] == "name") {
    scratch = json::string(ctx.workflow_name);
    return &scratch;
  }
  return nullptr;
}

void append_text(std::string& out, const json::value* v) {
  if (is_null(v)) return;
  if (auto s = v->if_string()) {
    out += sv(*s);
  } else if (auto d = v->if_double()) {
    // Shortest round-trip text ("1.5"), not Boost's "1.5E0".
    std::array<char, 32> buf{};
    auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), *d);
    out.append(buf.data(), ec == std::errc{} ? p : buf.data());
  } else {
    out += json::serialize(*v);
  }
}

json::value render_string(std::string_view s, const template_context& ctx) {
  auto open = s.find("{{");
  if (open == std::string_view::npos) return json::string(s);
  json::value scratch;
  // Exactly one template: the value keeps its JSON type.
  if (open == 0 && s.size() >= 4 && s.substr(s.size() - 2) == "}}" &&
      s.find("}}", 2) == s.size() - 2) {
    auto v = template_value(s.substr(2, s.size() - 4), ctx, scratch);
    return v ? *v : json::value(nullptr);
  }
  std::string out;
  std::size_t pos = 0;
  while (open != std::string_view::npos) {
    auto close = s.find("}}", open + 2);
    if (close == std::string_view::npos) break;
    out += s.substr(pos, open - pos);
    append_text(out, template_value(s.substr(open + 2, close - open - 2), ctx, scratch));
    pos = close + 2;
    open = s.find("{{", pos);
  }
  out += s.substr(pos);
  return json::string(out);
}

// ---- Cron ---------------------------------------------------------------------------------

// Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian, any year).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct civil {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

civil civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2), m, d};
}

bool leap_year(std::int64_t y) {
  return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

unsigned days_in_month(std::int64_t y, unsigned m) {
  constexpr std::array<unsigned, 12> days = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap_year(y) ? 29 : days[m - 1];
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

struct cron_field_spec {
  std::string_view name;
  int min;
  int max;
  std::string_view names; // three-letter names of min, min+1, ... (case-insensitive)
};

constexpr std::array<cron_field_spec, 5> cron_fields = {{
    {"minute", 0, 59, ""},
    {"hour", 0, 23, ""},
    {"day-of-month", 1, 31, ""},
    {"month", 1, 12, "JANFEBMARAPRMAYJUNJULAUGSEPOCTNOVDEC"},
    {"day-of-week", 0, 7, "SUNMONTUEWEDTHUFRISAT"},
}};

std::optional<int> cron_number(std::string_view s, const cron_field_spec& f) {
  if (auto n = digits_value(s); n && *n <= 1000) return static_cast<int>(*n);
  if (s.size() == 3 && !f.names.empty()) {
    std::string upper(s);
    for (auto& c : upper)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    for (std::size_t i = 0; i + 3 <= f.names.size(); i += 3)
      if (f.names.substr(i, 3) == upper) return f.min + static_cast<int>(i / 3);
  }
  return std::nullopt;
}

// Parses one field into `bits` (indexes min..max); false with `error` set on failure.
bool parse_cron_field(std::string_view text, const cron_field_spec& f, std::vector<bool>& bits,
                      std::string& error) {
  auto fail = [&](const std::string& why) {
    error = "invalid cron " + std::string(f.name) + " field '" + std::string(text) + "': " + why;
    return false;
  };
  bits.assign(static_cast<std::size_t>(f.max) + 1, false);
  std::string_view rest = text;
  for (;;) {
    auto comma = rest.find(',');
    auto item = rest.substr(0, comma);
    if (item.empty()) return fail("empty list item");
    int step = 1;
    bool stepped = false;
    if (auto slash = item.find('/'); slash != std::string_view::npos) {
      auto n = digits_value(item.substr(slash + 1));
      if (!n || *n < 1 || *n > f.max) return fail("invalid step in '" + std::string(item) + "'");
      step = static_cast<int>(*n);
      stepped = true;
      item = item.substr(0, slash);
    }
    int lo = f.min;
    int hi = f.max;
    if (item != "*") {
      auto dash = item.find('-');
      auto first = cron_number(item.substr(0, dash), f);
      if (!first) return fail("'" + std::string(item.substr(0, dash)) + "' is not a value");
      lo = *first;
      if (dash != std::string_view::npos) {
        auto last = cron_number(item.substr(dash + 1), f);
        if (!last) return fail("'" + std::string(item.substr(dash + 1)) + "' is not a value");
        hi = *last;
      } else {
        hi = stepped ? f.max : lo; // "a/n" runs from a to the end of the range
      }
      if (lo < f.min || lo > f.max || hi < f.min || hi > f.max)
        return fail("values must be within " + std::to_string(f.min) + "-" + std::to_string(f.max));
      if (lo > hi)
        return fail("the range " + std::to_string(lo) + "-" + std::to_string(hi) + " is reversed");
    }
    for (int v = lo; v <= hi; v += step) bits[static_cast<std::size_t>(v)] = true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return true;
}

bool day_matches(const cron_expr& c, std::int64_t y, unsigned m, unsigned d) {
  const bool dom = c.day_of_month[d];
  const auto days = days_from_civil(y, m, d);
  const auto dow = static_cast<std::size_t>(((days % 7) + 11) % 7); // 1970-01-01 was a Thursday
  const bool dow_ok = c.day_of_week[dow];
  // Vixie cron: when both day fields are restricted, either one matching is enough.
  if (!c.day_of_month_any && !c.day_of_week_any) return dom || dow_ok;
  return dom && dow_ok;
}

} // namespace

// ---- Names ---------------------------------------------------------------------------------

std::optional<trigger_type> parse_trigger_type(std::string_view s) {
  return lookup(trigger_names, s);
}
std::string_view to_string(trigger_type t) {
  return name_of(trigger_names, t);
}
bool is_record_event(trigger_type t) {
  return t != trigger_type::webhook && t != trigger_type::schedule && t != trigger_type::manual;
}
const std::vector<std::string_view>& record_event_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (auto& [t, name] : trigger_names)
      if (is_record_event(t)) out.push_back(name);
    return out;
  }();
  return names;
}

std::optional<condition_op> parse_condition_op(std::string_view s) {
  return lookup(op_names, s);
}
std::string_view to_string(condition_op op) {
  return name_of(op_names, op);
}

std::optional<action_type> parse_action_type(std::string_view s) {
  return lookup(action_names, s);
}
std::string_view to_string(action_type t) {
  return name_of(action_names, t);
}
bool action_available(action_type t) {
  return missing_area(t).empty();
}

// ---- Validation ----------------------------------------------------------------------------

std::optional<json::object> parse_trigger_config(trigger_type t, const json::value& v,
                                                 std::vector<issue>& issues) {
  checker ck{issues};
  const auto before = issues.size();
  const loc_path l = {std::string("body"), std::string("trigger_config")};
  json::object config;
  if (!v.is_null()) {
    auto o = ck.object(v, l);
    if (!o) return std::nullopt;
    config = *o;
  }
  switch (t) {
  case trigger_type::contact_status_changed:
    ck.extra_keys(config, {"from", "to"}, l);
    for (auto key : {"from", "to"})
      if (auto x = given(config, key)) check_status(ck, *x, at(l, key), false);
    break;
  case trigger_type::contact_tag_added:
    ck.extra_keys(config, {"tag"}, l);
    if (auto x = given(config, "tag")) check_tag(ck, *x, at(l, "tag"), false);
    break;
  case trigger_type::deal_stage_changed:
    ck.extra_keys(config, {"pipeline_id", "from", "to"}, l);
    for (auto key : {"pipeline_id", "from", "to"})
      if (auto x = given(config, key)) ck.integer(*x, at(l, key), 1, INT64_MAX);
    break;
  case trigger_type::deal_created:
  case trigger_type::deal_updated:
  case trigger_type::deal_won:
  case trigger_type::deal_lost:
  case trigger_type::deal_deleted:
    ck.extra_keys(config, {"pipeline_id"}, l);
    if (auto x = given(config, "pipeline_id")) ck.integer(*x, at(l, "pipeline_id"), 1, INT64_MAX);
    break;
  case trigger_type::appointment_booked:
  case trigger_type::appointment_rescheduled:
  case trigger_type::appointment_cancelled:
  case trigger_type::appointment_confirmed:
  case trigger_type::appointment_no_show:
  case trigger_type::appointment_completed:
    ck.extra_keys(config, {"calendar_id", "service_id"}, l);
    for (auto key : {"calendar_id", "service_id"})
      if (auto x = given(config, key)) ck.integer(*x, at(l, key), 1, INT64_MAX);
    break;
  case trigger_type::schedule: {
    ck.extra_keys(config, {"interval_seconds", "cron", "payload"}, l);
    auto interval = given(config, "interval_seconds");
    auto cron = given(config, "cron");
    if ((interval != nullptr) == (cron != nullptr)) {
      ck.add(l, "exactly one of 'interval_seconds' or 'cron' is required", "value_error");
    } else if (interval) {
      ck.integer(*interval, at(l, "interval_seconds"), rules::interval_min, rules::interval_max);
    } else if (auto text = ck.string(*cron, at(l, "cron"), 1, rules::cron_max)) {
      std::string error;
      if (!parse_cron(*text, error)) ck.add(at(l, "cron"), error, "value_error");
    }
    if (auto p = given(config, "payload")) ck.object(*p, at(l, "payload"));
    break;
  }
  default: ck.extra_keys(config, {}, l); break;
  }
  if (issues.size() != before) return std::nullopt;
  return config;
}

std::optional<std::vector<condition>> parse_conditions(const json::value& v,
                                                       std::vector<issue>& issues) {
  checker ck{issues};
  const auto before = issues.size();
  const loc_path l = {std::string("body"), std::string("conditions")};
  std::vector<condition> out;
  if (v.is_null()) return out;
  auto a = ck.array(v, l);
  if (!a) return std::nullopt;
  if (a->size() > rules::items_max) {
    ck.too_long(a->size(), rules::items_max, l, "List");
    return std::nullopt;
  }
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto il = at(l, static_cast<std::int64_t>(i));
    auto o = ck.object((*a)[i], il);
    if (!o) continue;
    ck.extra_keys(*o, {"field", "op", "value"}, il);
    condition c;
    if (auto f = member(*o, "field")) {
      if (auto s = ck.string(*f, at(il, "field"), 1, rules::field_max)) c.field = *s;
    } else {
      ck.add(at(il, "field"), "Field required", "missing");
    }
    auto op_value = member(*o, "op");
    std::optional<condition_op> op;
    if (!op_value) {
      ck.add(at(il, "op"), "Field required", "missing");
    } else {
      auto s = op_value->if_string();
      if (s) op = parse_condition_op(sv(*s));
      if (!op) ck.add(at(il, "op"), one_of_message(op_names), "enum");
    }
    auto value = member(*o, "value");
    auto vl = at(il, "value");
    if (op) {
      c.op = *op;
      switch (*op) {
      case condition_op::exists:
        if (value && !value->is_null() && !value->is_bool())
          ck.add(vl, "Input should be a valid boolean", "bool_parsing");
        break;
      case condition_op::in:
        if (!value)
          ck.add(vl, "Field required", "missing");
        else
          ck.array(*value, vl);
        break;
      case condition_op::gt:
      case condition_op::lt:
        if (!value)
          ck.add(vl, "Field required", "missing");
        else if (!value->is_number() && !value->is_string())
          ck.add(vl, "Input should be a valid number or string", "value_error");
        break;
      default:
        if (!value) ck.add(vl, "Field required", "missing");
        break;
      }
    }
    if (value) c.value = *value;
    out.push_back(std::move(c));
  }
  if (issues.size() != before) return std::nullopt;
  return out;
}

std::optional<std::vector<action>> parse_actions(const json::value& v, std::vector<issue>& issues) {
  checker ck{issues};
  const auto before = issues.size();
  const loc_path l = {std::string("body"), std::string("actions")};
  std::vector<action> out;
  if (v.is_null()) return out;
  auto a = ck.array(v, l);
  if (!a) return std::nullopt;
  if (a->size() > rules::items_max) {
    ck.too_long(a->size(), rules::items_max, l, "List");
    return std::nullopt;
  }
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto il = at(l, static_cast<std::int64_t>(i));
    auto o = ck.object((*a)[i], il);
    if (!o) continue;
    ck.extra_keys(*o, {"type", "params"}, il);
    std::optional<action_type> type;
    if (auto t = member(*o, "type")) {
      auto s = t->if_string();
      if (s) type = parse_action_type(sv(*s));
      if (!type) {
        ck.add(at(il, "type"), one_of_message(action_names), "enum");
      } else if (!action_available(*type)) {
        ck.add(at(il, "type"),
               "action '" + std::string(to_string(*type)) +
                   "' is not available yet: " + std::string(missing_area(*type)) + " is not built",
               "value_error");
        type.reset();
      }
    } else {
      ck.add(at(il, "type"), "Field required", "missing");
    }
    json::object params;
    auto pl = at(il, "params");
    if (auto p = given(*o, "params")) {
      auto po = ck.object(*p, pl);
      if (!po) continue;
      params = *po;
    }
    if (!type) continue;
    check_params(ck, *type, params, pl);
    out.push_back({*type, std::move(params)});
  }
  if (issues.size() != before) return std::nullopt;
  return out;
}

json::array conditions_to_json(const std::vector<condition>& cs) {
  json::array out;
  out.reserve(cs.size());
  for (auto& c : cs) {
    json::object o;
    o["field"] = c.field;
    o["op"] = to_string(c.op);
    o["value"] = c.value;
    out.emplace_back(std::move(o));
  }
  return out;
}

json::array actions_to_json(const std::vector<action>& as) {
  json::array out;
  out.reserve(as.size());
  for (auto& a : as) {
    json::object o;
    o["type"] = to_string(a.type);
    o["params"] = a.params;
    out.emplace_back(std::move(o));
  }
  return out;
}

std::vector<condition> conditions_from_json(const json::value& v) {
  std::vector<condition> out;
  auto a = v.if_array();
  if (!a) return out;
  for (auto& item : *a) {
    auto o = item.if_object();
    if (!o) continue;
    condition c;
    if (auto f = member(*o, "field"); f && f->is_string()) c.field = sv(f->get_string());
    if (auto op = member(*o, "op"); op && op->is_string())
      c.op = parse_condition_op(sv(op->get_string())).value_or(condition_op::eq);
    if (auto x = member(*o, "value")) c.value = *x;
    out.push_back(std::move(c));
  }
  return out;
}

namespace {
json::object* headers_of(json::value& a) {
  auto* o = a.if_object();
  if (!o) return nullptr;
  auto* t = o->if_contains("type");
  if (!t || !t->is_string() || t->get_string() != to_string(action_type::http_request))
    return nullptr;
  auto* p = o->if_contains("params");
  if (!p || !p->is_object()) return nullptr;
  auto* h = p->get_object().if_contains("headers");
  return h ? h->if_object() : nullptr;
}
} // namespace

void redact_header_values(json::object& params) {
  if (auto* h = params.if_contains("headers"); h && h->is_object())
    for (auto& kv : h->get_object()) kv.value() = nullptr;
}

void redact_headers(json::array& actions) {
  for (auto& a : actions)
    if (auto* h = headers_of(a))
      for (auto& kv : *h) kv.value() = nullptr;
}

void map_header_values(json::array& actions,
                       const std::function<std::string(std::string_view)>& f) {
  for (auto& a : actions)
    if (auto* h = headers_of(a))
      for (auto& kv : *h)
        if (auto* s = kv.value().if_string()) *s = f(sv(*s));
}

std::vector<action> actions_from_json(const json::value& v) {
  std::vector<action> out;
  auto a = v.if_array();
  if (!a) return out;
  for (auto& item : *a) {
    auto o = item.if_object();
    if (!o) continue;
    auto t = member(*o, "type");
    auto type = t && t->is_string() ? parse_action_type(sv(t->get_string())) : std::nullopt;
    if (!type) continue;
    action x;
    x.type = *type;
    if (auto p = member(*o, "params"); p && p->is_object()) x.params = p->get_object();
    out.push_back(std::move(x));
  }
  return out;
}

// ---- Evaluation ----------------------------------------------------------------------------

const json::value* resolve_path(const json::value& payload, std::string_view path) {
  auto segments = split_path(path);
  alias_custom_fields(segments, 0);
  auto o = payload.if_object();
  if (!o || member(*o, segments[0])) {
    if (segments[0] == "contact") alias_custom_fields(segments, 1);
    return walk(&payload, segments, 0);
  }
  // Contact events: `status`, `email`, `custom_fields.x` … are the contact's.
  auto c = contact_of(payload);
  return c ? walk(c, segments, 0) : nullptr;
}

bool condition_holds(const condition& c, const json::value& payload) {
  auto v = resolve_path(payload, c.field);
  const json::value& current = v ? *v : null_value;
  switch (c.op) {
  case condition_op::eq: return json_equal(current, c.value);
  case condition_op::neq: return !json_equal(current, c.value);
  case condition_op::contains:
    if (auto s = current.if_string()) {
      auto want = c.value.if_string();
      return want && sv(*s).find(sv(*want)) != std::string_view::npos;
    }
    if (auto a = current.if_array())
      return std::any_of(a->begin(), a->end(),
                         [&](const json::value& x) { return json_equal(x, c.value); });
    return false;
  case condition_op::in: {
    auto a = c.value.if_array();
    if (!a || current.is_null()) return false;
    return std::any_of(a->begin(), a->end(),
                       [&](const json::value& x) { return json_equal(current, x); });
  }
  case condition_op::gt:
  case condition_op::lt: {
    int order = 0;
    if (current.is_number() && c.value.is_number())
      order = compare_numbers(current, c.value);
    else if (current.is_string() && c.value.is_string())
      order = sv(current.get_string()).compare(sv(c.value.get_string()));
    else
      return false;
    return c.op == condition_op::gt ? order > 0 : order < 0;
  }
  case condition_op::exists: {
    const bool want = !c.value.is_bool() || c.value.get_bool();
    return !current.is_null() == want;
  }
  case condition_op::changed_to: {
    if (!json_equal(current, c.value)) return false;
    auto before = previous_value(payload, c.field);
    return before && !json_equal(**before, c.value);
  }
  }
  return false;
}

bool conditions_hold(const std::vector<condition>& cs, const json::value& payload) {
  return std::all_of(cs.begin(), cs.end(),
                     [&](const condition& c) { return condition_holds(c, payload); });
}

bool trigger_config_matches(trigger_type t, const json::object& config,
                            const json::value& payload) {
  auto p = payload.if_object();
  auto payload_string = [&](std::string_view key) -> std::optional<std::string_view> {
    auto v = p ? member(*p, key) : nullptr;
    if (!v || !v->is_string()) return std::nullopt;
    return sv(v->get_string());
  };
  switch (t) {
  case trigger_type::contact_status_changed:
    for (auto key : {"from", "to"}) {
      auto want = given(config, key);
      if (!want || !want->is_string()) continue;
      auto got = payload_string(key);
      if (!got || *got != sv(want->get_string())) return false;
    }
    return true;
  case trigger_type::contact_tag_added: {
    auto want = given(config, "tag");
    if (!want || !want->is_string()) return true;
    auto got = payload_string("tag");
    return got && iequal(*got, sv(want->get_string()));
  }
  case trigger_type::deal_created:
  case trigger_type::deal_updated:
  case trigger_type::deal_stage_changed:
  case trigger_type::deal_won:
  case trigger_type::deal_lost:
  case trigger_type::deal_deleted: {
    // pipeline_id against payload.deal.pipeline_id; from/to against the stage ids of a move.
    auto number_at = [&](const json::value* v) -> std::optional<std::int64_t> {
      return v ? as_integer(*v) : std::nullopt;
    };
    auto deal = p ? member(*p, "deal") : nullptr;
    auto deal_obj = deal ? deal->if_object() : nullptr;
    std::pair<const char*, const json::value*> checks[] = {
        {"pipeline_id", deal_obj ? member(*deal_obj, "pipeline_id") : nullptr},
        {"from", p ? member(*p, "from_stage_id") : nullptr},
        {"to", p ? member(*p, "to_stage_id") : nullptr}};
    for (auto& [key, got] : checks) {
      auto want = number_at(given(config, key));
      if (want && number_at(got) != want) return false;
    }
    return true;
  }
  case trigger_type::appointment_booked:
  case trigger_type::appointment_rescheduled:
  case trigger_type::appointment_cancelled:
  case trigger_type::appointment_confirmed:
  case trigger_type::appointment_no_show:
  case trigger_type::appointment_completed: {
    // calendar_id and service_id against the appointment's.
    auto appt = p ? member(*p, "appointment") : nullptr;
    auto obj = appt ? appt->if_object() : nullptr;
    for (auto key : {"calendar_id", "service_id"}) {
      auto want = given(config, key);
      auto wanted = want ? as_integer(*want) : std::nullopt;
      if (!wanted) continue;
      auto got = obj ? member(*obj, key) : nullptr;
      if (!got || as_integer(*got) != wanted) return false;
    }
    return true;
  }
  default: return true;
  }
}

json::value render_templates(const json::value& params, const template_context& ctx) {
  switch (params.kind()) {
  case json::kind::string: return render_string(sv(params.get_string()), ctx);
  case json::kind::array: {
    json::array out;
    out.reserve(params.get_array().size());
    for (auto& x : params.get_array()) out.push_back(render_templates(x, ctx));
    return out;
  }
  case json::kind::object: {
    json::object out;
    out.reserve(params.get_object().size());
    for (auto& kv : params.get_object()) out[kv.key()] = render_templates(kv.value(), ctx);
    return out;
  }
  default: return params;
  }
}

std::optional<std::int64_t> action_contact_id(const json::object& rendered_params,
                                              const json::value& payload) {
  auto positive = [](std::optional<std::int64_t> n) { return n && *n >= 1 ? n : std::nullopt; };
  // A contact_id that was given but is not an id fails the step rather than falling back to
  // the trigger's contact: acting on another contact than the one named would be worse.
  if (auto v = given(rendered_params, "contact_id")) {
    if (auto s = v->if_string()) return positive(digits_value(sv(*s)));
    return positive(as_integer(*v));
  }
  auto p = payload.if_object();
  if (!p) return std::nullopt;
  if (auto v = given(*p, "contact_id")) return positive(as_integer(*v));
  if (auto c = contact_of(payload))
    if (auto v = given(c->get_object(), "id")) return positive(as_integer(*v));
  return std::nullopt;
}

bool move_payload_contact(json::value& payload, std::int64_t from, std::int64_t into) {
  auto p = payload.if_object();
  if (!p) return false;
  bool moved = false;
  auto move = [&](json::object& o, std::string_view key) {
    if (auto v = o.if_contains(key); v && as_integer(*v) == std::optional<std::int64_t>(from)) {
      *v = into;
      moved = true;
    }
  };
  move(*p, "contact_id");
  if (auto c = p->if_contains("contact"); c && c->is_object()) move(c->as_object(), "id");
  return moved;
}

std::int64_t delay_seconds(const json::object& params) {
  for (auto& [unit, scale] : workflow_rules::delay_units)
    if (auto v = given(params, unit))
      if (auto n = as_integer(*v))
        return std::clamp<std::int64_t>(*n, 0, workflow_rules::delay_max_seconds / scale) * scale;
  return 0;
}

outcome<task> task_from_action(const json::object& params, const json::value& payload,
                               std::int64_t now) {
  auto invalid = [](std::string what) {
    return failure::of(errc::validation, "params." + std::move(what));
  };
  // An id after rendering: an integer, or a string of digits; `key` of the payload otherwise.
  auto id_at = [&](const char* key, bool from_trigger,
                   std::optional<std::int64_t>& out) -> std::optional<failure> {
    if (auto v = given(params, key)) {
      auto n = v->is_string() ? digits_value(sv(v->get_string())) : as_integer(*v);
      if (!n || *n < 1) return invalid(std::string(key) + " is not an id");
      out = *n;
      return std::nullopt;
    }
    if (from_trigger)
      if (auto p = payload.if_object())
        if (auto v = given(*p, key))
          if (auto n = as_integer(*v); n && *n >= 1) out = *n;
    return std::nullopt;
  };
  task t;
  auto title = given(params, "title");
  if (!title || !title->is_string() || utf8_length(sv(title->get_string())) < 1 ||
      utf8_length(sv(title->get_string())) > task_rules::title_max)
    return invalid("title must have 1 to " + std::to_string(task_rules::title_max) +
                   " characters once rendered");
  t.title = title->get_string().c_str();
  if (auto d = given(params, "description")) {
    if (!d->is_string() || utf8_length(sv(d->get_string())) > task_rules::description_max)
      return invalid("description must have at most " +
                     std::to_string(task_rules::description_max) + " characters");
    t.description = d->get_string().c_str();
  }
  if (auto p = given(params, "priority")) {
    auto parsed = p->is_string() ? parse_task_priority(sv(p->get_string())) : std::nullopt;
    if (!parsed) return invalid("priority must be 'low', 'normal' or 'high'");
    t.priority = *parsed;
  }
  t.contact_id = action_contact_id(params, payload);
  if (given(params, "contact_id") && !t.contact_id) return invalid("contact_id is not an id");
  for (auto [key, out, from_trigger] : {std::tuple{"deal_id", &t.deal_id, true},
                                        {"appointment_id", &t.appointment_id, true},
                                        {"assignee_id", &t.assignee_id, false}})
    if (auto f = id_at(key, from_trigger, *out)) return *f;
  // Unless named, the trigger's contact's owner takes it (the contact.* payloads carry it).
  if (!t.assignee_id)
    if (auto c = contact_of(payload))
      if (auto v = given(c->get_object(), "owner_id"))
        if (auto n = as_integer(*v); n && *n >= 1) t.assignee_id = *n;
  for (auto& [unit, scale] : workflow_rules::task_due_units)
    if (auto v = given(params, unit))
      if (auto n = as_integer(*v))
        t.due_at =
            now + std::clamp<std::int64_t>(*n, 0, workflow_rules::task_due_max_seconds / scale) *
                      scale * 1'000'000;
  return t;
}

// ---- Schedules ---------------------------------------------------------------------------

std::optional<cron_expr> parse_cron(std::string_view text, std::string& error) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= text.size()) break;
    auto start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    fields.push_back(text.substr(start, i - start));
  }
  if (fields.size() != 5) {
    error = "a cron expression has 5 fields (minute hour day-of-month month day-of-week), not " +
            std::to_string(fields.size());
    return std::nullopt;
  }
  cron_expr c;
  std::vector<bool> bits;
  for (std::size_t f = 0; f < 5; ++f) {
    if (!parse_cron_field(fields[f], cron_fields[f], bits, error)) return std::nullopt;
    for (std::size_t v = 0; v < bits.size(); ++v) {
      if (!bits[v]) continue;
      switch (f) {
      case 0: c.minute.set(v); break;
      case 1: c.hour.set(v); break;
      case 2: c.day_of_month.set(v); break;
      case 3: c.month.set(v); break;
      default: c.day_of_week.set(v % 7); break; // 7 is Sunday too
      }
    }
  }
  // As in Vixie cron, a day field beginning with `*` (also "*/2") leaves the other in charge.
  c.day_of_month_any = fields[2].front() == '*';
  c.day_of_week_any = fields[4].front() == '*';
  return c;
}

std::int64_t next_cron_time(const cron_expr& c, std::int64_t after_micros) {
  constexpr std::int64_t minute_us = 60'000'000;
  constexpr std::int64_t minutes_per_day = 24LL * 60;
  const std::int64_t start_minute = floor_div(after_micros, minute_us) + 1;
  const std::int64_t start_day = floor_div(start_minute, minutes_per_day);
  auto [year, month, day] = civil_from_days(start_day);
  auto minute_of_day = static_cast<int>(start_minute - start_day * minutes_per_day);
  int hour = minute_of_day / 60;
  int minute = minute_of_day % 60;
  const std::int64_t last_year = year + 5;
  // Skip whole months, then days, then hours that cannot match; each step resets the smaller
  // units to their start.
  while (year <= last_year) {
    if (!c.month[month]) {
      day = 1, hour = 0, minute = 0;
      if (++month > 12) month = 1, ++year;
      continue;
    }
    if (day > days_in_month(year, month) || !day_matches(c, year, month, day)) {
      hour = 0, minute = 0;
      if (++day > days_in_month(year, month)) {
        day = 1;
        if (++month > 12) month = 1, ++year;
      }
      continue;
    }
    if (hour > 23 || !c.hour[static_cast<std::size_t>(hour)]) {
      minute = 0;
      if (++hour > 23) {
        hour = 0;
        if (++day > days_in_month(year, month)) {
          day = 1;
          if (++month > 12) month = 1, ++year;
        }
      }
      continue;
    }
    while (minute < 60 && !c.minute[static_cast<std::size_t>(minute)]) ++minute;
    if (minute == 60) {
      minute = 0;
      ++hour; // checked (and carried into the day) on the next turn
      continue;
    }
    const auto days = days_from_civil(year, month, day);
    return ((days * 24 + hour) * 60 + minute) * minute_us;
  }
  return 0;
}

std::int64_t next_schedule_time(const json::object& config, std::int64_t after_micros) {
  if (auto v = given(config, "interval_seconds"))
    if (auto n = as_integer(*v)) return after_micros + *n * 1'000'000;
  if (auto v = given(config, "cron"); v && v->is_string()) {
    std::string error;
    if (auto c = parse_cron(sv(v->get_string()), error)) return next_cron_time(*c, after_micros);
  }
  return 0;
}

// ---- Deliveries ----------------------------------------------------------------------------

double retry_delay_seconds(int failed_attempts, double base, double max, double jitter01) {
  // Past 2^1000 the double overflows; the cap was reached long before.
  const int exponent = std::clamp(failed_attempts, 1, 1000) - 1;
  const double grown = std::ldexp(base, exponent);
  const double capped = std::isfinite(grown) ? std::min(grown, max) : max;
  const double jitter = std::clamp(jitter01, 0.0, 1.0);
  return capped * (0.8 + 0.4 * jitter);
}

std::string webhook_signature(std::string_view secret, std::string_view msg_id,
                              std::int64_t timestamp, std::string_view body) {
  std::string key(secret);
  constexpr std::string_view prefix = "whsec_";
  if (secret.substr(0, prefix.size()) == prefix)
    if (auto decoded = base64_decode(secret.substr(prefix.size()))) key = std::move(*decoded);
  std::string content;
  content.reserve(msg_id.size() + body.size() + 24);
  content.append(msg_id).append(".").append(std::to_string(timestamp)).append(".").append(body);
  return "v1," + base64_encode(as_bytes(hmac_sha256(key, content)));
}

signed_request verify_standard_webhook(std::string_view secret, std::string_view msg_id,
                                       std::string_view timestamp, std::string_view signatures,
                                       std::string_view body, std::int64_t now,
                                       std::int64_t tolerance) {
  if (msg_id.empty() || msg_id.size() > 255 || timestamp.empty() || timestamp.size() > 18)
    return signed_request::invalid;
  std::int64_t ts = 0;
  for (char c : timestamp) {
    if (c < '0' || c > '9') return signed_request::invalid;
    ts = ts * 10 + (c - '0');
  }
  if (ts < now - tolerance || ts > now + tolerance) return signed_request::stale;
  const auto expected = webhook_signature(secret, msg_id, ts, body);
  bool match = false;
  while (!signatures.empty()) {
    auto space = signatures.find(' ');
    auto one = signatures.substr(0, space);
    // Every candidate is compared, so the time does not tell which one matched.
    if (!one.empty() && constant_time_equal(one, expected)) match = true;
    signatures =
        space == std::string_view::npos ? std::string_view{} : signatures.substr(space + 1);
  }
  return match ? signed_request::valid : signed_request::invalid;
}

std::optional<std::string_view> webhook_refusal(const std::optional<std::string>& secret,
                                                const webhook_credentials& c, std::string_view body,
                                                std::int64_t now) {
  // Without a secret the comparisons are made all the same against an empty one (which never
  // matches), so the answer takes as long as for a wrong secret.
  const std::string& key = secret ? *secret : std::string();
  bool ok = false;
  if (c.std_signature) {
    switch (verify_standard_webhook(key, c.std_id.value_or(""), c.std_timestamp.value_or(""),
                                    *c.std_signature, body, now)) {
    case signed_request::valid: ok = true; break;
    case signed_request::stale:
      if (secret) return "webhook-timestamp is more than 5 minutes from now";
      break;
    case signed_request::invalid: break;
    }
    if (!ok || !secret) return webhook_refused;
    return std::nullopt;
  }
  if (c.secret && secrets_equal(*c.secret, key)) ok = true;
  if (!ok && c.signature) {
    std::string_view sig = *c.signature;
    if (sig.substr(0, 7) == "sha256=") {
      auto mac = hmac_sha256(key, body);
      auto expected = hex_encode(as_bytes(mac));
      if (constant_time_equal(ascii_lower(sig.substr(7)), expected)) ok = true;
    }
  }
  if (!ok || !secret || secret->empty()) return webhook_refused;
  return std::nullopt;
}

std::string generate_webhook_secret() {
  init_crypto();
  std::array<unsigned char, 24> bytes{};
  randombytes_buf(bytes.data(), bytes.size());
  return "whsec_" +
         base64_encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::optional<url_parts> parse_url(std::string_view url) {
  if (url.empty() || url.size() > workflow_rules::url_max) return std::nullopt;
  for (char c : url) {
    const auto b = static_cast<unsigned char>(c);
    // Controls, spaces and raw non-ASCII bytes never belong in a request line; `#` would be a
    // fragment, `\` is read as `/` by some parsers and not by others.
    if (b <= 0x20 || b >= 0x7f || c == '#' || c == '\\') return std::nullopt;
  }
  url_parts out;
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  auto scheme = ascii_lower(url.substr(0, scheme_end));
  if (scheme == "https")
    out.https = true;
  else if (scheme != "http")
    return std::nullopt;
  auto rest = url.substr(scheme_end + 3);
  auto authority_end = rest.find_first_of("/?");
  auto authority = rest.substr(0, authority_end);
  auto target =
      authority_end == std::string_view::npos ? std::string_view{} : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos) return std::nullopt;
  std::string_view host;
  std::string_view port_text;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return std::nullopt;
      has_port = true;
      port_text = after.substr(1);
    }
    if (host.find(':') == std::string_view::npos ||
        !std::all_of(host.begin(), host.end(), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
        }))
      return std::nullopt;
  } else {
    auto colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      has_port = true;
      port_text = authority.substr(colon + 1);
    }
    if (host.empty() || host.size() > 253) return std::nullopt;
    for (auto label : split_path(host)) {
      if (label.empty() || label.size() > 63) return std::nullopt;
      if (!std::all_of(label.begin(), label.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
          }))
        return std::nullopt;
    }
  }
  if (host.empty()) return std::nullopt;
  out.host = std::string(host);
  if (has_port) {
    auto n = digits_value(port_text);
    if (!n || *n < 1 || *n > 65535 || port_text.size() > 5) return std::nullopt;
    out.port = static_cast<std::uint16_t>(*n);
  } else {
    out.port = out.https ? 443 : 80;
  }
  if (target.empty())
    out.target = "/";
  else if (target.front() == '?')
    out.target = "/" + std::string(target);
  else
    out.target = std::string(target);
  return out;
}

} // namespace crm::domain
