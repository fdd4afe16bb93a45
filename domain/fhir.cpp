// Contacts as FHIR R4 Patient resources, and back.
#include "domain/fhir.hpp"

#include "domain/clock.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>

namespace json = boost::json;

namespace crm::domain {
namespace {

std::string digits_of(std::string_view s) {
  std::string out;
  for (char ch : s)
    if (ch >= '0' && ch <= '9') out.push_back(ch);
  return out;
}

bool is_date(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (s[i] < '0' || s[i] > '9') return false;
  int month = (s[5] - '0') * 10 + (s[6] - '0');
  int day = (s[8] - '0') * 10 + (s[9] - '0');
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

const json::string* string_at(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v ? v->if_string() : nullptr;
}

std::string_view sv(const json::string& s) {
  return {s.data(), s.size()};
}

bool starts_with_lower(std::string_view text, std::string_view prefix) {
  auto lower = ascii_lower(text);
  if (lower.rfind(prefix, 0) == 0) return true;
  // Any word of the name (a second given name, a compound family name).
  for (std::size_t i = lower.find(' '); i != std::string::npos; i = lower.find(' ', i + 1))
    if (lower.compare(i + 1, prefix.size(), prefix) == 0) return true;
  return false;
}

} // namespace

std::string patient_identifier_system(std::int64_t tenant) {
  return "urn:carecrm:tenant:" + std::to_string(tenant) + ":contact";
}

json::object contact_to_patient(const contact& c) {
  json::object p;
  p["resourceType"] = "Patient";
  p["id"] = std::to_string(c.id);
  p["meta"] = json::object{{"lastUpdated", format_rfc3339(c.updated_at)}};
  p["identifier"] = json::array{json::object{{"use", "usual"},
                                             {"system", patient_identifier_system(c.tenant_id)},
                                             {"value", std::to_string(c.id)}}};
  p["active"] = c.status != contact_status::inactive;
  json::object name{{"use", "official"}};
  std::string text = c.first_name;
  if (c.last_name && !c.last_name->empty()) text += " " + *c.last_name;
  name["text"] = text;
  if (c.last_name && !c.last_name->empty()) name["family"] = *c.last_name;
  if (!c.first_name.empty()) name["given"] = json::array{json::value(c.first_name)};
  p["name"] = json::array{std::move(name)};
  json::array telecom;
  if (c.phone && !c.phone->empty())
    telecom.push_back(json::object{{"system", "phone"}, {"value", *c.phone}});
  if (c.email && !c.email->empty())
    telecom.push_back(json::object{{"system", "email"}, {"value", *c.email}});
  if (!telecom.empty()) p["telecom"] = std::move(telecom);
  json::error_code ec;
  auto fields = crm::domain::parse_json(c.custom_fields, ec);
  if (!ec && fields.is_object()) {
    auto& f = fields.as_object();
    if (auto* g = string_at(f, "gender")) {
      auto gender = ascii_lower(sv(*g));
      if (gender == "male" || gender == "female" || gender == "other" || gender == "unknown")
        p["gender"] = gender;
    }
    if (auto* b = string_at(f, "birth_date"); b && is_date(sv(*b))) p["birthDate"] = *b;
  }
  return p;
}

json::object searchset(std::vector<json::object> resources, std::int64_t total,
                       std::string_view base, std::string_view self, std::string_view next) {
  json::object b;
  b["resourceType"] = "Bundle";
  b["type"] = "searchset";
  b["total"] = total;
  json::array links{json::object{{"relation", "self"}, {"url", self}}};
  if (!next.empty()) links.push_back(json::object{{"relation", "next"}, {"url", next}});
  b["link"] = std::move(links);
  json::array entries;
  for (auto& r : resources) {
    auto url = std::string(base) + "/" + std::string(r["resourceType"].as_string()) + "/" +
               std::string(r["id"].as_string());
    entries.push_back(json::object{{"fullUrl", std::move(url)},
                                   {"resource", std::move(r)},
                                   {"search", json::object{{"mode", "match"}}}});
  }
  b["entry"] = std::move(entries);
  return b;
}

json::object patient_bundle(const std::vector<contact>& matches, std::int64_t total,
                            std::string_view base, std::string_view self, std::string_view next) {
  std::vector<json::object> resources;
  for (auto& c : matches) resources.push_back(contact_to_patient(c));
  return searchset(std::move(resources), total, base, self, next);
}

json::object patient_to_contact(const json::object& patient, std::vector<issue>& issues) {
  auto at = [](std::vector<loc_part> rest) {
    std::vector<loc_part> l{std::string("body")};
    l.insert(l.end(), rest.begin(), rest.end());
    return l;
  };
  json::object out;
  auto* type = string_at(patient, "resourceType");
  if (!type || *type != "Patient") {
    issues.push_back(
        {at({std::string("resourceType")}), "resourceType must be 'Patient'", "value_error"});
    return out;
  }
  // The first official (else the first) name: given[0] is the first name, family the last.
  const json::object* name = nullptr;
  if (auto* names = patient.if_contains("name"); names && names->is_array()) {
    for (auto& n : names->get_array())
      if (auto* o = n.if_object()) {
        auto* use = string_at(*o, "use");
        if (!name || (use && *use == "official")) name = o;
        if (use && *use == "official") break;
      }
  }
  const json::string* given = nullptr;
  if (name)
    if (auto* g = name->if_contains("given"); g && g->is_array() && !g->get_array().empty())
      given = g->get_array()[0].if_string();
  if (!given) {
    issues.push_back({at({std::string("name"), std::int64_t{0}, std::string("given")}),
                      "a given name is required (it becomes the contact's first_name)", "missing"});
    return out;
  }
  out["first_name"] = *given;
  if (auto* family = string_at(*name, "family")) out["last_name"] = *family;
  if (auto* telecom = patient.if_contains("telecom"); telecom && telecom->is_array()) {
    for (auto& t : telecom->get_array()) {
      auto* o = t.if_object();
      if (!o) continue;
      auto* system = string_at(*o, "system");
      auto* value = string_at(*o, "value");
      if (!system || !value) continue;
      if (*system == "phone" && !out.contains("phone")) out["phone"] = *value;
      if (*system == "email" && !out.contains("email")) out["email"] = *value;
    }
  }
  if (auto* active = patient.if_contains("active"); active && active->is_bool())
    out["status"] = active->get_bool() ? "active" : "inactive";
  json::object fields;
  if (auto* g = string_at(patient, "gender")) fields["gender"] = *g;
  if (auto* b = string_at(patient, "birthDate")) fields["birth_date"] = *b;
  if (!fields.empty()) out["custom_fields"] = std::move(fields);
  return out;
}

patient_search read_patient_search(const std::vector<std::pair<std::string, std::string>>& query,
                                   std::int64_t tenant, std::vector<issue>& issues) {
  patient_search q;
  for (auto& [name, value] : query) {
    auto bad = [&, n = name](std::string msg) {
      issues.push_back({{std::string("query"), n}, std::move(msg), "value_error"});
    };
    if (name == "_count" || name == "_offset" || name == "_format") continue;
    if (value.empty()) {
      bad("a search parameter needs a value");
    } else if (name == "identifier" || name == "_id") {
      // [system|]value; a system other than this tenant's matches nothing.
      std::string_view v = value;
      if (auto bar = v.find('|'); name == "identifier" && bar != std::string_view::npos) {
        auto system = v.substr(0, bar);
        v = v.substr(bar + 1);
        if (!system.empty() && system != patient_identifier_system(tenant)) q.impossible = true;
      }
      std::int64_t n = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || n < 1)
        q.impossible = true;
      else
        q.id = n;
    } else if (name == "name") {
      q.name = ascii_lower(trim(value));
    } else if (name == "phone") {
      if (auto digits = digits_of(value); digits.empty())
        bad("phone must contain digits");
      else
        q.phone = std::move(digits);
    } else if (name == "email") {
      q.email = ascii_lower(trim(value));
    } else {
      bad("unknown search parameter: identifier, _id, name, phone, email, _count, _offset");
    }
  }
  return q;
}

bool patient_matches(const patient_search& s, const contact& c) {
  if (s.impossible) return false;
  if (s.id && c.id != *s.id) return false;
  if (s.name) {
    auto full = c.first_name + (c.last_name ? " " + *c.last_name : std::string());
    if (!starts_with_lower(full, *s.name)) return false;
  }
  if (s.phone && (!c.phone || digits_of(*c.phone) != *s.phone)) return false;
  if (s.email && (!c.email || ascii_lower(*c.email) != *s.email)) return false;
  return true;
}

} // namespace crm::domain
