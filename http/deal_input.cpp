#include "http/deal_input.hpp"

#include "domain/csv.hpp"
#include "domain/json_nul.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"
#include "http/json.hpp"

#include <boost/json.hpp>

#include <charconv>
#include <cmath>
#include <initializer_list>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::issue;

struct reader {
  const json::object& o;
  loc_path prefix;
  std::vector<issue>& issues;

  loc_path at(std::string_view key) const {
    auto l = prefix;
    l.emplace_back(std::string(key));
    return l;
  }
  void add(std::string_view key, std::string msg, std::string type) {
    issues.push_back({at(key), std::move(msg), std::move(type)});
  }
  const json::value* get(std::string_view key) const {
    auto it = o.find(key);
    return it == o.end() ? nullptr : &it->value();
  }
  void extra(std::initializer_list<std::string_view> known) {
    for (auto& kv : o) {
      auto k = kv.key();
      if (std::find(known.begin(), known.end(), k) == known.end())
        add(k, "Extra inputs are not permitted", "extra_forbidden");
    }
  }
  void required(std::string_view key) { add(key, "Field required", "missing"); }

  std::optional<std::string> text(std::string_view key, const json::value& v, std::size_t min,
                                  std::size_t max) {
    auto s = v.if_string();
    if (!s) {
      add(key, "Input should be a valid string", "string_type");
      return std::nullopt;
    }
    auto t = std::string(domain::trim(std::string_view(s->data(), s->size())));
    if ((t.find('\0') != std::string::npos)) {
      add(key, "Input should not contain the NUL character (U+0000)", "value_error");
      return std::nullopt;
    }
    auto n = domain::utf8_length(t);
    if (n < min) {
      add(key,
          "String should have at least " + std::to_string(min) + " character" +
              (min == 1 ? "" : "s"),
          "string_too_short");
      return std::nullopt;
    }
    if (n > max) {
      add(key, "String should have at most " + std::to_string(max) + " characters",
          "string_too_long");
      return std::nullopt;
    }
    return t;
  }

  std::optional<std::int64_t> integer(std::string_view key, const json::value& v, std::int64_t min,
                                      std::int64_t max) {
    std::optional<std::int64_t> n;
    if (auto i = v.if_int64())
      n = *i;
    else if (auto u = v.if_uint64(); u && *u <= static_cast<std::uint64_t>(INT64_MAX))
      n = static_cast<std::int64_t>(*u);
    else if (auto d = v.if_double(); d && std::trunc(*d) == *d && *d >= -9.2e18 && *d <= 9.2e18)
      n = static_cast<std::int64_t>(*d);
    if (!n) {
      add(key, "Input should be a valid integer", "int_parsing");
      return std::nullopt;
    }
    if (*n < min) {
      add(key, "Input should be greater than or equal to " + std::to_string(min),
          "greater_than_equal");
      return std::nullopt;
    }
    if (*n > max) {
      add(key, "Input should be less than or equal to " + std::to_string(max), "less_than_equal");
      return std::nullopt;
    }
    return n;
  }

  std::optional<bool> boolean(std::string_view key, const json::value& v) {
    if (auto b = v.if_bool()) return *b;
    add(key, "Input should be a valid boolean", "bool_parsing");
    return std::nullopt;
  }

  std::optional<domain::stage_kind> kind(std::string_view key, const json::value& v) {
    auto s = v.if_string();
    auto k = s ? domain::parse_stage_kind(std::string_view(s->data(), s->size())) : std::nullopt;
    if (!k) add(key, domain::stage_kind_message(), "enum");
    return k;
  }

  // An optional id: absent → not sent; null → cleared.
  void optional_id(std::string_view key, std::optional<std::optional<std::int64_t>>& out) {
    auto v = get(key);
    if (!v) return;
    if (v->is_null()) {
      out = std::optional<std::int64_t>();
      return;
    }
    if (auto n = integer(key, *v, 1, INT64_MAX)) out = std::optional<std::int64_t>(*n);
  }
};

} // namespace

