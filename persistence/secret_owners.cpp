#include "persistence/secret_owners.hpp"

#include "domain/secret_keys.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/sealed_columns.hpp"

#include <pqxx/pqxx>

namespace crm::persistence {

namespace {

std::optional<secret_owner> owner_of(pg_conn& c, const char* table, std::int64_t id,
                                     const char* column = "webhook_secret") {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params(
      std::string("SELECT tenant_id, ") + column + " FROM " + table + " WHERE id = $1", id);
  if (r.empty()) return std::nullopt;
  secret_owner o;
  o.tenant_id = r.front()[0].as<std::int64_t>();
  if (!r.front()[1].is_null()) o.secret = r.front()[1].as<std::string>();
  return o;
}

} // namespace

std::optional<secret_owner> webhook_owner_of_workflow(pg_conn& c, std::int64_t id) {
  auto o = owner_of(c, "workflows", id);
  if (o && o->secret)
    o->secret = c.keys().open(sealed::workflow_webhook_secret, o->tenant_id, *o->secret);
  return o;
}

std::optional<secret_owner> webhook_owner_of_channel(pg_conn& c, std::int64_t id) {
  return owner_of(c, "channels", id);
}

namespace {

// A channel of `type` and the secret `key` of its config, opened.
std::optional<secret_owner> signing_owner(pg_conn& c, std::int64_t id, const char* type,
                                          const char* key) {
  pqxx::read_transaction tx(c.raw());
  auto r = tx.exec_params("SELECT tenant_id, config->>$3 FROM channels WHERE id = $1 AND type = $2",
                          id, type, key);
  if (r.empty()) return std::nullopt;
  secret_owner o;
  o.tenant_id = r.front()[0].as<std::int64_t>();
  if (!r.front()[1].is_null())
    o.secret =
        c.keys().open(sealed::channel_config(key), o.tenant_id, r.front()[1].as<std::string>());
  return o;
}

} // namespace

std::optional<secret_owner> signing_owner_of_whatsapp(pg_conn& c, std::int64_t id) {
  return signing_owner(c, id, "whatsapp", "app_secret");
}

std::optional<secret_owner> signing_owner_of_sms(pg_conn& c, std::int64_t id) {
  return signing_owner(c, id, "sms", "auth_token");
}

std::optional<secret_owner> signing_owner_of_email(pg_conn& c, std::int64_t id) {
  return signing_owner(c, id, "email", "inbound_signing_key");
}

std::optional<secret_owner> feed_owner_of_calendar(pg_conn& c, std::int64_t id) {
  return owner_of(c, "calendars", id, "feed_token_hash");
}

} // namespace crm::persistence
