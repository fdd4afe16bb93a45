// Counting and moving the secrets at rest: one walk over every table that holds them, with what
// to do to each value given as a function.
#include "persistence/secrets_repo.hpp"

#include "domain/custom_field.hpp"
#include "domain/json_parse.hpp"
#include "domain/secret_keys.hpp"
#include "domain/workflow.hpp"
#include "persistence/row_values.hpp"
#include "persistence/sealed_columns.hpp"

#include <boost/json.hpp>
#include <pqxx/pqxx>
#include <sodium.h>

#include <functional>
#include <optional>
#include <set>
#include <stdexcept>

namespace json = boost::json;

namespace crm::persistence {
namespace {

struct secret_ref {
  bool hashed = false; // a keyed hash (else a sealed value)
  std::string purpose;
  std::int64_t tenant = 0;
  std::string_view stored;
};
// What becomes of one stored value: a replacement, or nullopt to leave it.
using visitor = std::function<std::optional<std::string>(const secret_ref&)>;

constexpr const char* open_runs = "status IN ('queued', 'running', 'waiting')";
constexpr std::int64_t run_slice = 500;

// Applies `f` to the header values of a stored actions array; the new text if any changed.
std::optional<std::string> visit_actions(const std::string& text, std::int64_t tenant,
                                         const visitor& f) {
  json::error_code ec;
  auto v = crm::domain::parse_json(text, ec);
  if (ec || !v.is_array()) return std::nullopt;
  bool changed = false;
  domain::map_header_values(v.as_array(), [&](std::string_view s) {
    auto next = f({false, std::string(sealed::http_header), tenant, s});
    if (!next) return std::string(s);
    changed = true;
    return *next;
  });
  if (!changed) return std::nullopt;
  return json::serialize(v);
}

std::optional<std::string> visit_text(const pqxx::field& field, bool hashed,
                                      std::string_view purpose, std::int64_t tenant,
                                      const visitor& f) {
  if (field.is_null()) return std::nullopt;
  return f({hashed, std::string(purpose), tenant, field.c_str()});
}

std::int64_t visit_channels(pqxx::work& tx, const char* lock, const visitor& f) {
  std::int64_t rows = 0;
  for (auto r : tx.exec(std::string("SELECT id, tenant_id, type, config::text, webhook_secret"
                                    " FROM channels ORDER BY id") +
                        lock)) {
    auto id = r[0].as<std::int64_t>();
    auto tenant = r[1].as<std::int64_t>();
    auto type = domain::parse_channel_type(r[2].as<std::string>());
    std::optional<std::string> config;
    json::error_code ec;
    auto cfg = crm::domain::parse_json(r[3].c_str(), ec);
    if (type && !ec && cfg.is_object()) {
      bool changed = false;
      sealed::map_config_secrets(*type, cfg.as_object(),
                                 [&](std::string_view key, std::string_view v) {
                                   auto next = f({false, sealed::channel_config(key), tenant, v});
                                   if (!next) return std::string(v);
                                   changed = true;
                                   return *next;
                                 });
      if (changed) config = json::serialize(cfg);
    }
    auto secret = visit_text(r[4], true, sealed::channel_webhook_secret, tenant, f);
    if (!config && !secret) continue;
    ++rows;
    tx.exec_params("UPDATE channels SET config = COALESCE($2::jsonb, config), webhook_secret ="
                   " COALESCE($3, webhook_secret) WHERE id = $1",
                   id, config ? config->c_str() : nullptr, secret ? secret->c_str() : nullptr);
  }
  return rows;
}

std::int64_t visit_workflows(pqxx::work& tx, const char* lock, const visitor& f) {
  std::int64_t rows = 0;
  for (auto r : tx.exec(std::string("SELECT id, tenant_id, actions::text, webhook_secret FROM"
                                    " workflows WHERE webhook_secret IS NOT NULL OR"
                                    " actions::text LIKE '%\"headers\"%' ORDER BY id") +
                        lock)) {
    auto id = r[0].as<std::int64_t>();
    auto tenant = r[1].as<std::int64_t>();
    auto actions = visit_actions(r[2].as<std::string>(), tenant, f);
    auto secret = visit_text(r[3], false, sealed::workflow_webhook_secret, tenant, f);
    if (!actions && !secret) continue;
    ++rows;
    tx.exec_params("UPDATE workflows SET actions = COALESCE($2::jsonb, actions), webhook_secret ="
                   " COALESCE($3, webhook_secret) WHERE id = $1",
                   id, actions ? actions->c_str() : nullptr, secret ? secret->c_str() : nullptr);
  }
  return rows;
}

// One column of single values: `table`.`column` with its purpose.
std::int64_t visit_column(pqxx::work& tx, const char* table, const char* column,
                          std::string_view purpose, const char* lock, const visitor& f,
                          bool hashed = false) {
  std::int64_t rows = 0;
  for (auto r : tx.exec(std::string("SELECT id, tenant_id, ") + column + " FROM " + table +
                        " WHERE " + column + " IS NOT NULL ORDER BY id" + lock)) {
    auto next = visit_text(r[2], hashed, purpose, r[1].as<std::int64_t>(), f);
    if (!next) continue;
    ++rows;
    tx.exec_params(std::string("UPDATE ") + table + " SET " + column + " = $2 WHERE id = $1",
                   r[0].as<std::int64_t>(), *next);
  }
  return rows;
}

// Every table, a transaction each (workflow runs in slices of run_slice rows). `change`: the
// rows are locked and `f`'s replacements written.
void visit_all(pg_conn& c, bool all_runs, bool change, const visitor& f) {
  const char* lock = change ? " FOR UPDATE" : "";
  auto in_tx = [&](auto&& body) {
    pqxx::work tx(c.raw());
    body(tx);
    tx.commit();
  };
  in_tx([&](pqxx::work& tx) { visit_channels(tx, lock, f); });
  in_tx([&](pqxx::work& tx) { visit_workflows(tx, lock, f); });
  in_tx([&](pqxx::work& tx) {
    visit_column(tx, "webhook_subscriptions", "secret", sealed::subscription_secret, lock, f);
  });
  in_tx([&](pqxx::work& tx) {
    visit_column(tx, "ai_agents", "api_key", sealed::agent_api_key, lock, f);
  });
  in_tx([&](pqxx::work& tx) {
    visit_column(tx, "tenant_data_keys", "data_key", sealed::tenant_data_key, lock, f);
  });
  in_tx([&](pqxx::work& tx) {
    visit_column(tx, "api_keys", "secret_hash", sealed::api_key_secret, lock, f, true);
  });
  in_tx([&](pqxx::work& tx) {
    visit_column(tx, "calendars", "feed_token_hash", sealed::calendar_feed_token, lock, f, true);
  });
  in_tx([&](pqxx::work& tx) {
    visit_column(tx, "user_totp", "secret", sealed::user_totp_secret, lock, f);
    visit_column(tx, "user_totp", "pending_secret", sealed::user_totp_secret, lock, f);
  });
  for (std::int64_t after = 0;;) {
    bool more = false;
    in_tx([&](pqxx::work& tx) {
      auto rows = tx.exec_params(
          std::string("SELECT id, tenant_id, actions::text FROM workflow_runs WHERE id > $1 AND"
                      " actions::text LIKE '%\"headers\"%'") +
              (all_runs ? "" : std::string(" AND ") + open_runs) + " ORDER BY id LIMIT $2" + lock,
          after, run_slice);
      for (auto r : rows) {
        after = r[0].as<std::int64_t>();
        auto next = visit_actions(r[2].as<std::string>(), r[1].as<std::int64_t>(), f);
        if (next)
          tx.exec_params("UPDATE workflow_runs SET actions = $2::jsonb WHERE id = $1", after,
                         *next);
      }
      more = rows.size() == static_cast<std::size_t>(run_slice);
    });
    if (!more) break;
  }
}

void count_into(secrets_census& out, const secret_ref& s) {
  auto key = domain::secret_keys::key_of(s.stored);
  if (!key)
    ++out.plaintext;
  else
    ++(domain::secret_keys::is_hashed(s.stored) ? out.hashed : out.sealed)[std::string(*key)];
}

} // namespace

secrets_census count_secrets(pg_conn& c, bool all_runs) {
  secrets_census out;
  visit_all(c, all_runs, false, [&](const secret_ref& s) -> std::optional<std::string> {
    count_into(out, s);
    return std::nullopt;
  });
  return out;
}

reseal_result reseal_secrets(pg_conn& c, bool only_plaintext) {
  auto& keys = c.keys();
  reseal_result out;
  visit_all(c, true, true, [&](const secret_ref& s) -> std::optional<std::string> {
    auto key = domain::secret_keys::key_of(s.stored);
    if (key && (only_plaintext || *key == keys.active_id())) return std::nullopt;
    if (s.hashed) {
      // A keyed hash cannot be opened: it moves when its secret is next presented.
      if (key) {
        ++out.hashes_left;
        return std::nullopt;
      }
      ++out.resealed;
      return keys.hash(s.purpose, s.tenant, s.stored);
    }
    ++out.resealed;
    return keys.seal(s.purpose, s.tenant, keys.open(s.purpose, s.tenant, s.stored));
  });
  return out;
}

std::vector<std::string> prepare_secrets(pg_conn& c) {
  constexpr std::int64_t lock_id = 0x63726d5365616c; // "crmSeal"
  bool sealed_before = false;
  {
    pqxx::work tx(c.raw());
    tx.exec_params("SELECT pg_advisory_lock($1)", lock_id);
    auto r = tx.exec("SELECT plaintext_sealed_at IS NOT NULL FROM secrets_at_rest WHERE id = 1");
    sealed_before = !r.empty() && r.front()[0].as<bool>();
    tx.commit();
  }
  try {
    if (!sealed_before) {
      reseal_secrets(c, true);
      pqxx::work tx(c.raw());
      tx.exec("UPDATE secrets_at_rest SET plaintext_sealed_at = now() WHERE id = 1");
      tx.commit();
    }
  } catch (...) {
    c.reset(); // the session lock goes with the connection
    throw;
  }
  {
    pqxx::work tx(c.raw());
    tx.exec_params("SELECT pg_advisory_unlock($1)", lock_id);
    tx.commit();
  }
  auto census = count_secrets(c, false);
  std::set<std::string> missing;
  for (auto* m : {&census.sealed, &census.hashed})
    for (auto& [key, n] : *m)
      if (!c.keys().has(key)) missing.insert(key);
  return {missing.begin(), missing.end()};
}

std::optional<std::string> bind_legacy_values(const domain::data_key& key, std::int64_t contact_id,
                                              std::string_view custom_fields) {
  return domain::reseal_custom_values(
      custom_fields,
      [&](std::string_view field, std::string_view stored) -> std::optional<std::string> {
        auto plain = key.open(sealed::legacy_contact_field, stored);
        if (!plain) return std::nullopt; // bound already, or not this key's: left
        auto bound = key.seal(sealed::contact_field(contact_id, field), *plain);
        sodium_memzero(plain->data(), plain->size());
        return bound;
      });
}

std::int64_t bind_sensitive_values(pqxx::transaction_base& tx, const domain::secret_keys& keys) {
  std::int64_t rebound = 0;
  for (const auto& k : tx.exec("SELECT tenant_id, data_key FROM tenant_data_keys")) {
    auto tenant = k[0].as<std::int64_t>();
    auto key = domain::data_key::from_bytes(
        keys.open(sealed::tenant_data_key, tenant, k[1].as<std::string>()));
    if (!key)
      throw std::runtime_error("tenant " + std::to_string(tenant) + "'s data key does not open");
    auto rows = tx.exec_params("SELECT id, custom_fields::text FROM contacts WHERE tenant_id = $1"
                               " AND custom_fields::text LIKE '%\"$sealed\"%' FOR UPDATE",
                               tenant);
    for (const auto& r : rows) {
      auto id = r[0].as<std::int64_t>();
      auto text = bind_legacy_values(*key, id, r[1].c_str());
      if (!text) continue;
      tx.exec_params(
          "UPDATE contacts SET custom_fields = $3::jsonb WHERE tenant_id = $1 AND id = $2", tenant,
          id, *text);
      ++rebound;
    }
  }
  return rebound;
}

} // namespace crm::persistence