actors::deal_fields read_deal(const json::object& o, bool creating, bool move,
                              const loc_path& prefix) {
  actors::deal_fields f;
  f.loc = prefix;
  reader r{o, prefix, f.issues};
  if (move) {
    r.extra({"stage_id", "position", "lost_reason"});
  } else {
    r.extra({"title", "amount", "currency", "contact_id", "company_id", "owner_id", "pipeline_id",
             "stage_id", "expected_close_date", "status", "lost_reason", "custom_fields"});
  }
  if (!move) {
    if (auto v = r.get("title")) {
      if (v->is_null())
        r.add("title", "Input should be a valid string", "string_type");
      else
        f.title = r.text("title", *v, 1, deal_rules::title_max);
    } else if (creating) {
      r.required("title");
    }
    if (auto v = r.get("amount")) {
      if (v->is_null()) {
        f.amount = std::optional<std::int64_t>();
      } else if (auto s = v->if_string()) {
        auto cents = domain::parse_amount(std::string_view(s->data(), s->size()));
        if (cents)
          f.amount = std::optional<std::int64_t>(*cents);
        else
          r.add("amount",
                "amount must be a decimal string of up to 13 digits and 2 decimals, such as "
                "\"1500.00\"",
                "value_error");
      } else {
        r.add("amount", "Input should be a valid string", "string_type");
      }
    }
    if (auto v = r.get("currency")) {
      auto s = v->if_string();
      if (!s) {
        r.add("currency", "Input should be a valid string", "string_type");
      } else if (!domain::is_currency(std::string_view(s->data(), s->size()))) {
        r.add("currency", "currency must be an ISO 4217 code in upper case, such as \"BRL\"",
              "value_error");
      } else {
        f.currency = std::string(s->data(), s->size());
      }
    }
    r.optional_id("contact_id", f.contact_id);
    r.optional_id("company_id", f.company_id);
    r.optional_id("owner_id", f.owner_id);
    if (auto v = r.get("pipeline_id"); v && !v->is_null())
      f.pipeline_id = r.integer("pipeline_id", *v, 1, INT64_MAX);
    if (auto v = r.get("expected_close_date")) {
      if (v->is_null()) {
        f.expected_close = std::optional<std::int32_t>();
      } else {
        auto s = v->if_string();
        auto d = s ? domain::parse_date(std::string_view(s->data(), s->size())) : std::nullopt;
        if (d)
          f.expected_close = std::optional<std::int32_t>(*d);
        else
          r.add("expected_close_date", "Input should be a valid date (YYYY-MM-DD)", "value_error");
      }
    }
    if (auto v = r.get("status"); v && !v->is_null()) f.status = r.kind("status", *v);
    if (auto v = r.get("custom_fields"); v && !v->is_null()) {
      if (!v->is_object()) {
        r.add("custom_fields", "Input should be a valid dictionary", "value_error");
      } else {
        auto text = json::serialize(*v);
        if (text.size() > deal_rules::custom_fields_max)
          r.add("custom_fields",
                "custom_fields must be at most " +
                    std::to_string(deal_rules::custom_fields_max / 1024) + " KiB",
                "value_error");
        else if ((text.find('\0') != std::string::npos))
          r.add("custom_fields", "Input should not contain the NUL character (U+0000)",
                "value_error");
        else
          f.custom_fields = std::move(text);
      }
    }
  }
  if (auto v = r.get("stage_id")) {
    if (v->is_null())
      r.add("stage_id", "Input should be a valid integer", "int_parsing");
    else
      f.stage_id = r.integer("stage_id", *v, 1, INT64_MAX);
  } else if (move) {
    r.required("stage_id");
  }
  if (move)
    if (auto v = r.get("position"); v && !v->is_null())
      f.position = r.integer("position", *v, 0, deal_rules::position_max);
  if (auto v = r.get("lost_reason")) {
    if (v->is_null())
      f.lost_reason = std::optional<std::string>();
    else if (auto t = r.text("lost_reason", *v, 0, deal_rules::lost_reason_max))
      f.lost_reason = std::optional<std::string>(*t);
  }
  return f;
}

