#include "http/contact_input.hpp"

#include "domain/csv.hpp"

#include "domain/clock.hpp"
#include "domain/custom_field.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"
#include "http/json.hpp"

#include <boost/json.hpp>

#include <charconv>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::issue;

loc_path at(const loc_path& prefix, std::string key) {
  auto l = prefix;
  l.emplace_back(std::move(key));
  return l;
}

struct field_reader {
  const json::object& o;
  const loc_path& prefix;
  std::vector<issue>& issues;
  std::vector<std::string_view> known;

  const json::value* get(std::string_view key) {
    known.push_back(key);
    auto it = o.find(key);
    return it == o.end() ? nullptr : &it->value();
  }
  void add(std::string_view key, std::string msg, std::string type) {
    issues.push_back({at(prefix, std::string(key)), std::move(msg), std::move(type)});
  }

  // A string of min..max code points after trimming.
  std::optional<std::string> text(std::string_view key, const json::value& v, std::size_t min,
                                  std::size_t max) {
    auto s = v.if_string();
    if (!s) {
      add(key, "Input should be a valid string", "string_type");
      return std::nullopt;
    }
    auto t = std::string(domain::trim(std::string_view(s->data(), s->size())));
    auto n = domain::utf8_length(t);
    if (n < min) {
      add(key,
          "String should have at least " + std::to_string(min) + " character" +
              (min == 1 ? "" : "s"),
          "string_too_short");
      return std::nullopt;
    }
    if (max && n > max) {
      add(key, "String should have at most " + std::to_string(max) + " characters",
          "string_too_long");
      return std::nullopt;
    }
    return t;
  }

  // Outer optional: sent. Inner: not null.
  std::optional<std::optional<std::string>> nullable_text(std::string_view key, std::size_t max) {
    auto v = get(key);
    if (!v) return std::nullopt;
    if (v->is_null()) return std::optional<std::string>{};
    auto t = text(key, *v, 0, max);
    if (!t) return std::nullopt;
    return std::optional<std::string>{std::move(*t)};
  }

  void forbid_unknown() {
    for (auto& kv : o) {
      std::string_view k(kv.key().data(), kv.key().size());
      if (std::find(known.begin(), known.end(), k) == known.end())
        add(k, "Extra inputs are not permitted", "extra_forbidden");
    }
  }
};

template <class E>
std::optional<E> enum_value(field_reader& r, std::string_view key, const json::value& v,
                            std::optional<E> (*parse)(std::string_view),
                            const std::string& message) {
  auto s = v.if_string();
  std::optional<E> e;
  if (s) e = parse(std::string_view(s->data(), s->size()));
  if (!e) r.add(key, message, "enum");
  return e;
}

const std::string status_message = enum_message(contact_rules::statuses);
const std::string source_message = enum_message(contact_rules::sources);

void check_email(field_reader& r, std::optional<std::optional<std::string>>& email) {
  if (email && *email && (!domain::is_valid_email(**email))) {
    r.add("email", "value is not a valid email address", "value_error.email");
    email.reset();
  }
}

void check_phone(field_reader& r, std::optional<std::optional<std::string>>& phone) {
  if (phone && *phone && !domain::is_e164(**phone)) {
    r.add("phone", "value is not a valid E.164 phone number", "value_error.phone");
    phone.reset();
  }
}

std::optional<std::string> custom_fields_text(field_reader& r, const json::value& v) {
  if (!v.is_object()) {
    r.add("custom_fields", "Input should be a valid dictionary", "value_error");
    return std::nullopt;
  }
  auto text = json::serialize(v);
  if (text.size() > contact_rules::custom_fields_max) {
    r.add("custom_fields",
          "custom fields exceed " + std::to_string(contact_rules::custom_fields_max / 1024) +
              " KiB",
          "value_error");
    return std::nullopt;
  }
  return text;
}

std::optional<std::int64_t> parse_int(std::string_view s) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return n;
}

} // namespace

std::string enum_message(std::span<const std::string_view> values) {
  std::string out = "Input should be ";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += i + 1 == values.size() ? " or " : ", ";
    out += "'" + std::string(values[i]) + "'";
  }
  return out;
}

