#include "domain/contact_json.hpp"

#include "domain/clock.hpp"
#include "domain/json_parse.hpp"
#include "domain/json_writer.hpp"

#include <boost/json.hpp>

namespace crm::domain {
namespace json = boost::json;
namespace {

json::value opt(const std::optional<std::string>& s) {
  return s ? json::value(*s) : json::value(nullptr);
}

json::value parse_object(const std::string& text) {
  json::error_code ec;
  auto v = crm::domain::parse_json(text, ec);
  if (ec || !v.is_object()) return json::object{};
  return v;
}

json::object company_object(const company& c) {
  json::object o;
  o["id"] = c.id;
  o["name"] = c.name;
  o["domain"] = opt(c.domain);
  o["phone"] = opt(c.phone);
  o["industry"] = opt(c.industry);
  o["address"] = opt(c.address);
  o["custom_fields"] = parse_object(c.custom_fields);
  o["created_at"] = format_rfc3339(c.created_at);
  o["updated_at"] = format_rfc3339(c.updated_at);
  return o;
}

json::object page_object(json::array items, std::int64_t total, int page, int per_page) {
  json::object o;
  o["items"] = std::move(items);
  o["total"] = total;
  o["page"] = page;
  o["per_page"] = per_page;
  o["pages"] = per_page > 0 ? (total + per_page - 1) / per_page : 0;
  return o;
}

// The hot shapes are written directly, without a DOM: one output string, no per-field nodes.
// Writes field `name` of `c` (key and value); false for a name that is no contact field.
bool write_contact_field(json_writer& w, const contact& c, std::string_view name) {
  if (name == "id")
    w.key("id").value(c.id);
  else if (name == "first_name")
    w.key("first_name").value(c.first_name);
  else if (name == "last_name")
    w.key("last_name").nullable(c.last_name);
  else if (name == "email")
    w.key("email").nullable(c.email);
  else if (name == "phone")
    w.key("phone").nullable(c.phone);
  else if (name == "company_id")
    w.key("company_id").nullable(c.company_id);
  else if (name == "owner_id")
    w.key("owner_id").nullable(c.owner_id);
  else if (name == "status")
    w.key("status").value(to_string(c.status));
  else if (name == "source") {
    w.key("source");
    if (c.source)
      w.value(to_string(*c.source));
    else
      w.null();
  } else if (name == "created_at")
    w.key("created_at").value(rfc3339(c.created_at).view());
  else if (name == "updated_at")
    w.key("updated_at").value(rfc3339(c.updated_at).view());
  else if (name == "tags") {
    w.key("tags").begin_array();
    for (auto& t : c.tags) w.value(t);
    w.end_array();
  } else if (name == "custom_fields") {
    w.key("custom_fields").raw(c.custom_fields.empty() ? std::string_view("{}") : c.custom_fields);
  } else {
    return false;
  }
  return true;
}

constexpr std::string_view list_item_fields[] = {"id",     "first_name", "last_name", "email",
                                                 "phone",  "company_id", "owner_id",  "status",
                                                 "source", "created_at", "updated_at"};

void write_list_item_fields(json_writer& w, const contact& c) {
  for (auto f : list_item_fields) write_contact_field(w, c, f);
}

} // namespace

std::string encode_contact_created(const contact& c) {
  std::string out;
  out.reserve(256);
  json_writer w(out);
  w.begin_object();
  w.key("id").value(c.id);
  w.key("first_name").value(c.first_name);
  w.key("last_name").nullable(c.last_name);
  w.key("email").nullable(c.email);
  w.key("phone").nullable(c.phone);
  w.key("status").value(to_string(c.status));
  w.key("created_at").value(rfc3339(c.created_at).view());
  w.end_object();
  return out;
}

std::string encode_contact_full(const contact& c, const company* co) {
  std::string out;
  out.reserve(384 + c.custom_fields.size());
  json_writer w(out);
  w.begin_object();
  write_list_item_fields(w, c);
  w.key("company");
  if (co) {
    w.begin_object();
    w.key("id").value(co->id);
    w.key("name").value(co->name);
    w.end_object();
  } else {
    w.null();
  }
  write_contact_field(w, c, "tags");
  write_contact_field(w, c, "custom_fields");
  w.end_object();
  return out;
}

std::string encode_contact_page(const std::vector<const contact*>& items, std::int64_t total,
                                int page, int per_page) {
  std::string out;
  out.reserve(96 + items.size() * 320);
  json_writer w(out);
  w.begin_object();
  w.key("items").begin_array();
  for (auto* c : items) {
    w.begin_object();
    write_list_item_fields(w, *c);
    w.end_object();
  }
  w.end_array();
  w.key("total").value(total);
  w.key("page").value(static_cast<std::int64_t>(page));
  w.key("per_page").value(static_cast<std::int64_t>(per_page));
  w.key("pages").value(per_page > 0 ? (total + per_page - 1) / per_page : 0);
  w.end_object();
  return out;
}

std::string encode_contact_update(const contact& c, const std::vector<std::string>& fields) {
  std::string out;
  json_writer w(out);
  w.begin_object();
  w.key("id").value(c.id);
  for (auto& f : fields)
    if (f != "id" && f != "updated_at") write_contact_field(w, c, f);
  w.key("updated_at").value(rfc3339(c.updated_at).view());
  w.end_object();
  return out;
}

std::string encode_company(const company& c) {
  return json::serialize(company_object(c));
}

std::string encode_company_page(const std::vector<company>& items, std::int64_t total, int page,
                                int per_page) {
  json::array a;
  for (auto& c : items) a.emplace_back(company_object(c));
  return json::serialize(page_object(std::move(a), total, page, per_page));
}

std::string encode_tags(const std::vector<tag_count>& tags) {
  json::array a;
  for (auto& t : tags) a.emplace_back(json::object{{"name", t.name}, {"count", t.count}});
  return json::serialize(a);
}

std::string encode_tag(const tag_count& t) {
  return json::serialize(json::object{{"name", t.name}, {"count", t.count}});
}

std::string encode_bulk_results(const std::vector<bulk_item>& results, std::int64_t first) {
  json::array a;
  for (std::size_t i = 0; i < results.size(); ++i) {
    json::object o;
    o["index"] = first + static_cast<std::int64_t>(i);
    if (results[i].errors.empty()) {
      o["id"] = results[i].id;
      if (results[i].updated) o["updated"] = *results[i].updated;
    } else {
      json::array errs;
      for (auto& e : results[i].errors) {
        json::array loc;
        for (auto& p : e.loc) {
          if (auto s = std::get_if<std::string>(&p))
            loc.emplace_back(*s);
          else
            loc.emplace_back(std::get<std::int64_t>(p));
        }
        errs.emplace_back(json::object{{"loc", std::move(loc)}, {"msg", e.msg}, {"type", e.type}});
      }
      o["errors"] = std::move(errs);
    }
    a.emplace_back(std::move(o));
  }
  return json::serialize(json::object{{"results", std::move(a)}});
}

} // namespace crm::domain
