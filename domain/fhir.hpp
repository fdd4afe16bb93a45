// FHIR R4 Patient (docs/compliance.md "FHIR R4"): a contact rendered as a Patient resource, a
// searchset Bundle of them, and the contact fields a posted Patient gives. The mapping:
//   id, identifier (system urn:carecrm:tenant:<tenant>:contact) ← the contact's id
//   name[0] {text, family, given} ← first_name, last_name
//   telecom ← phone (system phone), email (system email)
//   active ← status is not inactive
//   gender, birthDate ← custom fields "gender" (male, female, other, unknown) and "birth_date"
//                       (YYYY-MM-DD), when they hold such values
//   meta.lastUpdated ← updated_at
#pragma once
#include "domain/contact.hpp"
#include "domain/failure.hpp"
#include "domain/schedule.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crm::domain {

inline constexpr std::string_view fhir_json_type = "application/fhir+json";

std::string patient_identifier_system(std::int64_t tenant);
boost::json::object contact_to_patient(const contact& c);

// A searchset Bundle of `resources` (each with its resourceType and id): `self` is the search's
// URL; an entry's fullUrl is `base` + "/<resourceType>/<id>".
boost::json::object searchset(std::vector<boost::json::object> resources, std::int64_t total,
                              std::string_view base, std::string_view self, std::string_view next);
// A searchset Bundle of Patients.
boost::json::object patient_bundle(const std::vector<contact>& matches, std::int64_t total,
                                   std::string_view base, std::string_view self,
                                   std::string_view next);

// The contact fields of a posted Patient, as the JSON object POST /contacts takes; the issues
// of what cannot be mapped (loc under "body"), none when it maps.
boost::json::object patient_to_contact(const boost::json::object& patient,
                                       std::vector<issue>& issues);

// Search parameters of GET /fhir/Patient (FHIR string search: case-insensitive "starts with"
// any name part; phone compared by its digits; identifier [system|]value).
struct patient_search {
  std::optional<std::int64_t> id;   // from identifier (or _id)
  std::optional<std::string> name;  // lower case
  std::optional<std::string> phone; // digits
  std::optional<std::string> email; // lower case
  bool impossible = false;          // an identifier of another system: matches nothing
};
bool patient_matches(const patient_search& s, const contact& c);
// The search of a query (decoded name, value pairs): identifier, _id, name, phone, email;
// `_count`, `_offset` and `_format` are left to the caller. Anything else, an empty value or a
// phone without digits is an issue at ["query", name]: a parameter silently ignored would
// widen the search.
patient_search read_patient_search(const std::vector<std::pair<std::string, std::string>>& query,
                                   std::int64_t tenant, std::vector<issue>& issues);

// ---- FHIR R4 Appointment (docs/appointments.md "FHIR") ----------------------------------------
//   id, identifier (system urn:carecrm:tenant:<tenant>:appointment) ← the appointment's id
//   status ← booked and confirmed: booked; arrived; completed: fulfilled; cancelled; no_show:
//            noshow (the patient participant's status: accepted once confirmed, else
//            needs-action)
//   serviceType[0].text ← the service's name; start, end, minutesDuration; comment ← notes;
//   cancelationReason.text; created; participant: Patient/<contact_id> and the calendar's name
std::string appointment_identifier_system(std::int64_t tenant);
boost::json::object appointment_to_fhir(const appointment_view& v);
boost::json::object appointment_bundle(const std::vector<appointment_view>& matches,
                                       std::int64_t total, std::string_view base,
                                       std::string_view self, std::string_view next);

// GET /fhir/Appointment?patient=&date=: `patient` is an id or Patient/<id>; `date` (repeatable)
// is [eq|ge|gt|le|lt] and a date (that whole UTC day) or an instant, against the start.
// Anything else is an issue at ["query", name], as for Patient.
appointment_query
read_appointment_search(const std::vector<std::pair<std::string, std::string>>& query,
                        std::vector<issue>& issues);

} // namespace crm::domain