std::optional<std::vector<std::string>> read_tags(const json::value& v, const loc_path& loc,
                                                  std::vector<issue>& issues) {
  auto a = v.if_array();
  if (!a) {
    issues.push_back({loc, "Input should be a valid list", "value_error"});
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto l = loc;
    l.emplace_back(static_cast<std::int64_t>(i));
    auto s = (*a)[i].if_string();
    if (!s) {
      issues.push_back({l, "Input should be a valid string", "string_type"});
      ok = false;
      continue;
    }
    auto t = std::string(domain::trim(std::string_view(s->data(), s->size())));
    auto n = domain::utf8_length(t);
    if (n < 1) {
      issues.push_back({l, "String should have at least 1 character", "string_too_short"});
      ok = false;
    } else if (n > contact_rules::tag_max) {
      issues.push_back(
          {l,
           "String should have at most " + std::to_string(contact_rules::tag_max) + " characters",
           "string_too_long"});
      ok = false;
    } else {
      out.push_back(std::move(t));
    }
  }
  if (ok && a->size() > contact_rules::tags_max) {
    // Count distinct tags: duplicates collapse before the limit applies.
    std::vector<std::string> lower;
    for (auto& t : out) {
      auto lt = domain::ascii_lower(t);
      if (std::find(lower.begin(), lower.end(), lt) == lower.end()) lower.push_back(lt);
    }
    if (lower.size() > contact_rules::tags_max) {
      issues.push_back(
          {loc, "List should have at most " + std::to_string(contact_rules::tags_max) + " tags",
           "value_error"});
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

actors::contact_fields read_contact(const json::object& o, bool creating, const loc_path& prefix,
                                    std::vector<issue>& issues) {
  field_reader r{o, prefix, issues, {}};
  actors::contact_fields f;
  if (auto v = r.get("first_name")) {
    f.first_name = r.text("first_name", *v, 1, contact_rules::first_name_max);
  } else if (creating) {
    r.add("first_name", "Field required", "missing");
  }
  f.last_name = r.nullable_text("last_name", contact_rules::last_name_max);
  f.email = r.nullable_text("email", contact_rules::email_max);
  check_email(r, f.email);
  f.phone = r.nullable_text("phone", 0);
  check_phone(r, f.phone);
  if (auto v = r.get("company_id")) {
    if (v->is_null())
      f.company_id = std::optional<std::int64_t>{};
    else if (auto i = v->if_int64())
      f.company_id = std::optional<std::int64_t>{*i};
    else
      r.add("company_id", "Input should be a valid integer", "int_parsing");
  }
  if (auto v = r.get("owner_id")) {
    if (v->is_null())
      f.owner_id = std::optional<std::int64_t>{};
    else if (auto i = v->if_int64(); i && *i >= 1)
      f.owner_id = std::optional<std::int64_t>{*i};
    else
      r.add("owner_id", "Input should be a valid id (a positive integer)", "int_parsing");
  }
  if (auto v = r.get("status"))
    f.status = enum_value(r, "status", *v, &domain::parse_contact_status, status_message);
  if (auto v = r.get("source")) {
    if (v->is_null())
      f.source = std::optional<domain::contact_source>{};
    else if (auto s = enum_value(r, "source", *v, &domain::parse_contact_source, source_message))
      f.source = std::optional<domain::contact_source>{*s};
  }
  if (auto v = r.get("tags")) f.tags = read_tags(*v, at(prefix, "tags"), issues);
  if (auto v = r.get("custom_fields")) f.custom_fields = custom_fields_text(r, *v);
  r.forbid_unknown();
  return f;
}

bool importable_column(std::string_view name) {
  // The export's columns all import (docs/design.md "Import"): id, created_at and updated_at
  // are the server's and ignored; custom_fields is the JSON object the export writes.
  static const std::vector<std::string_view> names = {
      "first_name", "last_name", "email",         "phone", "company_id", "owner_id",  "status",
      "source",     "tags",      "custom_fields", "id",    "created_at", "updated_at"};
  if (std::find(names.begin(), names.end(), name) != names.end()) return true;
  auto prefix = list_rules::custom_prefix;
  return name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix;
}

actors::contact_fields read_contact_row(const std::vector<std::string>& header,
                                        const std::vector<std::string>& cells,
                                        const loc_path& prefix, std::vector<issue>& issues) {
  // Build the JSON object a client would have sent, then apply the JSON rules.
  json::object o;
  json::object cf;
  for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) {
    auto& name = header[i];
    auto cell = std::string(domain::unescape_csv_formula(domain::trim(cells[i])));
    if (cell.empty() || name == "id" || name == "created_at" || name == "updated_at") continue;
    if (name == "custom_fields") {
      // The export's JSON object; a cf.<key> column of the same key wins.
      json::error_code ec;
      auto v = crm::domain::parse_json(cell, ec);
      if (ec || !v.is_object()) {
        o["custom_fields"] = cell; // reported as not a dictionary
        continue;
      }
      for (auto& [k, val] : v.as_object())
        if (!cf.contains(k)) cf[k] = val;
      continue;
    }
    if (name == "tags") {
      json::array tags;
      std::string_view rest = cell;
      while (!rest.empty()) {
        auto semi = rest.find(';');
        auto t = domain::trim(rest.substr(0, semi));
        if (!t.empty()) tags.emplace_back(t);
        if (semi == std::string_view::npos) break;
        rest = rest.substr(semi + 1);
      }
      o["tags"] = std::move(tags);
    } else if (name == "company_id" || name == "owner_id") {
      if (auto n = parse_int(cell))
        o[name] = *n;
      else
        o[name] = cell; // reported as int_parsing
    } else if (name.rfind(list_rules::custom_prefix, 0) == 0) {
      cf.insert_or_assign(name.substr(list_rules::custom_prefix.size()), cell);
    } else {
      o[name] = cell;
    }
  }
  if (!cf.empty() && !o.contains("custom_fields")) o["custom_fields"] = std::move(cf);
  // "import" unless the file has a source column (an export's: an empty cell is no source).
  if (!o.contains("source") && std::find(header.begin(), header.end(), "source") == header.end())
    o["source"] = "import";
  return read_contact(o, true, prefix, issues);
}

actors::company_fields read_company(const json::object& o, bool creating,
                                    std::vector<issue>& issues) {
  loc_path prefix{std::string("body")};
  field_reader r{o, prefix, issues, {}};
  actors::company_fields f;
  if (auto v = r.get("name"))
    f.name = r.text("name", *v, 1, company_rules::name_max);
  else if (creating)
    r.add("name", "Field required", "missing");
  f.domain = r.nullable_text("domain", company_rules::domain_max);
  f.phone = r.nullable_text("phone", 0);
  check_phone(r, f.phone);
  f.industry = r.nullable_text("industry", company_rules::industry_max);
  f.address = r.nullable_text("address", company_rules::address_max);
  if (auto v = r.get("custom_fields")) f.custom_fields = custom_fields_text(r, *v);
  r.forbid_unknown();
  return f;
}

std::optional<contact_list_params> read_contact_query(const request& req,
                                                      std::vector<issue>& issues) {
  contact_list_params out;
  auto page = query_int(req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  auto& q = out.query;
  auto bad = [&](const std::string& name, std::string msg, std::string type) {
    issues.push_back({{std::string("query"), name}, std::move(msg), std::move(type)});
  };
  std::vector<std::pair<std::string, std::string>> cf;
  for (auto& [k, v] : req.query) {
    if (k == "search") {
      q.search = v;
    } else if (k == "sort_by") {
      auto s = domain::parse_contact_sort(v);
      if (!s)
        bad(k, enum_message(contact_rules::sort_fields), "enum");
      else
        q.sort = *s;
    } else if (k == "sort_order") {
      auto& orders = list_rules::sort_orders;
      if (std::find(orders.begin(), orders.end(), v) == orders.end())
        bad(k, enum_message(orders), "enum");
      else
        q.descending = v == "desc";
    } else if (k == "status") {
      if (auto s = domain::parse_contact_status(v))
        q.status = s;
      else
        bad(k, status_message, "enum");
    } else if (k == "source") {
      if (auto s = domain::parse_contact_source(v))
        q.source = s;
      else
        bad(k, source_message, "enum");
    } else if (k == "company_id" || k == "owner_id") {
      if (auto n = parse_int(v))
        (k == "company_id" ? q.company_id : q.owner_id) = n;
      else
        bad(k, "Input should be a valid integer, unable to parse string as an integer",
            "int_parsing");
    } else if (k == "tag") {
      q.tags.push_back(v);
    } else if (k == "created_after" || k == "created_before" || k == "updated_after") {
      auto t = domain::parse_rfc3339(v);
      if (!t) {
        bad(k, "Input should be a valid RFC 3339 datetime", "value_error");
        continue;
      }
      if (k == "created_after")
        q.created_after = t;
      else if (k == "created_before")
        q.created_before = t;
      else
        q.updated_after = t;
    } else if (auto prefix = list_rules::custom_prefix;
               k.size() > prefix.size() && k.rfind(prefix, 0) == 0) {
      cf.emplace_back(k.substr(prefix.size()), v);
    }
  }
  if (!issues.empty()) return std::nullopt;
  out.page = *page;
  out.per_page = *per_page;
  q.offset = static_cast<std::int64_t>(out.page - 1) * out.per_page;
  q.limit = out.per_page;
  if (!cf.empty()) {
    // Custom field equality by the stored value's JSON type: text, number or boolean.
    q.extra = [cf](const domain::contact& c) {
      for (auto& [key, want] : cf)
        if (!domain::value_equals(c.custom_fields, key, want)) return false;
      return true;
    };
  }
  return out;
}

} // namespace crm::http
