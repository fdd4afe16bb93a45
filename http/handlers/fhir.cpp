// FHIR R4 Patient (contract §9 "Health data", docs/compliance.md "FHIR R4"): the tenant's
// contacts read, searched and created as Patient resources; and Appointment (contract §10,
// docs/appointments.md "FHIR"): the tenant's appointments read and searched;
// `application/fhir+json`. Errors keep the contract's bodies.
#include "http/api.hpp"

#include "actors/contacts.hpp"
#include "actors/schedule.hpp"
#include "config/settings.hpp"
#include "domain/fhir.hpp"
#include "domain/json_parse.hpp"
#include "http/contact_input.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <memory>

namespace json = boost::json;

namespace crm::http {
namespace {

using domain::failure;
using domain::issue;

constexpr int default_count = 50;
constexpr int max_count = 200;
constexpr int max_offset = 1'000'000'000;

void respond_fhir(const exchange_ptr& ex, int status, const json::object& resource,
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
  response r;
  r.status = status;
  r.content_type = std::string(domain::fhir_json_type);
  r.body = json::serialize(resource);
  r.headers = std::move(headers);
  ex->respond(std::move(r));
}

// The service's base for fullUrl: the public URL when configured, else this request's Host.
std::string fhir_base(services& s, const exchange_ptr& ex) {
  std::string base = s.cfg.public_url;
  if (base.empty()) base = "http://" + std::string(ex->req.header("host").value_or("localhost"));
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/api/v1/fhir";
}

// The contact `id` as a Patient, or the contacts actor's 404 / 403.
void read(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  auto& rt = s.rt;
  auto tenant = ex->who.tenant_id;
  actors::fetch_contacts(
      rt, tenant, {*id},
      actors::callback<std::vector<domain::contact>>(
          [&rt, tenant, ex, id = *id](domain::outcome<std::vector<domain::contact>> r) {
            if (!r) return ex->fail(r.error());
            if (!r->empty()) return respond_fhir(ex, 200, domain::contact_to_patient(r->front()));
            // Not the tenant's: the same answer as GET /contacts/{id} (404, or 403).
            actors::get_contact(rt, tenant, id,
                                actors::callback<std::string>([ex](domain::outcome<std::string> g) {
                                  if (!g) return ex->fail(g.error());
                                  ex->fail(failure::of(domain::errc::not_found, "not found"));
                                }));
          }));
}

// The URL of the search's page from `from`: the query as the client sent it (still encoded),
// with _count and _offset set.
std::string page_url(std::string_view root, std::string_view target, int count, std::int64_t from) {
  auto q = target.find('?');
  std::string url = std::string(root) + std::string(target.substr(0, q)) + "?";
  if (q != std::string_view::npos) {
    auto rest = target.substr(q + 1);
    while (!rest.empty()) {
      auto amp = rest.find('&');
      auto piece = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      auto name = piece.substr(0, piece.find('='));
      if (piece.empty() || name == "_count" || name == "_offset") continue;
      url.append(piece).push_back('&');
    }
  }
  return url + "_count=" + std::to_string(count) + "&_offset=" + std::to_string(from);
}

void search(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto count = query_int(ex->req, "_count", default_count, 1, max_count, issues);
  auto offset = query_int(ex->req, "_offset", 0, 0, max_offset, issues);
  auto q = domain::read_patient_search(ex->req.query, ex->who.tenant_id, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  domain::contact_query cq;
  cq.extra = [q](const domain::contact& c) { return domain::patient_matches(q, c); };
  auto& rt = s.rt;
  auto tenant = ex->who.tenant_id;
  auto base = fhir_base(s, ex);
  auto root = base.substr(0, base.size() - std::string_view("/api/v1/fhir").size());
  actors::match_contacts(
      rt, tenant, std::move(cq),
      actors::callback<std::vector<std::int64_t>>(
          [&rt, tenant, ex, base, root, count = *count,
           offset = *offset](domain::outcome<std::vector<std::int64_t>> ids) {
            if (!ids) return ex->fail(ids.error());
            auto total = static_cast<std::int64_t>(ids->size());
            auto from = std::min<std::int64_t>(offset, total);
            auto to = std::min<std::int64_t>(from + count, total);
            std::vector<std::int64_t> slice(ids->begin() + from, ids->begin() + to);
            auto self = page_url(root, ex->req.target, count, from);
            auto next = to < total ? page_url(root, ex->req.target, count, to) : std::string();
            actors::fetch_contacts(
                rt, tenant, std::move(slice),
                actors::callback<std::vector<domain::contact>>(
                    [ex, base, total, self, next](domain::outcome<std::vector<domain::contact>> r) {
                      if (!r) return ex->fail(r.error());
                      respond_fhir(ex, 200, domain::patient_bundle(*r, total, base, self, next));
                    }));
          }));
}

// A Patient becomes a contact with the same rules as POST /contacts; 201 with the Patient.
void create(services& s, const exchange_ptr& ex) {
  auto body = object_body(ex);
  if (!body) return;
  std::vector<issue> issues;
  auto fields = domain::patient_to_contact(*body, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  auto f = read_contact(fields, true, {std::string("body")}, issues);
  f.issues = std::move(issues);
  auto& rt = s.rt;
  auto tenant = ex->who.tenant_id;
  actors::create_contact(
      rt, tenant, std::move(f), idempotency_of(ex),
      actors::callback<actors::stored_response>(
          [&rt, tenant, ex](domain::outcome<actors::stored_response> r) {
            if (!r) return ex->fail(r.error());
            std::int64_t id = r->id.value_or(0);
            if (!r->id) { // a replay: the id is in the stored body
              json::error_code ec;
              auto v = crm::domain::parse_json(r->body, ec);
              if (!ec && v.is_object())
                if (auto* x = v.as_object().if_contains("id"); x && x->is_int64())
                  id = x->get_int64();
            }
            if (r->status != 201 || id == 0)
              return reply_stored(ex, std::move(r), "/api/v1/contacts/");
            actors::fetch_contacts(
                rt, tenant, {id},
                actors::callback<std::vector<domain::contact>>(
                    [ex, id](domain::outcome<std::vector<domain::contact>> c) {
                      if (!c) return ex->fail(c.error());
                      if (c->empty())
                        return ex->fail(failure::of(domain::errc::not_found, "not found"));
                      respond_fhir(ex, 201, domain::contact_to_patient(c->front()),
                                   {{"Location", "/api/v1/fhir/Patient/" + std::to_string(id)}});
                    }));
          }));
}

// ---- Appointment ---------------------------------------------------------------------------

// Audited as a read of the patient's record: the patient is named in the resource, not the
// path (http/audit.hpp).
void read_appointment(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::view_appointment(
      s.rt, ex->who.tenant_id, *id,
      actors::callback<domain::appointment_view>([ex](domain::outcome<domain::appointment_view> r) {
        if (!r) return ex->fail(r.error());
        ex->audit_records = {r->a.contact_id};
        respond_fhir(ex, 200, domain::appointment_to_fhir(*r));
      }));
}

void search_appointments(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto count = query_int(ex->req, "_count", default_count, 1, max_count, issues);
  auto offset = query_int(ex->req, "_offset", 0, 0, max_offset, issues);
  auto q = domain::read_appointment_search(ex->req.query, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  auto base = fhir_base(s, ex);
  auto root = base.substr(0, base.size() - std::string_view("/api/v1/fhir").size());
  actors::view_appointments(
      s.rt, ex->who.tenant_id, std::move(q),
      actors::callback<std::vector<domain::appointment_view>>(
          [ex, base, root, count = *count,
           offset = *offset](domain::outcome<std::vector<domain::appointment_view>> all) {
            if (!all) return ex->fail(all.error());
            auto total = static_cast<std::int64_t>(all->size());
            auto from = std::min<std::int64_t>(offset, total);
            auto to = std::min<std::int64_t>(from + count, total);
            std::vector<domain::appointment_view> slice(all->begin() + from, all->begin() + to);
            for (auto& v : slice) ex->audit_records.push_back(v.a.contact_id);
            auto self = page_url(root, ex->req.target, count, from);
            auto next = to < total ? page_url(root, ex->req.target, count, to) : std::string();
            respond_fhir(ex, 200, domain::appointment_bundle(slice, total, base, self, next));
          }));
}

// FHIR resources are described by HL7's own schema (http://hl7.org/fhir/json-schema/4.0, which
// the integration tests validate every resource against): the document names it rather than
// retyping it.
void define_fhir_schemas(router& r) {
  using namespace schema;
  auto resource = [](std::string_view type, std::string_view page) {
    auto o = object({{"resourceType", constant(type)}}, false);
    o["description"] = "A FHIR R4 " + std::string(type) +
                       " resource; its schema: http://hl7.org/fhir/json-schema/4.0 (" +
                       std::string(type) + ")";
    o["externalDocs"] = object_t{{"url", page}};
    return o;
  };
  // The members carecrm reads and writes (domain/fhir.hpp), each as HL7 defines it.
  auto patient = resource("Patient", "https://hl7.org/fhir/R4/patient.html");
  auto& members = patient["properties"].as_object();
  for (auto name : {"identifier", "name", "telecom", "extension"})
    members[name] = array_of(any_object());
  members["id"] = text({});
  members["active"] = boolean();
  members["meta"] = any_object();
  members["text"] = any_object();
  members["gender"] = text({});
  members["birthDate"] = date();
  define(r, "FhirPatient", patient);
  define(r, "FhirBundle", resource("Bundle", "https://hl7.org/fhir/R4/bundle.html"));
  auto appointment = resource("Appointment", "https://hl7.org/fhir/R4/appointment.html");
  auto& fields = appointment["properties"].as_object();
  for (auto name : {"identifier", "serviceType", "participant"})
    fields[name] = array_of(any_object());
  for (auto name : {"id", "status", "start", "end", "created", "comment"}) fields[name] = text({});
  fields["meta"] = any_object();
  fields["cancelationReason"] = any_object();
  fields["minutesDuration"] = integer();
  define(r, "FhirAppointment", appointment);
}

} // namespace

void add_fhir_routes(router& r, services& s) {
  using domain::permission;
  using schema::query;
  define_fhir_schemas(r);
  auto fhir = std::string(domain::fhir_json_type);
  auto value = schema::text({.min = 1});
  r.add({verb::get, "/api/v1/fhir/Patient/{id}", access::bearer, permission::read_records,
         bind(s, read), "A contact as a FHIR R4 Patient (application/fhir+json)", "fhir"},
        route_doc("", "FhirPatient").with_media("", fhir));
  r.add({verb::get, "/api/v1/fhir/Patient", access::bearer, permission::read_records,
         bind(s, search),
         "Search contacts as FHIR R4 Patients: identifier, _id, name, phone, email, _count, "
         "_offset (a searchset Bundle)",
         "fhir"},
        route_doc("", "FhirBundle")
            .with_media("", fhir)
            .with_query({query("identifier", value, "[system|]id: the contact's identifier"),
                         query("_id", value, "the contact's id"),
                         query("name", value, "part of the first or last name (any case)"),
                         query("phone", value, "the phone's digits"),
                         query("email", value, "the e-mail (any case)"),
                         query("_count", schema::integer(1, max_count), "entries a page"),
                         query("_offset", schema::integer(0, max_offset), "entries skipped"),
                         query("_format", value, "ignored: the answer is always JSON")}));
  r.add({verb::get, "/api/v1/fhir/Appointment/{id}", access::bearer, permission::read_records,
         bind(s, read_appointment), "An appointment as a FHIR R4 Appointment", "fhir"},
        route_doc("", "FhirAppointment").with_media("", fhir));
  r.add({verb::get, "/api/v1/fhir/Appointment", access::bearer, permission::read_records,
         bind(s, search_appointments),
         "Search appointments as FHIR R4 Appointments: patient, date (repeatable, with eq, ge, "
         "gt, le, lt), _count, _offset (a searchset Bundle, by start)",
         "fhir"},
        route_doc("", "FhirBundle")
            .with_media("", fhir)
            .with_query({query("patient", value, "a Patient id, or Patient/<id>"),
                         query("date", value,
                               "[eq|ge|gt|le|lt]YYYY-MM-DD or an instant, against the start"),
                         query("_count", schema::integer(1, max_count), "entries a page"),
                         query("_offset", schema::integer(0, max_offset), "entries skipped"),
                         query("_format", value, "ignored: the answer is always JSON")}));
  r.add({verb::post, "/api/v1/fhir/Patient", access::bearer, permission::write_records,
         bind(s, create), "Create a contact from a FHIR R4 Patient", "fhir", 201},
        route_doc("FhirPatient", "FhirPatient")
            .with_headers({schema::idempotency_key()})
            .with_media(fhir, fhir)
            .with_example(
                R"({"resourceType": "Patient", "name": [{"family": "Silva", "given": ["Ana"]}],
 "telecom": [{"system": "email", "value": "ana.silva@example.com"}]})"));
}

} // namespace crm::http
