// Contacts, companies and tags of a tenant (contract §4–§5), owned by the tenant's contacts
// actor: the only writer, answering reads from memory. Writes are validated against the state
// as it will be once every write before them has committed, committed in groups (one
// transaction for the writes that arrive while a commit is in flight), applied to memory after
// COMMIT, and only then answered.
#pragma once
#include "actors/callback.hpp"
#include "domain/contact.hpp"
#include "domain/contact_json.hpp"
#include "domain/contact_merge.hpp"
#include "domain/contact_search.hpp"
#include "domain/contact_store.hpp"
#include "domain/custom_field.hpp"
#include "domain/timeline.hpp"

#include <optional>
#include <string>
#include <vector>

namespace crm::actors {

class runtime;

// Fields of a create or an update, already checked for syntax by the HTTP layer. For optional
// fields the outer optional says "sent", the inner one "not null".
struct contact_fields {
  std::optional<std::string> first_name;
  std::optional<std::optional<std::string>> last_name;
  std::optional<std::optional<std::string>> email;
  std::optional<std::optional<std::string>> phone;
  std::optional<std::optional<std::int64_t>> company_id;
  std::optional<std::optional<std::int64_t>> owner_id; // an active user of the tenant
  std::optional<domain::contact_status> status;
  std::optional<std::optional<domain::contact_source>> source;
  std::optional<std::vector<std::string>> tags;
  // JSON object text. On create: the whole map. On update: merged key by key, null removes.
  std::optional<std::string> custom_fields;
  // Syntax issues the HTTP layer found; the actor adds those that need the tenant's state and
  // answers one 422 with all of them.
  std::vector<domain::issue> issues;
  // Set by a workflow action: the depth of the run, carried by the change's events.
  int chain_depth = 0;
};

// A replayable response for Idempotency-Key requests.
struct idempotency {
  std::string key;          // empty: none
  std::string request_hash; // of the method, path and body
};

struct stored_response {
  int status = 200;
  std::string body;
  std::optional<std::int64_t> id; // for Location
};

struct contact_view {
  domain::contact contact;
  std::optional<domain::company> company;
};

// Contacts.
void create_contact(runtime& rt, std::int64_t tenant, contact_fields f, idempotency key,
                    callback<stored_response> reply);
// `upsert` (an import's mode=upsert): a row whose e-mail is a contact's updates that contact
// with the row's fields instead of being refused. `first`: the index of the first item (a
// large import's later part): results and issue locations count from it.
void bulk_create_contacts(runtime& rt, std::int64_t tenant, std::vector<contact_fields> items,
                          std::vector<std::vector<domain::issue>> pre_errors, idempotency key,
                          std::string row_loc, callback<stored_response> reply, bool upsert = false,
                          std::int64_t first = 0);
// Reads answer with the response body, rendered in the actor: no copy of the contacts leaves it.
void get_contact(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply);
void update_contact(runtime& rt, std::int64_t tenant, std::int64_t id, contact_fields f,
                    callback<domain::contact> reply);
// `erase`: the patient's erasure (docs/compliance.md): the contact.deleted event carries only
// the id, never the record, and the audit row says "erase".
void delete_contact(runtime& rt, std::int64_t tenant, std::int64_t id, callback<domain::done> reply,
                    bool erase = false);
// The page shape of contract §4 for page `page` of `per_page` (the query's offset and limit).
void list_contacts(runtime& rt, std::int64_t tenant, domain::contact_query q, int page,
                   int per_page, callback<std::string> reply);
// The contact search of contract §11 (domain/contact_search.hpp, docs/design.md "Contact
// search"): its custom-field filters checked against the tenant's definitions (422), then the
// page of the list's shape.
void search_contacts(runtime& rt, std::int64_t tenant, domain::contact_search s,
                     callback<std::string> reply);
// How many contacts the search finds (its paging ignored), counted without rendering any.
void count_contacts(runtime& rt, std::int64_t tenant, domain::contact_search s,
                    callback<std::int64_t> reply);
// The contact's timeline (contract §11, domain/timeline.hpp): the page after `after` (none: the
// newest), read from Postgres once the contact is known to be the tenant's (404 or 403 as for a
// GET otherwise).
void contact_timeline(runtime& rt, std::int64_t tenant, std::int64_t id,
                      std::optional<domain::timeline_position> after, int limit,
                      callback<std::string> reply);
// Matching contact ids in the query's order (exports fetch them in chunks).
void match_contacts(runtime& rt, std::int64_t tenant, domain::contact_query q,
                    callback<std::vector<std::int64_t>> reply);
// The contacts of `ids` that still exist, in that order.
void fetch_contacts(runtime& rt, std::int64_t tenant, std::vector<std::int64_t> ids,
                    callback<std::vector<domain::contact>> reply);

// Merging a duplicate into a contact (contract §11, domain/contact_merge.hpp): every row about
// the duplicate moves to the survivor in one transaction, the duplicate is deleted, and the
// answer is the survivor as GET shows it. A later GET of the duplicate answers 404 with
// merged_into.
struct contact_merge_request {
  std::int64_t duplicate_id = 0;
  domain::merge_preferences prefer;
};
void merge_contacts(runtime& rt, std::int64_t tenant, std::int64_t survivor_id,
                    contact_merge_request req, callback<std::string> reply);
// The candidate pairs of duplicates (domain::find_duplicates), a page of the list's shape.
void find_duplicate_contacts(runtime& rt, std::int64_t tenant, int page, int per_page,
                             callback<std::string> reply);

// Finding the contact of an inbound message (docs/channels.md): the contact `known_id` when it
// still exists, else the one with `phone`, else the one with `email` (case-insensitive); when
// the phone and the e-mail belong to two different contacts → errc::conflict. No match: a new
// contact from `create` (every create rule applies).
struct contact_match_request {
  std::optional<std::int64_t> known_id;
  std::optional<std::string> phone;
  std::optional<std::string> email;
  contact_fields create;
};
struct contact_match {
  domain::contact contact;
  bool created = false;
};
void match_contact(runtime& rt, std::int64_t tenant, contact_match_request req,
                   callback<contact_match> reply);

// Tags.
void list_tags(runtime& rt, std::int64_t tenant, callback<std::vector<domain::tag_count>> reply);
// `chain_depth`: as contact_fields::chain_depth.
void add_tags(runtime& rt, std::int64_t tenant, std::int64_t id, std::vector<std::string> tags,
              callback<contact_view> reply, int chain_depth = 0);
void remove_tag(runtime& rt, std::int64_t tenant, std::int64_t id, std::string tag,
                callback<domain::done> reply, int chain_depth = 0);
void rename_tag(runtime& rt, std::int64_t tenant, std::string from, std::string to,
                callback<domain::tag_count> reply);

// Companies.
struct company_fields {
  std::optional<std::string> name;
  std::optional<std::optional<std::string>> domain;
  std::optional<std::optional<std::string>> phone;
  std::optional<std::optional<std::string>> industry;
  std::optional<std::optional<std::string>> address;
  std::optional<std::string> custom_fields; // as for contacts
  std::vector<domain::issue> issues;        // as for contacts
};

struct company_query {
  std::string search; // name or domain, case-insensitive substring
  std::optional<std::string> industry;
  std::string sort = "id"; // id, name, domain, industry, created_at, updated_at
  bool descending = false;
  std::int64_t offset = 0;
  std::int64_t limit = 20;
};

struct company_list {
  std::vector<domain::company> items;
  std::int64_t total = 0;
};

void create_company(runtime& rt, std::int64_t tenant, company_fields f,
                    callback<domain::company> reply);
void get_company(runtime& rt, std::int64_t tenant, std::int64_t id,
                 callback<domain::company> reply);
void update_company(runtime& rt, std::int64_t tenant, std::int64_t id, company_fields f,
                    callback<domain::company> reply);
void delete_company(runtime& rt, std::int64_t tenant, std::int64_t id,
                    callback<domain::done> reply);
void list_companies(runtime& rt, std::int64_t tenant, company_query q,
                    callback<company_list> reply);

// Custom fields: the fields actor tells the record actors of every committed change of the
// definitions (they validate values against the newest version they have seen), and has the
// contacts actor, which owns contact and company values, carry out a hard delete.
void push_field_definitions(runtime& rt, std::int64_t tenant, domain::field_definitions defs);
void purge_custom_field(runtime& rt, std::int64_t tenant, domain::custom_field f,
                        callback<std::int64_t> reply);

} // namespace crm::actors
