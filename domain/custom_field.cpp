#include "domain/custom_field.hpp"

#include "domain/clock.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <set>

namespace crm::domain {
namespace json = boost::json;
namespace {

constexpr std::array<std::pair<field_entity, std::string_view>, 3> entities = {
    {{field_entity::contact, "contact"},
     {field_entity::company, "company"},
     {field_entity::deal, "deal"}}};

constexpr std::array<std::pair<field_type, std::string_view>, 12> types = {{
    {field_type::text, "text"},
    {field_type::textarea, "textarea"},
    {field_type::number, "number"},
    {field_type::integer, "integer"},
    {field_type::boolean, "boolean"},
    {field_type::date, "date"},
    {field_type::datetime, "datetime"},
    {field_type::email, "email"},
    {field_type::phone, "phone"},
    {field_type::url, "url"},
    {field_type::select, "select"},
    {field_type::multiselect, "multiselect"},
}};

bool valid_date(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  return parse_rfc3339(s).has_value();
}

bool valid_url(std::string_view s) {
  std::string_view rest;
  if (s.rfind("https://", 0) == 0)
    rest = s.substr(8);
  else if (s.rfind("http://", 0) == 0)
    rest = s.substr(7);
  else
    return false;
  auto host = rest.substr(0, rest.find_first_of("/?#"));
  if (host.empty() || host.size() > 253) return false;
  for (char c : host)
    if (std::isspace(static_cast<unsigned char>(c))) return false;
  for (char c : s)
    if (static_cast<unsigned char>(c) <= 0x20) return false;
  return true;
}

const char* type_error(const custom_field& f, const json::value& v) {
  auto str = v.if_string();
  std::string_view sv = str ? std::string_view(str->data(), str->size()) : std::string_view{};
  switch (f.type) {
  case field_type::text:
    if (!str) return "Input should be a valid string";
    return utf8_length(sv) > 1000 ? "String should have at most 1000 characters" : nullptr;
  case field_type::textarea:
    if (!str) return "Input should be a valid string";
    return utf8_length(sv) > 10000 ? "String should have at most 10000 characters" : nullptr;
  case field_type::number: return v.is_number() ? nullptr : "Input should be a valid number";
  case field_type::integer:
    if (v.is_int64() || v.is_uint64()) return nullptr;
    return "Input should be a valid integer";
  case field_type::boolean: return v.is_bool() ? nullptr : "Input should be a valid boolean";
  case field_type::date:
    return str && valid_date(sv) ? nullptr : "Input should be a valid date (YYYY-MM-DD)";
  case field_type::datetime:
    return str && sv.size() > 10 && parse_rfc3339(sv) ? nullptr
                                                      : "Input should be a valid RFC 3339 datetime";
  case field_type::email:
    return str && is_valid_email(sv) ? nullptr : "value is not a valid email address";
  case field_type::phone:
    return str && is_e164(sv) ? nullptr : "value is not a valid E.164 phone number";
  case field_type::url: return str && valid_url(sv) ? nullptr : "Input should be a valid URL";
  case field_type::select:
    if (!str) return "Input should be a valid string";
    for (auto& o : f.options)
      if (o == sv) return nullptr;
    return "Input should be one of the field's options";
  case field_type::multiselect: {
    auto a = v.if_array();
    if (!a) return "Input should be a valid list";
    std::set<std::string_view> seen;
    for (auto& item : *a) {
      auto s = item.if_string();
      if (!s) return "Input should be a list of the field's options";
      std::string_view x(s->data(), s->size());
      if (!seen.insert(x).second) return "options must not repeat";
      bool known = false;
      for (auto& o : f.options) known = known || o == x;
      if (!known) return "Input should be a list of the field's options";
    }
    return nullptr;
  }
  }
  return "invalid value";
}

} // namespace

std::optional<field_entity> parse_field_entity(std::string_view s) {
  for (auto& [e, n] : entities)
    if (n == s) return e;
  return std::nullopt;
}
std::string_view to_string(field_entity e) {
  for (auto& [v, n] : entities)
    if (v == e) return n;
  return "";
}
std::optional<field_type> parse_field_type(std::string_view s) {
  for (auto& [t, n] : types)
    if (n == s) return t;
  return std::nullopt;
}
std::string_view to_string(field_type t) {
  for (auto& [v, n] : types)
    if (v == t) return n;
  return "";
}
bool has_options(field_type t) {
  return t == field_type::select || t == field_type::multiselect;
}

bool widening(field_type from, field_type to) {
  if (from == to) return true;
  // Text and long text hold the same values; only the length limit of new writes differs.
  if (from == field_type::text && to == field_type::textarea) return true;
  if (from == field_type::textarea && to == field_type::text) return true;
  return from == field_type::integer && to == field_type::number;
}

bool valid_field_name(std::string_view s) {
  if (s.empty() || s.size() > 63 || s[0] < 'a' || s[0] > 'z') return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

const custom_field* field_definitions::find(field_entity e, std::string_view name) const {
  for (auto& f : fields)
    if (f.entity == e && f.name == name) return &f;
  return nullptr;
}

std::vector<issue> check_custom_values(const field_definitions& defs, field_entity entity,
                                       std::string_view written, std::string_view merged,
                                       bool creating, const std::vector<loc_part>& prefix) {
  std::vector<issue> out;
  auto loc = [&](std::string_view key) {
    auto l = prefix;
    l.emplace_back(std::string("custom_fields"));
    l.emplace_back(std::string(key));
    return l;
  };
  json::error_code ec;
  auto w = crm::domain::parse_json(written, ec);
  if (!ec && w.is_object()) {
    for (auto& kv : w.as_object()) {
      std::string_view key(kv.key().data(), kv.key().size());
      auto f = defs.find(entity, key);
      if (!f) continue;
      if (!f->is_active) {
        out.push_back(
            {loc(key), "the custom field '" + std::string(key) + "' is inactive", "value_error"});
        continue;
      }
      if (kv.value().is_null()) continue; // removal
      if (auto why = type_error(*f, kv.value())) out.push_back({loc(key), why, "value_error"});
    }
  }
  if (creating) {
    auto m = crm::domain::parse_json(merged, ec);
    const json::object* mo = !ec ? m.if_object() : nullptr;
    for (auto& f : defs.fields) {
      if (f.entity != entity || !f.is_active || !f.required) continue;
      auto it = mo ? mo->find(f.name) : nullptr;
      if (!mo || it == mo->end() || it->value().is_null())
        out.push_back({loc(f.name), "Field required", "missing"});
    }
  }
  return out;
}

std::optional<std::string> cell_to_json(field_type t, std::string_view cell) {
  switch (t) {
  case field_type::number: {
    char* end = nullptr;
    std::string s(cell);
    double d = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size()) return std::nullopt;
    return json::serialize(json::value(d));
  }
  case field_type::integer: {
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), n);
    if (cell.empty() || ec != std::errc{} || p != cell.data() + cell.size()) return std::nullopt;
    return std::to_string(n);
  }
  case field_type::boolean:
    if (cell == "true" || cell == "1") return std::string("true");
    if (cell == "false" || cell == "0") return std::string("false");
    return std::nullopt;
  case field_type::multiselect: {
    json::array a;
    std::string_view rest = cell;
    while (!rest.empty()) {
      auto semi = rest.find(';');
      auto part = trim(rest.substr(0, semi));
      if (!part.empty()) a.emplace_back(part);
      if (semi == std::string_view::npos) break;
      rest = rest.substr(semi + 1);
    }
    return json::serialize(a);
  }
  default: return json::serialize(json::value(json::string(cell)));
  }
}

