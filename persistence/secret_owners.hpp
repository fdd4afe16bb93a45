// The tenant and the secret of an id a caller names with a secret (an inbound webhook of a
// workflow or a channel, an API key), for the HTTP layer to check the caller's secret before it
// wakes the tenant (http/secret_gate.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace crm::persistence {

class pg_conn;

struct secret_owner {
  std::int64_t tenant_id = 0;
  // A workflow's secret opened (its HMAC needs it); a channel's as stored, a keyed hash
  // (secret_keys::verify compares a presented one with it). Nothing: the id has no secret.
  std::optional<std::string> secret;
  // An API key's (persistence/api_key_repo.hpp): its role, and when it expires (seconds since
  // the epoch; 0: never).
  std::string role;
  std::int64_t expires_at = 0;
};

// Nothing when Postgres knows no such id.
std::optional<secret_owner> webhook_owner_of_workflow(pg_conn& c, std::int64_t id);
std::optional<secret_owner> webhook_owner_of_channel(pg_conn& c, std::int64_t id);
// A WhatsApp channel and its app secret opened (the webhook's signature is its HMAC). Nothing
// for an id of no WhatsApp channel.
std::optional<secret_owner> signing_owner_of_whatsapp(pg_conn& c, std::int64_t id);
// An SMS channel and its Twilio auth token opened (the webhook's signature is its HMAC).
std::optional<secret_owner> signing_owner_of_sms(pg_conn& c, std::int64_t id);
// An e-mail channel and its Mailgun webhook signing key opened.
std::optional<secret_owner> signing_owner_of_email(pg_conn& c, std::int64_t id);
// A calendar and the keyed hash of its feed token (docs/appointments.md "Calendar feed").
std::optional<secret_owner> feed_owner_of_calendar(pg_conn& c, std::int64_t id);

} // namespace crm::persistence
