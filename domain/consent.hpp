// A contact's consents (docs/compliance.md "Consent"): an append-only history of grants and
// withdrawals per purpose, for one channel or for any. What is allowed is decided by the most
// recent record that applies; with none, purposes a patient expects as part of care
// (treatment_communication, appointment_reminders, ai_processing) are allowed and the others
// (marketing, data_sharing) are not: those need an explicit grant.
#pragma once
#include <boost/json/fwd.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

enum class consent_purpose {
  treatment_communication,
  appointment_reminders,
  marketing,
  ai_processing,
  data_sharing
};
// The rules of a consent's fields, named once for the readers and the OpenAPI schemas
// (http/handlers/consents.cpp, conversations.cpp).
namespace consent_rules {
// The names of consent_purpose, in the order of its enumerators.
inline constexpr std::array<std::string_view, 5> purposes{"treatment_communication",
                                                          "appointment_reminders", "marketing",
                                                          "ai_processing", "data_sharing"};
// A consent's channel: a channel id, or this for every channel.
inline constexpr std::string_view any_channel = "any";
} // namespace consent_rules

std::optional<consent_purpose> parse_consent_purpose(std::string_view s);
std::string_view to_string(consent_purpose p);
// "Input should be 'treatment_communication', ... or 'data_sharing'".
std::string consent_purpose_choices();
// Allowed when no record says otherwise.
bool allowed_by_default(consent_purpose p);

struct consent {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::int64_t contact_id = 0;
  consent_purpose purpose = consent_purpose::treatment_communication;
  std::optional<std::int64_t> channel_id; // none: any channel
  bool granted = false;
  std::string source;                      // who or what said so: "staff", "inbound_message", ...
  std::optional<std::string> evidence;     // a reference: a form, a message id, a call note
  std::int64_t recorded_at = 0;            // µs
  std::optional<std::int64_t> recorded_by; // the user, when a person recorded it
};

boost::json::object consent_to_json(const consent& c);

// Null when `purpose` on `channel_id` is allowed by the history (oldest first); else why not,
// naming the consent ("marketing consent is not recorded for this contact").
std::optional<std::string> consent_refusal(const std::vector<consent>& history,
                                           consent_purpose purpose, std::int64_t channel_id);

// An inbound message asking to stop receiving messages: STOP, PARAR, ... alone, any case.
bool is_stop_request(std::string_view text);
// What a stop request withdraws on its channel: every purpose a message is sent for.
inline constexpr consent_purpose stop_withdraws[] = {consent_purpose::treatment_communication,
                                                     consent_purpose::appointment_reminders,
                                                     consent_purpose::marketing};

} // namespace crm::domain