bool value_equals(std::string_view custom_fields_json, std::string_view key,
                  std::string_view want) {
  if (custom_fields_json.size() <= 2) return false;
  json::error_code ec;
  auto v = crm::domain::parse_json(custom_fields_json, ec);
  if (ec || !v.is_object()) return false;
  auto it = v.as_object().find(key);
  if (it == v.as_object().end()) return false;
  auto& val = it->value();
  if (auto s = val.if_string()) return std::string_view(s->data(), s->size()) == want;
  if (val.is_bool()) {
    bool b = val.as_bool();
    return b ? (want == "true" || want == "1") : (want == "false" || want == "0");
  }
  if (val.is_number()) {
    std::string w(want);
    char* end = nullptr;
    double d = std::strtod(w.c_str(), &end);
    if (w.empty() || end != w.c_str() + w.size()) return false;
    return val.to_number<double>() == d;
  }
  return false;
}

std::optional<std::string> merge_custom_values(const std::string& current, const std::string& patch,
                                               bool replace) {
  boost::json::error_code ec;
  auto p = crm::domain::parse_json(patch, ec);
  if (ec || !p.is_object()) return std::nullopt;
  boost::json::object out;
  if (!replace) {
    auto cur = crm::domain::parse_json(current, ec);
    if (!ec && cur.is_object()) out = std::move(cur.as_object());
  }
  for (auto& kv : p.as_object()) {
    if (kv.value().is_null())
      out.erase(kv.key());
    else
      out[kv.key()] = kv.value();
  }
  return boost::json::serialize(out);
}