actors::pipeline_input read_pipeline(const json::object& o, std::vector<issue>& issues) {
  actors::pipeline_input in;
  reader r{o, {std::string("body")}, issues};
  r.extra({"name", "is_default", "stages"});
  if (auto v = r.get("name"); v && !v->is_null()) {
    if (auto t = r.text("name", *v, 1, pipeline_rules::name_max)) in.name = *t;
  } else {
    r.required("name");
  }
  if (auto v = r.get("is_default"); v && !v->is_null())
    in.is_default = r.boolean("is_default", *v).value_or(false);
  if (auto v = r.get("stages"); v && !v->is_null()) {
    auto a = v->if_array();
    if (!a) {
      r.add("stages", "Input should be a valid list", "value_error");
    } else if (a->size() < pipeline_rules::stages_min || a->size() > pipeline_rules::stages_max) {
      r.add("stages", "a pipeline has 3 to 50 stages", "value_error");
    } else {
      auto before = issues.size();
      for (std::size_t i = 0; i < a->size(); ++i) {
        loc_path l{std::string("body"), std::string("stages"), static_cast<std::int64_t>(i)};
        auto so = (*a)[i].if_object();
        if (!so) {
          issues.push_back({l, "Input should be a valid dictionary", "value_error"});
          continue;
        }
        reader sr{*so, l, issues};
        sr.extra({"name", "probability", "kind"});
        domain::stage s;
        if (auto nv = sr.get("name"); nv && !nv->is_null()) {
          if (auto t = sr.text("name", *nv, 1, pipeline_rules::stage_name_max)) s.name = *t;
        } else {
          sr.required("name");
        }
        if (auto kv = sr.get("kind"); kv && !kv->is_null())
          s.kind = sr.kind("kind", *kv).value_or(domain::stage_kind::open);
        s.probability = s.kind == domain::stage_kind::won ? 100 : 0;
        if (auto pv = sr.get("probability"); pv && !pv->is_null())
          if (auto p = sr.integer("probability", *pv, 0, pipeline_rules::probability_max))
            s.probability = static_cast<int>(*p);
        in.stages.push_back(std::move(s));
      }
      if (issues.size() == before)
        if (auto why = domain::stage_rules_broken(in.stages); !why.empty())
          r.add("stages", why, "value_error");
    }
  }
  return in;
}

actors::pipeline_patch read_pipeline_patch(const json::object& o, std::vector<issue>& issues) {
  actors::pipeline_patch p;
  reader r{o, {std::string("body")}, issues};
  r.extra({"name", "is_default"});
  if (auto v = r.get("name")) {
    if (v->is_null())
      r.add("name", "Input should be a valid string", "string_type");
    else
      p.name = r.text("name", *v, 1, pipeline_rules::name_max);
  }
  if (auto v = r.get("is_default"); v && !v->is_null()) p.is_default = r.boolean("is_default", *v);
  return p;
}

actors::stage_patch read_stage(const json::object& o, bool creating, std::vector<issue>& issues) {
  actors::stage_patch p;
  reader r{o, {std::string("body")}, issues};
  r.extra({"name", "probability", "kind", "position"});
  if (auto v = r.get("name"); v && !v->is_null())
    p.name = r.text("name", *v, 1, pipeline_rules::stage_name_max);
  else if (creating || v)
    r.required("name");
  if (auto v = r.get("probability"); v && !v->is_null())
    if (auto n = r.integer("probability", *v, 0, pipeline_rules::probability_max))
      p.probability = static_cast<int>(*n);
  if (auto v = r.get("kind"); v && !v->is_null()) p.kind = r.kind("kind", *v);
  if (auto v = r.get("position"); v && !v->is_null())
    if (auto n = r.integer("position", *v, 0, pipeline_rules::position_max))
      p.position = static_cast<int>(*n);
  return p;
}

actors::deal_actor_ref who_of(const exchange_ptr& ex) {
  return {ex->who.acting_user(), std::nullopt, 0};
}

