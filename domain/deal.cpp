#include "domain/deal.hpp"

#include "domain/csv.hpp"

#include "domain/clock.hpp"
#include "domain/custom_field.hpp"
#include "domain/json_check.hpp"
#include "domain/json_writer.hpp"
#include "domain/validation.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <tuple>

namespace crm::domain {

// Generated at configure time from Debian's iso-codes (CMakeLists.txt): sorted codes.
extern const std::string_view iso4217_codes[];
extern const std::size_t iso4217_count;

namespace {

constexpr detail::name_table<stage_kind, 3> kind_names = {{
    {stage_kind::open, "open"},
    {stage_kind::won, "won"},
    {stage_kind::lost, "lost"},
}};

constexpr detail::name_table<deal_sort, 14> sort_names = {{
    {deal_sort::id, "id"},
    {deal_sort::title, "title"},
    {deal_sort::amount, "amount"},
    {deal_sort::currency, "currency"},
    {deal_sort::status, "status"},
    {deal_sort::pipeline_id, "pipeline_id"},
    {deal_sort::stage_id, "stage_id"},
    {deal_sort::owner_id, "owner_id"},
    {deal_sort::contact_id, "contact_id"},
    {deal_sort::company_id, "company_id"},
    {deal_sort::expected_close_date, "expected_close_date"},
    {deal_sort::created_at, "created_at"},
    {deal_sort::updated_at, "updated_at"},
    {deal_sort::closed_at, "closed_at"},
}};

bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// -1, 0, 1 with null after every value (ascending order).
template <class T>
int compare_optional(const std::optional<T>& a, const std::optional<T>& b) {
  if (a.has_value() != b.has_value()) return a ? -1 : 1;
  if (!a) return 0;
  return *a < *b ? -1 : *b < *a ? 1 : 0;
}

template <class T>
int compare(const T& a, const T& b) {
  return a < b ? -1 : b < a ? 1 : 0;
}

} // namespace

std::optional<stage_kind> parse_stage_kind(std::string_view s) {
  return detail::lookup(kind_names, s);
}
std::string_view to_string(stage_kind k) {
  return detail::name_of(kind_names, k);
}
std::string stage_kind_message() {
  return detail::one_of_message(kind_names);
}

const stage* pipeline::find(std::int64_t stage_id) const {
  for (auto& s : stages)
    if (s.id == stage_id) return &s;
  return nullptr;
}
const stage* pipeline::first_open() const {
  for (auto& s : stages)
    if (s.kind == stage_kind::open) return &s;
  return nullptr;
}
const stage* pipeline::of_kind(stage_kind k) const {
  for (auto& s : stages)
    if (s.kind == k) return &s;
  return nullptr;
}

std::string stage_rules_broken(const std::vector<stage>& stages) {
  int open = 0, won = 0, lost = 0;
  for (auto& s : stages) {
    (s.kind == stage_kind::open ? open : s.kind == stage_kind::won ? won : lost)++;
  }
  if (open < 1) return "a pipeline needs at least one open stage";
  if (won != 1) return "a pipeline needs exactly one won stage";
  if (lost != 1) return "a pipeline needs exactly one lost stage";
  for (std::size_t i = 0; i < stages.size(); ++i)
    for (std::size_t j = i + 1; j < stages.size(); ++j)
      if (ascii_lower(stages[i].name) == ascii_lower(stages[j].name))
        return "stage names must be unique within a pipeline ('" + stages[j].name + "' repeats)";
  return {};
}

void renumber(std::vector<stage>& stages) {
  for (std::size_t i = 0; i < stages.size(); ++i) stages[i].position = static_cast<int>(i);
}

std::vector<stage> default_stages() {
  std::vector<stage> out = {
      {0, 0, "Lead", 0, 10, stage_kind::open},     {0, 0, "Qualified", 0, 25, stage_kind::open},
      {0, 0, "Proposal", 0, 50, stage_kind::open}, {0, 0, "Negotiation", 0, 75, stage_kind::open},
      {0, 0, "Won", 0, 100, stage_kind::won},      {0, 0, "Lost", 0, 0, stage_kind::lost},
  };
  renumber(out);
  return out;
}

// ---- money and dates ----------------------------------------------------------------------

std::optional<std::int64_t> parse_amount(std::string_view s) {
  auto dot = s.find('.');
  auto whole = s.substr(0, dot);
  if (!digits(whole) || whole.size() > 13) return std::nullopt;
  std::int64_t cents = 0;
  for (char c : whole) cents = cents * 10 + (c - '0');
  cents *= 100;
  if (dot != std::string_view::npos) {
    auto frac = s.substr(dot + 1);
    if (!digits(frac) || frac.size() > 2) return std::nullopt;
    cents += (frac[0] - '0') * 10 + (frac.size() == 2 ? frac[1] - '0' : 0);
  }
  return cents;
}

std::string format_cents(money_sum cents) {
  bool negative = cents < 0;
  if (negative) cents = -cents;
  auto whole = cents / 100;
  auto frac = static_cast<int>(cents % 100);
  std::string digits_text;
  do {
    digits_text += static_cast<char>('0' + static_cast<int>(whole % 10));
    whole /= 10;
  } while (whole > 0);
  std::reverse(digits_text.begin(), digits_text.end());
  std::string out = negative ? "-" : "";
  out += digits_text;
  out += '.';
  out += static_cast<char>('0' + frac / 10);
  out += static_cast<char>('0' + frac % 10);
  return out;
}

money_sum round_weighted(money_sum v) {
  return v >= 0 ? (v + 50) / 100 : -((-v + 50) / 100);
}

bool is_currency(std::string_view code) {
  return std::binary_search(iso4217_codes, iso4217_codes + iso4217_count, code);
}

std::optional<std::int32_t> parse_date(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return std::nullopt;
  auto y = s.substr(0, 4), m = s.substr(5, 2), d = s.substr(8, 2);
  if (!digits(y) || !digits(m) || !digits(d)) return std::nullopt;
  auto num = [](std::string_view t) {
    int v = 0;
    for (char c : t) v = v * 10 + (c - '0');
    return v;
  };
  std::chrono::year_month_day ymd{std::chrono::year(num(y)),
                                  std::chrono::month(static_cast<unsigned>(num(m))),
                                  std::chrono::day(static_cast<unsigned>(num(d)))};
  if (!ymd.ok() || num(y) < 1) return std::nullopt;
  return static_cast<std::int32_t>(std::chrono::sys_days(ymd).time_since_epoch().count());
}

std::string format_date(std::int32_t days) {
  std::chrono::year_month_day ymd{std::chrono::sys_days(std::chrono::days(days))};
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  return buf;
}

// ---- JSON ---------------------------------------------------------------------------------

namespace {
void write_stage(json_writer& w, const stage& s) {
  w.begin_object()
      .key("id")
      .value(s.id)
      .key("pipeline_id")
      .value(s.pipeline_id)
      .key("name")
      .value(s.name)
      .key("position")
      .value(static_cast<std::int64_t>(s.position))
      .key("probability")
      .value(static_cast<std::int64_t>(s.probability))
      .key("kind")
      .value(to_string(s.kind))
      .end_object();
}
} // namespace

std::string encode_stage(const stage& s) {
  std::string out;
  json_writer w(out);
  write_stage(w, s);
  return out;
}

std::string encode_pipeline(const pipeline& p) {
  std::string out;
  json_writer w(out);
  w.begin_object()
      .key("id")
      .value(p.id)
      .key("name")
      .value(p.name)
      .key("is_default")
      .value(p.is_default);
  w.key("stages").begin_array();
  for (auto& s : p.stages) write_stage(w, s);
  w.end_array();
  w.key("created_at").value(rfc3339(p.created_at).view());
  w.key("updated_at").value(rfc3339(p.updated_at).view());
  w.end_object();
  return out;
}

namespace {
// The keys of a board card, which also open the full deal.
void write_card_fields(json_writer& w, const deal& d) {
  w.key("id").value(d.id).key("title").value(d.title).key("amount");
  if (d.amount)
    w.value(format_cents(*d.amount));
  else
    w.null();
  w.key("currency").value(d.currency);
  w.key("contact_id").nullable(d.contact_id);
  w.key("company_id").nullable(d.company_id);
  w.key("owner_id").nullable(d.owner_id);
  w.key("expected_close_date");
  if (d.expected_close)
    w.value(format_date(*d.expected_close));
  else
    w.null();
  w.key("status").value(to_string(d.status));
}
} // namespace

void append_deal(std::string& out, const deal& d) {
  json_writer w(out);
  w.begin_object();
  write_card_fields(w, d);
  w.key("pipeline_id").value(d.pipeline_id);
  w.key("stage_id").value(d.stage_id);
  w.key("lost_reason").nullable(d.lost_reason);
  w.key("custom_fields").raw(d.custom_fields);
  w.key("created_at").value(rfc3339(d.created_at).view());
  w.key("updated_at").value(rfc3339(d.updated_at).view());
  w.key("closed_at");
  if (d.closed_at)
    w.value(rfc3339(*d.closed_at).view());
  else
    w.null();
  w.end_object();
}

void append_deal_card(std::string& out, const deal& d) {
  json_writer w(out);
  w.begin_object();
  write_card_fields(w, d);
  w.end_object();
}

std::string encode_deal(const deal& d) {
  std::string out;
  out.reserve(512);
  append_deal(out, d);
  return out;
}

// ---- list queries -------------------------------------------------------------------------

std::optional<deal_sort> parse_deal_sort(std::string_view s) {
  return detail::lookup(sort_names, s);
}
std::string deal_sort_message() {
  return detail::one_of_message(sort_names);
}

bool deal_matches(const deal& d, const deal_query& q) {
  if (q.pipeline_id && d.pipeline_id != *q.pipeline_id) return false;
  if (q.stage_id && d.stage_id != *q.stage_id) return false;
  if (q.owner_id && d.owner_id != q.owner_id) return false;
  if (q.contact_id && d.contact_id != q.contact_id) return false;
  if (q.company_id && d.company_id != q.company_id) return false;
  if (q.status && d.status != *q.status) return false;
  if (q.currency && d.currency != *q.currency) return false;
  if (q.amount_min && (!d.amount || *d.amount < *q.amount_min)) return false;
  if (q.amount_max && (!d.amount || *d.amount > *q.amount_max)) return false;
  if (q.close_after && (!d.expected_close || *d.expected_close < *q.close_after)) return false;
  if (q.close_before && (!d.expected_close || *d.expected_close > *q.close_before)) return false;
  for (auto& [key, value] : q.custom)
    if (!value_equals(d.custom_fields, key, value)) return false;
  if (!q.search.empty() && ascii_lower(d.title).find(q.search) == std::string::npos) return false;
  return true;
}

bool deal_before(const deal& a, const deal& b, const deal_query& q) {
  int c = 0;
  switch (q.sort) {
  case deal_sort::id: c = compare(a.id, b.id); break;
  case deal_sort::title: c = compare(a.title, b.title); break;
  case deal_sort::amount: c = compare_optional(a.amount, b.amount); break;
  case deal_sort::currency: c = compare(a.currency, b.currency); break;
  case deal_sort::status: c = compare(to_string(a.status), to_string(b.status)); break;
  case deal_sort::pipeline_id: c = compare(a.pipeline_id, b.pipeline_id); break;
  case deal_sort::stage_id: c = compare(a.stage_id, b.stage_id); break;
  case deal_sort::owner_id: c = compare_optional(a.owner_id, b.owner_id); break;
  case deal_sort::contact_id: c = compare_optional(a.contact_id, b.contact_id); break;
  case deal_sort::company_id: c = compare_optional(a.company_id, b.company_id); break;
  case deal_sort::expected_close_date:
    c = compare_optional(a.expected_close, b.expected_close);
    break;
  case deal_sort::created_at: c = compare(a.created_at, b.created_at); break;
  case deal_sort::updated_at: c = compare(a.updated_at, b.updated_at); break;
  case deal_sort::closed_at: c = compare_optional(a.closed_at, b.closed_at); break;
  }
  // Descending reverses the order of values, nulls included (first), as PostgreSQL does.
  if (q.descending) c = -c;
  if (c != 0) return c < 0;
  return a.id < b.id;
}

namespace {
template <class T>
std::string opt_number(const std::optional<T>& v) {
  return v ? std::to_string(*v) : std::string();
}
} // namespace

std::string deal_csv_header() {
  return "id,title,amount,currency,status,pipeline_id,stage_id,contact_id,company_id,owner_id,"
         "expected_close_date,lost_reason,custom_fields,created_at,updated_at,closed_at\r\n";
}

std::string deal_csv_row(const deal& d) {
  std::string out;
  const std::string cells[] = {std::to_string(d.id),
                               d.title,
                               d.amount ? format_cents(*d.amount) : std::string(),
                               d.currency,
                               std::string(to_string(d.status)),
                               std::to_string(d.pipeline_id),
                               std::to_string(d.stage_id),
                               opt_number(d.contact_id),
                               opt_number(d.company_id),
                               opt_number(d.owner_id),
                               d.expected_close ? format_date(*d.expected_close) : std::string(),
                               d.lost_reason.value_or(""),
                               d.custom_fields,
                               format_rfc3339(d.created_at),
                               format_rfc3339(d.updated_at),
                               d.closed_at ? format_rfc3339(*d.closed_at) : std::string()};
  bool first = true;
  for (auto& c : cells) {
    if (!first) out += ',';
    first = false;
    append_csv_field(out, c);
  }
  out += "\r\n";
  return out;
}

} // namespace crm::domain
