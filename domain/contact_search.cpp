#include "domain/contact_search.hpp"

#include "domain/clock.hpp"
#include "domain/json_check.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>

namespace crm::domain {

namespace json = boost::json;

namespace search_detail {

constexpr auto op_table = detail::table_of<search_op>(search_rules::ops);

using detail::sv;

// The operators each kind of field takes.
bool takes(search_kind k, search_op op) {
  using o = search_op;
  switch (k) {
  case search_kind::text:
  case search_kind::tag:
    return op == o::eq || op == o::neq || op == o::contains || op == o::in || op == o::not_in ||
           op == o::exists || op == o::not_exists;
  case search_kind::choice:
  case search_kind::list:
    return op == o::eq || op == o::neq || op == o::in || op == o::not_in || op == o::exists ||
           op == o::not_exists;
  case search_kind::flag:
    return op == o::eq || op == o::neq || op == o::exists || op == o::not_exists;
  case search_kind::time:
  case search_kind::date: return op != o::contains && op != o::in && op != o::not_in;
  case search_kind::integer:
  case search_kind::number: return op != o::contains;
  }
  return false;
}

std::string_view kind_name(search_kind k) {
  switch (k) {
  case search_kind::text: return "text";
  case search_kind::integer: return "integer";
  case search_kind::number: return "number";
  case search_kind::choice: return "choice";
  case search_kind::time: return "date-time";
  case search_kind::date: return "date";
  case search_kind::flag: return "boolean";
  case search_kind::tag: return "tag";
  case search_kind::list: return "multiple-choice";
  }
  return "";
}

// The built-in fields, resolved once per search (a contact is never asked for a field by name).
enum class builtin : std::uint8_t {
  id,
  first_name,
  last_name,
  email,
  phone,
  company_id,
  owner_id,
  status,
  source,
  tag,
  created_at,
  updated_at,
  none // a custom field
};
// In the order of search_rules::fields, which names them.
static_assert(search_rules::fields.size() == static_cast<std::size_t>(builtin::none));

builtin builtin_of(std::string_view name) {
  for (std::size_t i = 0; i < search_rules::fields.size(); ++i)
    if (search_rules::fields[i] == name) return static_cast<builtin>(i);
  return builtin::none;
}

// A built-in field's kind (nothing: not a built-in field). The names are search_rules::fields.
std::optional<search_kind> builtin_kind(std::string_view field) {
  switch (builtin_of(field)) {
  case builtin::first_name:
  case builtin::last_name:
  case builtin::email:
  case builtin::phone: return search_kind::text;
  case builtin::id:
  case builtin::company_id:
  case builtin::owner_id: return search_kind::integer;
  case builtin::status:
  case builtin::source: return search_kind::choice;
  case builtin::created_at:
  case builtin::updated_at: return search_kind::time;
  case builtin::tag: return search_kind::tag;
  case builtin::none: break;
  }
  return std::nullopt;
}

search_kind custom_kind(field_type t) {
  switch (t) {
  case field_type::integer: return search_kind::integer;
  case field_type::number: return search_kind::number;
  case field_type::boolean: return search_kind::flag;
  case field_type::date: return search_kind::date;
  case field_type::datetime: return search_kind::time;
  case field_type::select: return search_kind::choice;
  case field_type::multiselect: return search_kind::list;
  default: return search_kind::text;
  }
}

bool is_date(std::string_view s) {
  return s.size() == 10 && s[4] == '-' && s[7] == '-' &&
         std::all_of(s.begin(), s.end(), [](char c) { return c == '-' || (c >= '0' && c <= '9'); });
}

// Whether one value (of the filter's value, or of its list) suits the kind; the message if not.
std::optional<std::string> bad_scalar(search_kind k, const json::value& v, std::string_view field,
                                      const std::vector<std::string>* options) {
  switch (k) {
  case search_kind::text:
  case search_kind::tag: {
    auto s = v.if_string();
    if (!s) return "Input should be a valid string";
    auto n = utf8_length(sv(*s));
    if (n < 1 || n > search_rules::text_max)
      return "String should have 1 to " + std::to_string(search_rules::text_max) + " characters";
    return std::nullopt;
  }
  case search_kind::integer:
    if (!detail::as_integer(v)) return "Input should be a valid integer";
    return std::nullopt;
  case search_kind::number:
    if (!v.is_number()) return "Input should be a valid number";
    return std::nullopt;
  case search_kind::flag:
    if (!v.is_bool()) return "Input should be a valid boolean";
    return std::nullopt;
  case search_kind::time: {
    auto s = v.if_string();
    if (!s || !parse_rfc3339(sv(*s))) return "Input should be a valid RFC 3339 datetime";
    return std::nullopt;
  }
  case search_kind::date: {
    auto s = v.if_string();
    if (!s || !is_date(sv(*s))) return "Input should be a valid date (YYYY-MM-DD)";
    return std::nullopt;
  }
  case search_kind::choice:
  case search_kind::list: {
    auto s = v.if_string();
    if (!s) return "Input should be a valid string";
    auto text = sv(*s);
    if (field == "status" && !parse_contact_status(text))
      return "Input should be 'active', 'inactive', 'qualified' or 'unqualified'";
    if (field == "source" && !parse_contact_source(text))
      return "Input should be 'website', 'referral', 'social', 'ads', 'api', 'import' or 'manual'";
    if (options && std::find(options->begin(), options->end(), text) == options->end())
      return "Input should be one of the field's options";
    return std::nullopt;
  }
  }
  return std::nullopt;
}

std::vector<loc_part> filter_loc(const search_filter& f, std::string_view member) {
  return {std::string("body"),
          std::string("filter_groups"),
          static_cast<std::int64_t>(f.group),
          std::string("filters"),
          static_cast<std::int64_t>(f.index),
          std::string(member)};
}

// The operator and the value against the filter's kind (its field is known).
void check_value(const search_filter& f, const std::vector<std::string>* options,
                 std::vector<issue>& issues) {
  if (!takes(f.kind, f.op)) {
    issues.push_back({filter_loc(f, "op"),
                      "the operator '" + std::string(detail::name_of(op_table, f.op)) +
                          "' does not apply to the " + std::string(kind_name(f.kind)) + " field '" +
                          f.field + "'",
                      "value_error"});
    return;
  }
  auto loc = filter_loc(f, "value");
  if (f.op == search_op::exists || f.op == search_op::not_exists) {
    if (!f.value.is_null())
      issues.push_back({loc, "exists and not_exists take no value", "value_error"});
    return;
  }
  if (f.op == search_op::in || f.op == search_op::not_in) {
    auto a = f.value.if_array();
    if (!a || a->empty() || a->size() > search_rules::values_max) {
      issues.push_back({loc,
                        "in and not_in take a list of 1 to " +
                            std::to_string(search_rules::values_max) + " values",
                        "value_error"});
      return;
    }
    for (std::size_t i = 0; i < a->size(); ++i)
      if (auto bad = bad_scalar(f.kind, (*a)[i], f.field, options)) {
        auto l = loc;
        l.emplace_back(static_cast<std::int64_t>(i));
        issues.push_back({l, *bad, "value_error"});
      }
    return;
  }
  if (f.value.is_null()) {
    issues.push_back({loc, "Field required", "missing"});
    return;
  }
  if (auto bad = bad_scalar(f.kind, f.value, f.field, options))
    issues.push_back({loc, *bad, "value_error"});
}

// ---- evaluation ---------------------------------------------------------------------------

// A filter with its values parsed once.
struct compiled {
  search_op op = search_op::eq;
  search_kind kind = search_kind::text;
  std::string field; // built-in name, or the custom key
  bool custom = false;
  builtin which = builtin::none;
  std::vector<std::string> texts; // lower-cased (text, tag), or as sent (choice, date, list)
  std::vector<double> numbers;    // integer, number, time (µs), flag (0/1)
  std::vector<contact_status> statuses;
  std::vector<contact_source> sources;
};

char lower_ascii(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// `want` is lower-cased already; no copy of `text` is made.
bool same_ci(std::string_view text, std::string_view want) {
  if (text.size() != want.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i)
    if (lower_ascii(text[i]) != want[i]) return false;
  return true;
}

bool holds_ci(std::string_view text, std::string_view want) {
  if (want.size() > text.size()) return false;
  for (std::size_t i = 0; i + want.size() <= text.size(); ++i) {
    std::size_t j = 0;
    while (j < want.size() && lower_ascii(text[i + j]) == want[j]) ++j;
    if (j == want.size()) return true;
  }
  return false;
}

template <class T>
bool among(const std::vector<T>& values, const T& v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// A built-in field's filter on `c`, without a copy of anything the contact holds.
bool holds_builtin(const compiled& f, const contact& c) {
  using o = search_op;
  auto op = f.op;
  // Texts: first_name, last_name, email, phone.
  auto on_text = [&](const std::string* v) {
    if (op == o::exists) return v != nullptr;
    if (op == o::not_exists) return v == nullptr;
    bool equal = v && std::any_of(f.texts.begin(), f.texts.end(),
                                  [&](const std::string& w) { return same_ci(*v, w); });
    if (op == o::eq || op == o::in) return equal;
    if (op == o::neq || op == o::not_in) return !equal;
    return v && holds_ci(*v, f.texts.front()); // contains
  };
  auto on_number = [&](std::optional<double> v) {
    if (op == o::exists) return v.has_value();
    if (op == o::not_exists) return !v.has_value();
    bool equal = v && among(f.numbers, *v);
    if (op == o::eq || op == o::in) return equal;
    if (op == o::neq || op == o::not_in) return !equal;
    if (!v) return false;
    auto w = f.numbers.front();
    return op == o::lt ? *v < w : op == o::lte ? *v <= w : op == o::gt ? *v > w : *v >= w;
  };
  auto opt = [](const std::optional<std::string>& s) { return s ? &*s : nullptr; };
  auto num = [](std::optional<std::int64_t> n) {
    return n ? std::optional<double>(static_cast<double>(*n)) : std::nullopt;
  };
  switch (f.which) {
  case builtin::first_name: return on_text(&c.first_name);
  case builtin::last_name: return on_text(opt(c.last_name));
  case builtin::email: return on_text(opt(c.email));
  case builtin::phone: return on_text(opt(c.phone));
  case builtin::id: return on_number(static_cast<double>(c.id));
  case builtin::company_id: return on_number(num(c.company_id));
  case builtin::owner_id: return on_number(num(c.owner_id));
  case builtin::created_at: return on_number(static_cast<double>(c.created_at));
  case builtin::updated_at: return on_number(static_cast<double>(c.updated_at));
  case builtin::status: {
    if (op == o::exists) return true;
    if (op == o::not_exists) return false;
    bool equal = among(f.statuses, c.status);
    return op == o::eq || op == o::in ? equal : !equal;
  }
  case builtin::source: {
    if (op == o::exists) return c.source.has_value();
    if (op == o::not_exists) return !c.source.has_value();
    bool equal = c.source && among(f.sources, *c.source);
    return op == o::eq || op == o::in ? equal : !equal;
  }
  case builtin::tag: {
    if (op == o::exists) return !c.tags.empty();
    if (op == o::not_exists) return c.tags.empty();
    if (op == o::contains)
      return std::any_of(c.tags.begin(), c.tags.end(),
                         [&](const std::string& t) { return holds_ci(t, f.texts.front()); });
    bool has = std::any_of(c.tags.begin(), c.tags.end(), [&](const std::string& t) {
      return std::any_of(f.texts.begin(), f.texts.end(),
                         [&](const std::string& w) { return same_ci(t, w); });
    });
    return op == o::eq || op == o::in ? has : !has;
  }
  case builtin::none: break;
  }
  return false;
}

// The value of a built-in field: its texts or numbers (none: absent).
struct field_value {
  bool present = false;
  std::vector<std::string> texts;
  double number = 0;
};

double as_double(const json::value& v) {
  if (auto i = v.if_int64()) return static_cast<double>(*i);
  if (auto u = v.if_uint64()) return static_cast<double>(*u);
  if (auto d = v.if_double()) return *d;
  if (auto b = v.if_bool()) return *b ? 1 : 0;
  return 0;
}

compiled compile(const search_filter& f) {
  compiled c;
  c.op = f.op;
  c.kind = f.kind;
  c.custom = f.field.rfind("cf.", 0) == 0;
  c.field = c.custom ? f.field.substr(3) : f.field;
  c.which = c.custom ? builtin::none : builtin_of(c.field);
  auto add = [&](const json::value& v) {
    switch (c.kind) {
    case search_kind::text:
    case search_kind::tag: c.texts.push_back(ascii_lower(sv(v.as_string()))); break;
    case search_kind::choice:
    case search_kind::list:
    case search_kind::date: c.texts.emplace_back(sv(v.as_string())); break;
    case search_kind::time:
      c.numbers.push_back(static_cast<double>(*parse_rfc3339(sv(v.as_string()))));
      break;
    default: c.numbers.push_back(as_double(v));
    }
  };
  if (auto a = f.value.if_array())
    for (auto& v : *a) add(v);
  else if (!f.value.is_null())
    add(f.value);
  for (auto& t : c.texts) {
    if (c.which == builtin::status)
      if (auto s = parse_contact_status(t)) c.statuses.push_back(*s);
    if (c.which == builtin::source)
      if (auto s = parse_contact_source(t)) c.sources.push_back(*s);
  }
  return c;
}

field_value custom_value(const compiled& f, const json::object* fields) {
  field_value out;
  if (!fields) return out;
  auto it = fields->find(f.field);
  if (it == fields->end() || it->value().is_null()) return out;
  auto& v = it->value();
  out.present = true;
  switch (f.kind) {
  case search_kind::text:
    if (auto s = v.if_string()) out.texts.push_back(ascii_lower(sv(*s)));
    break;
  case search_kind::choice:
  case search_kind::date:
    if (auto s = v.if_string()) out.texts.emplace_back(sv(*s));
    break;
  case search_kind::list:
    if (auto a = v.if_array())
      for (auto& x : *a)
        if (auto s = x.if_string()) out.texts.emplace_back(sv(*s));
    out.present = !out.texts.empty();
    break;
  case search_kind::time:
    if (auto s = v.if_string())
      if (auto t = parse_rfc3339(sv(*s))) out.number = static_cast<double>(*t);
    break;
  default: out.number = as_double(v);
  }
  return out;
}

bool holds(const compiled& f, const field_value& v) {
  using o = search_op;
  if (f.op == o::exists) return v.present;
  if (f.op == o::not_exists) return !v.present;
  bool many = f.kind == search_kind::tag || f.kind == search_kind::list;
  bool by_text = !f.texts.empty();
  auto has = [&](const std::string& want) {
    return std::find(v.texts.begin(), v.texts.end(), want) != v.texts.end();
  };
  auto equals_any = [&] {
    if (!v.present) return false;
    if (by_text) return std::any_of(f.texts.begin(), f.texts.end(), has);
    return std::any_of(f.numbers.begin(), f.numbers.end(), [&](double n) { return n == v.number; });
  };
  switch (f.op) {
  case o::eq:
  case o::in: return equals_any();
  case o::neq:
  case o::not_in: return !equals_any();
  case o::contains:
    return v.present && std::any_of(v.texts.begin(), v.texts.end(), [&](const std::string& t) {
             return t.find(f.texts.front()) != std::string::npos;
           });
  default: break;
  }
  if (!v.present || many) return false;
  // lt, lte, gt, gte: numbers, or dates as text (YYYY-MM-DD orders as it reads).
  int cmp = 0;
  if (by_text) {
    auto& got = v.texts.front();
    cmp = got < f.texts.front() ? -1 : got > f.texts.front() ? 1 : 0;
  } else {
    cmp = v.number < f.numbers.front() ? -1 : v.number > f.numbers.front() ? 1 : 0;
  }
  switch (f.op) {
  case o::lt: return cmp < 0;
  case o::lte: return cmp <= 0;
  case o::gt: return cmp > 0;
  case o::gte: return cmp >= 0;
  default: return false;
  }
}

struct compiled_search {
  std::vector<std::vector<compiled>> groups;
  bool needs_custom = false;

  bool operator()(const contact& c) const {
    if (groups.empty()) return true;
    json::value parsed;
    const json::object* fields = nullptr;
    if (needs_custom && c.custom_fields.size() > 2) {
      json::error_code ec;
      parsed = parse_json(c.custom_fields, ec);
      if (!ec) fields = parsed.if_object();
    }
    for (auto& g : groups) {
      bool all = true;
      for (auto& f : g) {
        if (!(f.custom ? holds(f, custom_value(f, fields)) : holds_builtin(f, c))) {
          all = false;
          break;
        }
      }
      if (all) return true;
    }
    return false;
  }
};

compiled_search compile_all(const contact_search& s) {
  compiled_search out;
  for (auto& g : s.groups) {
    auto& cg = out.groups.emplace_back();
    for (auto& f : g) {
      cg.push_back(compile(f));
      out.needs_custom = out.needs_custom || cg.back().custom;
    }
  }
  return out;
}

} // namespace search_detail

std::optional<contact_search> parse_contact_search(const json::value& body,
                                                   std::vector<issue>& issues) {
  using namespace search_detail;
  const auto before = issues.size();
  auto root = body.if_object();
  if (!root) {
    issues.push_back({{std::string("body")}, "Input should be a valid dictionary", "dict_type"});
    return std::nullopt;
  }
  contact_search s;
  auto at = [](std::initializer_list<loc_part> parts) { return std::vector<loc_part>(parts); };
  for (auto& [key, _] : *root)
    if (key != "filter_groups" && key != "sort" && key != "page" && key != "per_page")
      issues.push_back({at({std::string("body"), std::string(key)}),
                        "Extra inputs are not permitted", "extra_forbidden"});
  if (auto g = root->if_contains("filter_groups"); g && !g->is_null()) {
    auto groups = g->if_array();
    if (!groups || groups->size() > search_rules::groups_max) {
      issues.push_back({at({std::string("body"), std::string("filter_groups")}),
                        "Input should be a list of at most " +
                            std::to_string(search_rules::groups_max) + " groups",
                        "value_error"});
    } else {
      for (std::size_t gi = 0; gi < groups->size(); ++gi) {
        auto gl =
            at({std::string("body"), std::string("filter_groups"), static_cast<std::int64_t>(gi)});
        auto go = (*groups)[gi].if_object();
        auto filters = go ? go->if_contains("filters") : nullptr;
        auto fa = filters ? filters->if_array() : nullptr;
        if (!fa || fa->empty() || fa->size() > search_rules::filters_max || go->size() != 1) {
          gl.emplace_back(std::string("filters"));
          issues.push_back({gl,
                            "a group is {\"filters\": [...]} with 1 to " +
                                std::to_string(search_rules::filters_max) + " filters",
                            "value_error"});
          continue;
        }
        auto& group = s.groups.emplace_back();
        for (std::size_t fi = 0; fi < fa->size(); ++fi) {
          search_filter f;
          f.group = gi;
          f.index = fi;
          auto fo = (*fa)[fi].if_object();
          if (!fo) {
            auto l = filter_loc(f, "");
            l.pop_back();
            issues.push_back({l, "Input should be a valid dictionary", "dict_type"});
            continue;
          }
          for (auto& [key, _] : *fo)
            if (key != "field" && key != "op" && key != "value")
              issues.push_back(
                  {filter_loc(f, key), "Extra inputs are not permitted", "extra_forbidden"});
          auto field = fo->if_contains("field");
          auto op = fo->if_contains("op");
          bool known = false;
          if (!field || !field->is_string()) {
            issues.push_back({filter_loc(f, "field"), "Field required (a string)", "missing"});
          } else {
            f.field = sv(field->as_string());
            if (auto k = builtin_kind(f.field)) {
              f.kind = *k;
              known = true;
            } else if (f.field.rfind("cf.", 0) == 0 && valid_field_name(f.field.substr(3))) {
              known = true; // typed by its definition (check_custom_filters)
            } else {
              issues.push_back({filter_loc(f, "field"),
                                "unknown field '" + f.field +
                                    "': a field of the list, tag, owner_id or cf.<key>",
                                "value_error"});
            }
          }
          auto parsed =
              op && op->is_string() ? detail::lookup(op_table, sv(op->as_string())) : std::nullopt;
          if (!parsed) {
            issues.push_back({filter_loc(f, "op"), detail::one_of_message(op_table), "enum"});
            known = false;
          } else {
            f.op = *parsed;
          }
          if (auto v = fo->if_contains("value")) f.value = *v;
          if (known && f.field.rfind("cf.", 0) != 0) check_value(f, nullptr, issues);
          group.push_back(std::move(f));
        }
      }
    }
  }
  if (auto v = root->if_contains("sort"); v && !v->is_null()) {
    auto o = v->if_object();
    auto field = o ? o->if_contains("field") : nullptr;
    auto sort =
        field && field->is_string() ? parse_contact_sort(sv(field->as_string())) : std::nullopt;
    auto order = o ? o->if_contains("order") : nullptr;
    bool order_ok = !order || (order->is_string() &&
                               (order->as_string() == "asc" || order->as_string() == "desc"));
    if (!sort || !order_ok || o->size() > (order ? 2U : 1U)) {
      issues.push_back({at({std::string("body"), std::string("sort")}),
                        "sort is {\"field\": a sort field of the list, \"order\": \"asc\" or "
                        "\"desc\"}",
                        "value_error"});
    } else {
      s.sort = *sort;
      s.descending = order && order->as_string() == "desc";
    }
  }
  auto page_value = [&](const char* key, int fallback, int max) {
    auto v = root->if_contains(key);
    if (!v || v->is_null()) return fallback;
    auto n = detail::as_integer(*v);
    if (!n || *n < 1 || *n > max) {
      issues.push_back({at({std::string("body"), std::string(key)}),
                        "Input should be an integer from 1 to " + std::to_string(max),
                        "value_error"});
      return fallback;
    }
    return static_cast<int>(*n);
  };
  s.page = page_value("page", 1, 1'000'000);
  s.per_page = page_value("per_page", 20, 100);
  if (issues.size() != before) return std::nullopt;
  return s;
}

std::vector<issue> check_custom_filters(contact_search& s, const field_definitions& defs) {
  using namespace search_detail;
  std::vector<issue> issues;
  for (auto& g : s.groups)
    for (auto& f : g) {
      if (f.field.rfind("cf.", 0) != 0) continue;
      auto def = defs.find(field_entity::contact, std::string_view(f.field).substr(3));
      if (!def || !def->is_active) {
        issues.push_back({filter_loc(f, "field"),
                          "no active contact field '" + f.field.substr(3) + "'", "value_error"});
        continue;
      }
      if (def->sensitive) {
        issues.push_back({filter_loc(f, "field"),
                          "'" + f.field.substr(3) +
                              "' is sensitive: its values are sealed and may not be searched",
                          "value_error"});
        continue;
      }
      f.kind = custom_kind(def->type);
      check_value(f, has_options(def->type) ? &def->options : nullptr, issues);
    }
  return issues;
}

bool names_custom_fields(const contact_search& s) {
  for (auto& g : s.groups)
    for (auto& f : g)
      if (f.field.rfind("cf.", 0) == 0) return true;
  return false;
}

bool search_matches(const contact_search& s, const contact& c) {
  return search_detail::compile_all(s)(c);
}

std::function<bool(const contact&)> search_predicate(const contact_search& s) {
  return search_detail::compile_all(s);
}

namespace search_detail {

// A filter as a term of the value index (nothing: the index cannot answer it).
std::optional<value_term> value_term_of(const compiled& f) {
  using o = search_op;
  if (f.custom) return std::nullopt;
  value_term t;
  t.negated = f.op == o::neq || f.op == o::not_in;
  bool listed = f.op == o::eq || f.op == o::in || t.negated;
  std::string none; // the key of "no value"
  switch (f.which) {
  case builtin::status:
    if (f.op == o::exists) return value_term{{}, true}; // every contact has one
    if (f.op == o::not_exists) return value_term{};     // none has none
    for (auto s : f.statuses) t.keys.push_back(status_value_key(s));
    break;
  case builtin::source:
    none = source_value_key(std::nullopt);
    for (auto s : f.sources) t.keys.push_back(source_value_key(s));
    break;
  case builtin::tag:
    if (f.op == o::contains) return std::nullopt;
    none = tag_value_key("");
    for (auto& text : f.texts) t.keys.push_back(tag_value_key(text));
    break;
  case builtin::owner_id:
  case builtin::company_id: {
    if (!listed && f.op != o::exists && f.op != o::not_exists) return std::nullopt;
    auto key = f.which == builtin::owner_id ? owner_value_key : company_value_key;
    none = key(std::nullopt);
    for (auto n : f.numbers) {
      auto id = static_cast<std::int64_t>(n);
      if (static_cast<double>(id) != n) return std::nullopt;
      t.keys.push_back(key(id));
    }
    break;
  }
  default: return std::nullopt;
  }
  if (f.op == o::exists) return value_term{{none}, true};
  if (f.op == o::not_exists) return value_term{{none}, false};
  if (!listed) return std::nullopt;
  return t;
}

} // namespace search_detail

std::shared_ptr<const value_plan> search_value_plan(const contact_search& s) {
  if (s.groups.empty()) return nullptr;
  auto plan = std::make_shared<value_plan>();
  for (auto& g : s.groups) {
    auto& group = plan->emplace_back();
    for (auto& f : g) {
      auto t = search_detail::value_term_of(search_detail::compile(f));
      if (!t) return nullptr;
      group.push_back(std::move(*t));
    }
  }
  return plan;
}

} // namespace crm::domain