std::optional<deal_list_params> read_deal_query(const request& req, std::vector<issue>& issues) {
  deal_list_params p;
  auto page = query_int(req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  auto& q = p.query;
  auto bad = [&](const std::string& name, std::string msg, std::string type) {
    issues.push_back({{std::string("query"), name}, std::move(msg), std::move(type)});
  };
  auto id = [&](const std::string& name, const std::string&) {
    return query_id(req, name, issues);
  };
  for (auto& [k, v] : req.query) {
    if (k == "pipeline_id")
      q.pipeline_id = id(k, v);
    else if (k == "stage_id")
      q.stage_id = id(k, v);
    else if (k == "owner_id")
      q.owner_id = id(k, v);
    else if (k == "contact_id")
      q.contact_id = id(k, v);
    else if (k == "company_id")
      q.company_id = id(k, v);
    else if (k == "status") {
      q.status = domain::parse_stage_kind(v);
      if (!q.status) bad(k, domain::stage_kind_message(), "enum");
    } else if (k == "currency") {
      if (domain::is_currency(v))
        q.currency = v;
      else
        bad(k, "currency must be an ISO 4217 code in upper case", "value_error");
    } else if (k == "amount_min" || k == "amount_max") {
      auto cents = domain::parse_amount(v);
      if (!cents)
        bad(k, "amount must be a decimal string such as 1500.00", "value_error");
      else
        (k == "amount_min" ? q.amount_min : q.amount_max) = *cents;
    } else if (k == "expected_close_after" || k == "expected_close_before") {
      auto d = domain::parse_date(v);
      if (!d)
        bad(k, "Input should be a valid date (YYYY-MM-DD)", "value_error");
      else
        (k == "expected_close_after" ? q.close_after : q.close_before) = *d;
    } else if (k == "search") {
      q.search = domain::ascii_lower(v);
    } else if (k == "sort_by") {
      auto s = domain::parse_deal_sort(v);
      if (s)
        q.sort = *s;
      else
        bad(k, enum_message(deal_rules::sort_fields), "enum");
    } else if (k == "sort_order") {
      auto& orders = list_rules::sort_orders;
      if (std::find(orders.begin(), orders.end(), v) != orders.end())
        q.descending = v == "desc";
      else
        bad(k, enum_message(orders), "enum");
    } else if (auto prefix = list_rules::custom_prefix;
               k.size() > prefix.size() && k.rfind(prefix, 0) == 0) {
      q.custom.emplace_back(k.substr(prefix.size()), v);
    }
  }
  if (!issues.empty()) return std::nullopt;
  p.page = *page;
  p.per_page = *per_page;
  return p;
}

namespace deal_import_detail {

constexpr std::array<std::string_view, 16> columns{"id",
                                                   "title",
                                                   "amount",
                                                   "currency",
                                                   "status",
                                                   "pipeline_id",
                                                   "stage_id",
                                                   "contact_id",
                                                   "company_id",
                                                   "owner_id",
                                                   "expected_close_date",
                                                   "lost_reason",
                                                   "custom_fields",
                                                   "created_at",
                                                   "updated_at",
                                                   "closed_at"};
constexpr std::array<std::string_view, 4> ignored{"id", "created_at", "updated_at", "closed_at"};
constexpr std::array<std::string_view, 5> numbers{"pipeline_id", "stage_id", "contact_id",
                                                  "company_id", "owner_id"};

template <std::size_t N>
bool among(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

} // namespace deal_import_detail

bool importable_deal_column(std::string_view name) {
  return deal_import_detail::among(deal_import_detail::columns, name);
}

actors::deal_fields read_deal_row(const std::vector<std::string>& header,
                                  const std::vector<std::string>& cells, const loc_path& prefix) {
  using deal_import_detail::among;
  // The JSON object a client would have sent, then the JSON rules.
  json::object o;
  for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) {
    auto& name = header[i];
    auto cell = std::string(domain::unescape_csv_formula(domain::trim(cells[i])));
    if (cell.empty() || among(deal_import_detail::ignored, name)) continue;
    if (name == "custom_fields") {
      json::error_code ec;
      auto v = crm::domain::parse_json(cell, ec);
      o["custom_fields"] = ec ? json::value(cell) : v; // not an object: reported by read_deal
    } else if (among(deal_import_detail::numbers, name)) {
      std::int64_t n = 0;
      auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), n);
      if (ec == std::errc{} && end == cell.data() + cell.size())
        o[name] = n;
      else
        o[name] = cell; // reported as not an integer
    } else {
      o[name] = cell;
    }
  }
  return read_deal(o, true, false, prefix);
}

} // namespace crm::http