std::vector<std::string> field_definitions::sensitive(field_entity e) const {
  std::vector<std::string> out;
  for (auto& f : fields)
    if (f.entity == e && f.sensitive) out.push_back(f.name);
  return out;
}

const custom_field* field_definitions::by_id(std::int64_t id) const {
  for (auto& f : fields)
    if (f.id == id) return &f;
  return nullptr;
}

outcome<custom_field> field_definitions::get(field_entity e, std::int64_t id) const {
  auto f = by_id(id);
  if (!f) return failure::of(errc::not_found, "custom field not found");
  if (f->entity != e) return failure::of(errc::not_found, "custom field not found for this entity");
  return *f;
}

std::vector<custom_field> field_definitions::of(field_entity e, bool include_inactive) const {
  std::vector<custom_field> out;
  for (auto& f : fields)
    if (f.entity == e && (include_inactive || f.is_active)) out.push_back(f);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

outcome<custom_field> field_definitions::plan_create(custom_field f, std::int64_t tenant,
                                                     std::int64_t now) const {
  if (find(f.entity, f.name))
    return failure::of(errc::conflict, "a custom field with this name exists for this entity");
  f.id = 0;
  f.tenant_id = tenant;
  f.created_at = f.updated_at = now;
  return f;
}

outcome<custom_field> field_definitions::plan_update(field_entity e, std::int64_t id, field_patch p,
                                                     std::int64_t now) const {
  if (!p.issues.empty() && !by_id(id)) return failure::invalid(std::move(p.issues));
  auto found = get(e, id);
  if (!found) return found;
  const auto& cur = *found;
  auto next = cur;
  auto issues = std::move(p.issues);
  auto type = p.type.value_or(cur.type);
  if (p.options && !has_options(type))
    issues.push_back({{"body", "options"},
                      "options are only allowed for select and multiselect",
                      "value_error"});
  if (!issues.empty()) return failure::invalid(std::move(issues));
  if (p.name && *p.name != cur.name)
    return failure::of(errc::conflict, "a custom field's name cannot change");
  // Values stored sealed (or not) stay as they are: a field changes sensitivity by being
  // replaced (docs/compliance.md "Sensitive fields").
  if (p.sensitive && *p.sensitive != cur.sensitive)
    return failure::of(errc::conflict,
                       "a field's sensitivity cannot change; create a new field instead");
  if (type != cur.type && !widening(cur.type, type))
    return failure::of(errc::conflict, "this type change could invalidate stored values; "
                                       "create a new field instead");
  next.type = type;
  if (p.options) {
    for (auto& o : cur.options)
      if (std::find(p.options->begin(), p.options->end(), o) == p.options->end())
        return failure::of(errc::conflict, "options cannot be removed: stored values may use them");
    next.options = *p.options;
  }
  if (p.label) next.label = *p.label;
  if (p.required) next.required = *p.required;
  if (p.is_active) next.is_active = *p.is_active;
  next.updated_at = std::max(now, cur.updated_at + 1);
  return next;
}

outcome<custom_field> field_definitions::plan_deactivate(field_entity e, std::int64_t id,
                                                         std::int64_t now) const {
  auto found = get(e, id);
  if (!found) return found;
  auto next = *found;
  next.is_active = false;
  next.updated_at = std::max(now, found->updated_at + 1);
  return next;
}

void field_definitions::put(const custom_field& f, std::int64_t committed_version,
                            const std::string& data_key) {
  auto it = std::find_if(fields.begin(), fields.end(),
                         [&](const custom_field& d) { return d.id == f.id; });
  if (it == fields.end())
    fields.push_back(f);
  else
    *it = f;
  version = std::max(version, committed_version);
  if (!data_key.empty()) sealed_data_key = data_key;
}

void field_definitions::erase(std::int64_t id, std::int64_t committed_version) {
  std::erase_if(fields, [&](const custom_field& d) { return d.id == id; });
  version = std::max(version, committed_version);
}

namespace {

constexpr std::string_view sealed_key = "$sealed";

const boost::json::string* sealed_text(const boost::json::value& v) {
  if (!v.is_object()) return nullptr;
  auto& o = v.as_object();
  if (o.size() != 1) return nullptr;
  auto* s = o.if_contains(sealed_key);
  return s && s->is_string() ? &s->as_string() : nullptr;
}

enum class edit : std::uint8_t { none, changed, removed };

// Calls `f(key, member value)` for each member of `keys` present (not null) in the object
// `text`, which may change or remove it; answers the new text when anything was edited.
template <class F>
std::optional<std::string> rewrite(std::string_view text, const std::vector<std::string>& keys,
                                   F f) {
  if (keys.empty()) return std::nullopt;
  boost::json::error_code ec;
  auto v = crm::domain::parse_json(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  auto& o = v.as_object();
  bool edited = false;
  for (auto& k : keys) {
    auto* m = o.if_contains(k);
    if (!m || m->is_null()) continue;
    auto e = f(k, *m);
    if (e == edit::removed) o.erase(k);
    edited = edited || e != edit::none;
  }
  if (!edited) return std::nullopt;
  return boost::json::serialize(v);
}

} // namespace

bool may_hold_sealed(std::string_view custom_fields) {
  return custom_fields.find("\"$sealed\"") != std::string_view::npos;
}

std::optional<std::string>
seal_custom_values(std::string_view text, const std::vector<std::string>& keys,
                   const std::function<std::string(std::string_view, std::string_view)>& seal) {
  return rewrite(text, keys, [&](const std::string& k, boost::json::value& m) {
    if (sealed_text(m)) return edit::none;
    m = boost::json::object{{sealed_key, seal(k, boost::json::serialize(m))}};
    return edit::changed;
  });
}

std::optional<std::string> drop_masked_values(std::string_view patch,
                                              const std::vector<std::string>& keys) {
  if (patch.find("\"***\"") == std::string_view::npos) return std::nullopt;
  return rewrite(patch, keys, [](const std::string&, boost::json::value& m) {
    return m.is_string() && m.as_string() == masked_value ? edit::removed : edit::none;
  });
}

std::string mask_custom_values(std::string_view text, const std::vector<std::string>& keys) {
  auto out = rewrite(text, keys, [](const std::string&, boost::json::value& m) {
    if (!sealed_text(m)) return edit::none;
    m = boost::json::string(masked_value);
    return edit::changed;
  });
  return out ? std::move(*out) : std::string(text);
}

std::string open_custom_values(
    std::string_view text, const std::vector<std::string>& keys,
    const std::function<std::optional<std::string>(std::string_view, std::string_view)>& open,
    std::vector<std::string>& opened) {
  auto out = rewrite(text, keys, [&](const std::string& k, boost::json::value& m) {
    auto* sealed = sealed_text(m);
    if (!sealed) return edit::none;
    boost::json::error_code ec;
    auto plain = open(k, std::string_view(sealed->data(), sealed->size()));
    auto value = plain ? crm::domain::parse_json(*plain, ec) : boost::json::value();
    if (!plain || ec) {
      m = boost::json::string(masked_value);
    } else {
      m = std::move(value);
      opened.push_back(k);
    }
    return edit::changed;
  });
  return out ? std::move(*out) : std::string(text);
}

std::optional<std::string> reseal_custom_values(
    std::string_view text,
    const std::function<std::optional<std::string>(std::string_view, std::string_view)>& reseal) {
  if (!may_hold_sealed(text)) return std::nullopt;
  boost::json::error_code ec;
  auto v = crm::domain::parse_json(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  bool changed = false;
  for (auto& kv : v.as_object()) {
    auto* sealed = sealed_text(kv.value());
    if (!sealed) continue;
    auto again = reseal(kv.key(), std::string_view(sealed->data(), sealed->size()));
    if (!again) continue;
    kv.value() = boost::json::object{{sealed_key, *again}};
    changed = true;
  }
  if (!changed) return std::nullopt;
  return boost::json::serialize(v);
}

} // namespace crm::domain
