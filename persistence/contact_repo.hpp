// SQL for a tenant's contacts, companies, outbox events and idempotency keys. A batch of
// changes from the contacts actor commits as one transaction in one round trip (group commit).
// Blocking: call only on a pg_pool thread.
#pragma once
#include "domain/contact.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/tx_batch.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace crm::persistence {

struct idempotency_record {
  std::string key;
  std::string request_hash;
  int status = 0;
  std::string response;
  std::int64_t created_at = 0; // microseconds
};

// Idempotency keys are kept 24 hours (docs/operations.md "Idempotency keys"), then forgotten in
// memory and deleted in Postgres.
inline constexpr std::int64_t idempotency_window_micros = 24LL * 3600 * 1'000'000;

// The keys of `keys` older than the window, removed; at most once an hour (`last`: when it last
// ran, updated), so a busy tenant does not walk its keys at every write.
template <class Map>
void forget_expired_keys(Map& keys, std::int64_t& last, std::int64_t now) {
  if (now - last < 3600LL * 1'000'000) return;
  last = now;
  for (auto it = keys.begin(); it != keys.end();)
    it = it->second.created_at < now - idempotency_window_micros ? keys.erase(it) : std::next(it);
}

struct contacts_snapshot {
  std::vector<domain::contact> contacts;
  std::vector<domain::company> companies;
  std::vector<idempotency_record> keys; // younger than 24 h
  // An active record-event workflow or an active webhook subscription exists.
  bool event_listeners = true;
  // The tenant's active users: who may own a contact.
  std::unordered_set<std::int64_t> active_users;
  // The contacts merged into another (duplicate → survivor), for the 404 that names it.
  std::vector<std::pair<std::int64_t, std::int64_t>> merges;
};

contacts_snapshot load_contacts(pg_conn& c, std::int64_t tenant_id);

// What every record actor's load reads besides its records (inside its read transaction):
// whether an active record-event workflow or webhook subscription exists, and the idempotency
// keys younger than 24 h whose key starts with `prefix` ("" for all).
bool has_event_listeners(pqxx::transaction_base& tx, std::int64_t tenant_id);
std::vector<idempotency_record> recent_keys(pqxx::transaction_base& tx, std::int64_t tenant_id,
                                            const std::string& prefix);

// Reserves `n` ids from the shared sequence of `contacts` or `companies`.
enum class id_kind : std::uint8_t { contact, company };
std::vector<std::int64_t> reserve_ids(pg_conn& c, id_kind kind, int n);

struct outbox_event {
  std::string event;   // "contact.created", ...
  std::string payload; // JSON object
  int depth = 0;       // workflow chain depth of the change (docs/automation.md)
};

// One transaction's worth of changes, applied in this order: company inserts and updates,
// contact deletes, contact inserts and updates (skipping deleted contacts), company deletes,
// events, idempotency keys.
// A merge (contract §11): every row about the duplicate moves to the survivor, and a
// contact_merges row records it, in the batch's transaction and before its deletes (the
// duplicate is one of them). The duplicate's row is locked first, so a write about it that
// starts meanwhile waits and then finds it gone.
struct contact_merge {
  std::int64_t survivor_id = 0;
  std::int64_t duplicate_id = 0;
  std::optional<std::int64_t> merged_by;
  std::int64_t merged_at = 0; // microseconds
};

struct contact_batch final : tx_batch {
  std::int64_t tenant_id = 0;
  std::vector<domain::company> company_upserts;  // insert or full-row update, by id
  std::vector<domain::contact> contact_upserts;  // in the order their changes were validated
  std::vector<std::size_t> contact_group_starts; // where a new statement starts (a row repeats)
  std::vector<std::int64_t> contact_deletes;
  std::vector<std::int64_t> company_deletes;
  std::vector<contact_merge> merges;
  std::vector<outbox_event> events;
  std::vector<idempotency_record> keys;

  bool empty() const {
    return company_upserts.empty() && contact_upserts.empty() && contact_deletes.empty() &&
           company_deletes.empty() && events.empty() && keys.empty() && merges.empty();
  }
  std::int64_t tenant() const override { return tenant_id; }
  void append_sql(sql_text& out) const override;
};

// SQL of outbox events and idempotency keys, shared by the aggregates' batches.
void append_events_sql(sql_text& out, std::int64_t tenant, const std::vector<outbox_event>& events);
void append_keys_sql(sql_text& out, std::int64_t tenant,
                     const std::vector<idempotency_record>& keys);

enum class record_kind : std::uint8_t { contact, company };
std::optional<std::int64_t> tenant_of(pg_conn& c, record_kind kind, std::int64_t id);

} // namespace crm::persistence
