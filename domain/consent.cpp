// Consent purposes, their rendering and the decision a history makes.
#include "domain/consent.hpp"

#include "domain/clock.hpp"
#include "domain/json_check.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <array>
#include <utility>

namespace json = boost::json;

namespace crm::domain {
namespace {

constexpr auto purpose_names = detail::table_of<consent_purpose>(consent_rules::purposes);
static_assert(purpose_names.back().first == consent_purpose::data_sharing);

} // namespace

std::optional<consent_purpose> parse_consent_purpose(std::string_view s) {
  return detail::lookup(purpose_names, s);
}

std::string_view to_string(consent_purpose p) {
  return detail::name_of(purpose_names, p);
}

std::string consent_purpose_choices() {
  return detail::one_of_message(purpose_names);
}

bool allowed_by_default(consent_purpose p) {
  return p != consent_purpose::marketing && p != consent_purpose::data_sharing;
}

json::object consent_to_json(const consent& c) {
  json::object o;
  o["id"] = c.id;
  o["contact_id"] = c.contact_id;
  o["purpose"] = to_string(c.purpose);
  if (c.channel_id)
    o["channel"] = *c.channel_id;
  else
    o["channel"] = consent_rules::any_channel;
  o["granted"] = c.granted;
  o["source"] = c.source;
  o["evidence"] = c.evidence ? json::value(*c.evidence) : json::value(nullptr);
  o["recorded_at"] = format_rfc3339(c.recorded_at);
  o["recorded_by"] = c.recorded_by ? json::value(*c.recorded_by) : json::value(nullptr);
  return o;
}

std::optional<std::string> consent_refusal(const std::vector<consent>& history,
                                           consent_purpose purpose, std::int64_t channel_id) {
  const consent* last = nullptr;
  for (auto& c : history)
    if (c.purpose == purpose && (!c.channel_id || *c.channel_id == channel_id)) last = &c;
  auto name = std::string(to_string(purpose));
  if (last) {
    if (last->granted) return std::nullopt;
    return "the contact withdrew " + name + " consent (consent " + std::to_string(last->id) + ")";
  }
  if (allowed_by_default(purpose)) return std::nullopt;
  return name + " consent is not recorded for this contact";
}

bool is_stop_request(std::string_view text) {
  auto word = ascii_lower(trim(text));
  while (!word.empty() && (word.back() == '.' || word.back() == '!')) word.pop_back();
  for (std::string_view stop : {"stop", "parar", "pare", "stopall", "unsubscribe", "cancelar",
                                "cancel", "baja", "sair", "end", "quit"})
    if (word == stop) return true;
  return false;
}

} // namespace crm::domain
