// FHIR R4 Appointment (domain/fhir.hpp): an appointment as HL7 describes it, a searchset of them,
// and the search parameters carecrm answers.
#include "domain/clock.hpp"
#include "domain/fhir.hpp"

#include <boost/json.hpp>

#include <charconv>

namespace crm::domain {
namespace {

namespace json = boost::json;

constexpr std::int64_t day_us = 86'400'000'000;

std::string_view fhir_status(appointment_status s) {
  switch (s) {
  case appointment_status::booked:
  case appointment_status::confirmed: return "booked";
  case appointment_status::arrived: return "arrived";
  case appointment_status::completed: return "fulfilled";
  case appointment_status::cancelled: return "cancelled";
  case appointment_status::no_show: return "noshow";
  }
  return "booked";
}

std::optional<std::int64_t> positive(std::string_view s) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 1) return std::nullopt;
  return n;
}

} // namespace

std::string appointment_identifier_system(std::int64_t tenant) {
  return "urn:carecrm:tenant:" + std::to_string(tenant) + ":appointment";
}

json::object appointment_to_fhir(const appointment_view& v) {
  const auto& a = v.a;
  json::object r;
  r["resourceType"] = "Appointment";
  r["id"] = std::to_string(a.id);
  r["meta"] = json::object{{"lastUpdated", format_rfc3339(a.updated_at)}};
  r["identifier"] = json::array{json::object{{"system", appointment_identifier_system(a.tenant_id)},
                                             {"value", std::to_string(a.id)}}};
  r["status"] = fhir_status(a.status);
  if (a.cancel_reason && !a.cancel_reason->empty())
    r["cancelationReason"] = json::object{{"text", *a.cancel_reason}};
  if (!v.service_name.empty())
    r["serviceType"] = json::array{json::object{{"text", v.service_name}}};
  r["start"] = format_rfc3339(a.start);
  r["end"] = format_rfc3339(a.end);
  r["minutesDuration"] = (a.end - a.start) / 60'000'000;
  r["created"] = format_rfc3339(a.created_at);
  if (!a.notes.empty()) r["comment"] = a.notes;
  bool accepted = a.status != appointment_status::booked;
  json::array participants{json::object{
      {"actor", json::object{{"reference", "Patient/" + std::to_string(a.contact_id)}}},
      {"required", "required"},
      {"status", accepted ? "accepted" : "needs-action"}}};
  if (!v.calendar_name.empty())
    participants.push_back(json::object{{"actor", json::object{{"display", v.calendar_name}}},
                                        {"required", "required"},
                                        {"status", "accepted"}});
  r["participant"] = std::move(participants);
  return r;
}

json::object appointment_bundle(const std::vector<appointment_view>& matches, std::int64_t total,
                                std::string_view base, std::string_view self,
                                std::string_view next) {
  std::vector<json::object> resources;
  for (auto& v : matches) resources.push_back(appointment_to_fhir(v));
  return searchset(std::move(resources), total, base, self, next);
}

appointment_query
read_appointment_search(const std::vector<std::pair<std::string, std::string>>& query,
                        std::vector<issue>& issues) {
  appointment_query q;
  auto bad = [&](const std::string& name, std::string msg) {
    issues.push_back({{std::string("query"), name}, std::move(msg), "value_error"});
  };
  for (auto& [name, value] : query) {
    if (name == "_count" || name == "_offset" || name == "_format") continue;
    if (value.empty()) {
      bad(name, "a search parameter needs a value");
    } else if (name == "patient") {
      std::string_view v = value;
      if (v.starts_with("Patient/")) v.remove_prefix(8);
      if (auto id = positive(v))
        q.contact_id = id;
      else
        bad(name, "patient is a Patient id or Patient/<id>");
    } else if (name == "date") {
      std::string_view v = value;
      std::string_view prefix = "eq";
      for (std::string_view p : {"eq", "ge", "gt", "le", "lt"})
        if (v.starts_with(p)) {
          prefix = p;
          v.remove_prefix(2);
          break;
        }
      auto low = parse_rfc3339(v);
      if (!low) {
        bad(name, "date is [eq|ge|gt|le|lt] and a date (YYYY-MM-DD) or an RFC 3339 instant");
        continue;
      }
      auto high = *low + (v.size() == 10 ? day_us : 1);
      auto raise = [&](std::int64_t from) { q.from = q.from ? std::max(*q.from, from) : from; };
      auto lower = [&](std::int64_t to) { q.to = q.to ? std::min(*q.to, to) : to; };
      if (prefix == "eq") {
        raise(*low);
        lower(high);
      } else if (prefix == "ge") {
        raise(*low);
      } else if (prefix == "gt") {
        raise(high);
      } else if (prefix == "le") {
        lower(high);
      } else {
        lower(*low);
      }
    } else {
      bad(name, "unknown search parameter (patient, date, _count, _offset)");
    }
  }
  return q;
}

} // namespace crm::domain
