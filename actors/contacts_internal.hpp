// The contacts actor's parts (docs/aggregates.md), shared by its files: the actor with its
// projection, readiness, group commit and behaviour (contacts_actor.cpp), the rules that need
// its state (contacts_rules.cpp: sensitive values, field rules, idempotency), and the request
// handlers with companies (contacts_handlers.cpp). Internal to actors/ (CAF).
#pragma once
#include "actors/contacts.hpp"

#include "actors/async_io.hpp"
#include "actors/channels.hpp"
#include "actors/deals.hpp"
#include "actors/group_batch.hpp"
#include "actors/notes.hpp"
#include "actors/schedule.hpp"
#include "actors/tasks.hpp"

#include "actors/system.hpp"
#include "domain/clock.hpp"
#include "domain/contact_merge.hpp"
#include "domain/json_parse.hpp"
#include "domain/json_writer.hpp"
#include "domain/secret_keys.hpp"
#include "domain/validation.hpp"
#include "persistence/audit_repo.hpp"
#include "persistence/contact_repo.hpp"
#include "persistence/field_repo.hpp"
#include "persistence/group_committer.hpp"
#include "persistence/log.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/sealed_columns.hpp"
#include "persistence/timeline_repo.hpp"

#include <boost/json.hpp>

#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::actors::contact_match_request> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::contact_fields> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::company_fields> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::idempotency> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::company_query> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::contact_query> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::contact_search> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::contact_merge_request> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<crm::domain::timeline_position>> : std::true_type {
};
template <>
struct allowed_unsafe_message_type<std::vector<crm::actors::contact_fields>> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::vector<std::vector<crm::domain::issue>>> : std::true_type {
};
} // namespace caf

namespace crm::actors::contacts_impl {

using domain::errc;
using domain::failure;
using domain::issue;
namespace json = boost::json;

using bulk_atom = caf::atom_constant<caf::atom("bulk")>;
using delete_atom = caf::atom_constant<caf::atom("delete")>;
using match_atom = caf::atom_constant<caf::atom("match")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
using tags_atom = caf::atom_constant<caf::atom("tags")>;
using tag_add_atom = caf::atom_constant<caf::atom("tagadd")>;
using tag_rm_atom = caf::atom_constant<caf::atom("tagrm")>;
using tag_mv_atom = caf::atom_constant<caf::atom("tagmv")>;
using co_new_atom = caf::atom_constant<caf::atom("conew")>;
using co_get_atom = caf::atom_constant<caf::atom("coget")>;
using co_put_atom = caf::atom_constant<caf::atom("coput")>;
using co_del_atom = caf::atom_constant<caf::atom("codel")>;
using co_list_atom = caf::atom_constant<caf::atom("colist")>;
using find_atom = caf::atom_constant<caf::atom("find")>;
using search_atom = caf::atom_constant<caf::atom("search")>;
using count_atom = caf::atom_constant<caf::atom("count")>;
using timeline_atom = caf::atom_constant<caf::atom("timeline")>;
using merge_atom = caf::atom_constant<caf::atom("merge")>;
using dupes_atom = caf::atom_constant<caf::atom("dupes")>;

constexpr std::size_t max_custom_fields_bytes = 16 * 1024;
constexpr std::size_t max_tags = 50;
constexpr int id_block = 512;
constexpr std::size_t max_batch = 2000;
constexpr std::int64_t idempotency_window = persistence::idempotency_window_micros;

struct batch {
  std::uint64_t seq = 0;
  persistence::contact_batch sql;
  std::unordered_map<std::int64_t, std::size_t> contact_pos; // ids in the current statement group
  std::unordered_map<std::int64_t, std::size_t> company_pos;
  std::vector<continuation> on_commit;
  std::vector<std::function<void(const failure&)>> on_fail;
  std::size_t writes = 0;
};

enum class need : std::uint8_t { read, write, exclusive };

// A request held until the actor can serve it.
struct held {
  need n;
  std::size_t ids = 0;
  std::size_t company_ids = 0;
  continuation k;
  std::function<void(const failure&)> fail;
};

struct contacts_state {
  tenant_env env;
  bool loaded = false;
  bool loading = false;
  bool stopping = false;

  // Committed state. The contacts and companies live in the tenant's contacts_view, which the
  // I/O threads read under its shared lock (docs/design.md "Reads on the I/O thread"); this
  // actor, their only writer, changes them under the exclusive lock and reads them without.
  std::shared_ptr<contacts_view> view = std::make_shared<contacts_view>();
  std::uint64_t view_owner = 0; // this incarnation's claim on it
  const domain::contact_store& store() const { return view->records().store; }
  const std::map<std::int64_t, domain::company>& companies() const {
    return view->records().companies;
  }
  std::unordered_map<std::string, persistence::idempotency_record> keys;
  std::int64_t keys_pruned_at = 0;          // persistence::forget_expired_keys
  domain::field_definitions defs;           // custom-field definitions, newest version seen
  std::vector<std::string> sensitive;       // names of its sensitive contact fields (sealed values)
  std::optional<domain::data_key> data_key; // the tenant's, opened from the definitions
  std::string data_key_sealed;              // what it was opened from
  bool purging = false;                     // a hard delete of a custom field is committing
  // The workflow chain depth of the change being staged (0 for a client's own request): its
  // events carry it, so that chains of workflows stop (docs/automation.md).
  int event_depth = 0;
  // Whether an active event workflow or webhook subscription exists (read with the snapshot,
  // then told by the workflow actor on every change). Without one, no event is written: it would
  // reach nobody, and it costs a write more than the change itself (benchmarks/RESULTS.md).
  bool event_listeners = true;
  // Told while loading: the workflow actor's word is then newer than the snapshot's.
  bool listeners_told_while_loading = false;
  // The tenant's active users (who may own a contact), and what the users actor told while the
  // snapshot was being read.
  std::unordered_set<std::int64_t> active_users;
  std::vector<std::pair<std::int64_t, bool>> users_told_while_loading;
  // Contacts merged into another (duplicate → survivor): a GET of one answers 404 naming it.
  std::unordered_map<std::int64_t, std::int64_t> merged_into;
  // GET /contacts/duplicates: the pairs as of `contacts_version` (bumped by every committed
  // change of the contacts and by every load), so that a front desk paging through them pays
  // for finding them once (about 100 ms for 100,000 contacts: benchmarks/micro.cpp).
  std::uint64_t contacts_version = 0;
  struct {
    std::uint64_t version = std::numeric_limits<std::uint64_t>::max();
    std::vector<domain::duplicate_pair> pairs;
  } duplicates;

  // Projection of staged and in-flight writes over the committed state.
  template <class T>
  struct pending {
    std::uint64_t seq;
    std::optional<T> value; // nothing: deleted
  };
  std::unordered_map<std::int64_t, pending<domain::contact>> p_contacts;
  std::unordered_map<std::int64_t, pending<domain::company>> p_companies;
  std::unordered_map<std::string, std::pair<std::uint64_t, std::int64_t>> p_emails; // 0: released
  std::unordered_map<std::string, std::pair<std::uint64_t, std::string>> p_keys;

  std::deque<std::int64_t> contact_ids;
  std::deque<std::int64_t> company_ids;
  bool reserving = false;

  std::uint64_t next_seq = 1;
  batch open;
  std::optional<batch> in_flight;
  std::deque<held> waiting; // until loaded, until ids arrive, or until idle

  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
  static inline const char* name = "contacts";

  contacts_state() = default;
  contacts_state(const contacts_state&) = delete;
  contacts_state& operator=(const contacts_state&) = delete;
  // Readers take the actor's path once this incarnation is gone (the next one loads anew).
  ~contacts_state() { view->set_current(view_owner, false); }
};

using contacts_actor = caf::stateful_actor<contacts_state>;

// Applies `f` to `c` (a copy of the projected contact, or a new one). Collects issues with
// `loc_prefix` + field; returns errc::duplicate_email as a failure separately.
struct apply_result {
  std::vector<issue> issues;
  bool duplicate_email = false;
  std::vector<std::string> tags_added;
  std::optional<domain::contact_status> old_status;
};

enum class key_state : std::uint8_t { fresh, replay, pending, conflict };

// ---- shared by the actor's files ---------------------------------------------------------------

// contacts_actor.cpp
const domain::company* company_of(const contacts_records& r, const domain::contact& c);
std::string page_json(const contacts_records& r, const domain::contact_query& q, int page,
                      int per_page);
failure missing_contact();
failure missing_company();
const domain::contact* projected_contact(contacts_state& st, std::int64_t id);
const domain::company* projected_company(contacts_state& st, std::int64_t id);
std::int64_t email_owner(contacts_state& st, const std::string& email);
std::int64_t phone_owner(contacts_state& st, const std::string& phone);
void load(contacts_actor* self);
void reload(contacts_actor* self);
void read_snapshot(contacts_actor* self);
void reserve(contacts_actor* self);
bool idle_pipeline(const contacts_state& st);
bool ready(const contacts_state& st, const held& h);
void when_ready(contacts_actor* self, need n, std::function<void(const failure&)> fail,
                continuation k, std::size_t ids = 0, std::size_t company_ids = 0);
void drain(contacts_actor* self, const failure* error = nullptr);
void stage_contact(contacts_state& st, const domain::contact* before, domain::contact after);
void stage_contact_delete(contacts_state& st, const domain::contact& before);
void stage_company(contacts_state& st, domain::company after);
void append_optional(std::string& out, const std::optional<std::string>& v);
void append_field_value(std::string& out, const domain::contact& c, std::string_view key);

// contacts_rules.cpp
void definitions_changed(contacts_state& st);
bool sees_sensitive(const domain::audit_context* who);
bool holds_sealed(const contacts_state& st, const domain::contact& c);
const domain::contact& shown(const contacts_state& st, const domain::contact& c,
                             const domain::audit_context* who, bool reading,
                             std::deque<domain::contact>& storage,
                             std::vector<std::string>* disclosed = nullptr);
domain::contact masked(const contacts_state& st, const domain::contact& c);
bool audit_disclosure(const contacts_state& st, const domain::audit_context* who,
                      std::vector<std::int64_t> ids, std::vector<std::string> fields);
failure disclosure_unaudited();
void contact_event(contacts_state& st, const char* name, const domain::contact& c,
                   std::string_view extra = {});
// A JSON array of strings (field names, reasons) appended to `out`.
void append_names(std::string& out, const std::vector<std::string>& names);
void update_event(contacts_state& st, const domain::contact& before, const domain::contact& c,
                  const std::vector<std::string>& changed);
void stage_write(contacts_actor* self, continuation applied,
                 std::function<void(const failure&)> failed);
void audit_change(contacts_state& st, const domain::audit_context* who, const char* resource,
                  std::optional<std::int64_t> id, const char* action,
                  std::vector<std::string> fields, int status, std::vector<std::int64_t> ids = {});
void apply_committed(contacts_state& st, const batch& b, const persistence::contact_batch& sql);
void flush(contacts_actor* self);
std::int64_t next_timestamp(std::int64_t previous);
std::vector<std::string> add_unique(std::vector<std::string>& tags,
                                    const std::vector<std::string>& extra);
// A user of the tenant became active (created, reactivated) or not: who may own a contact.
void user_active(contacts_state& st, std::int64_t id, bool active);
apply_result apply_fields(contacts_state& st, domain::contact& c, const contact_fields& f,
                          bool creating, const std::vector<domain::loc_part>& loc_prefix);
failure duplicate_email_failure();
void contact_events(contacts_state& st, const domain::contact* before, const domain::contact& c,
                    const apply_result& r, const std::vector<std::string>& fields);
std::vector<std::string> fields_sent(const contact_fields& f);
key_state check_key(contacts_state& st, const idempotency& key,
                    persistence::idempotency_record** stored);
bool answer_known_key(contacts_actor* self, const idempotency& key,
                      const callback<stored_response>& reply);
void stage_key(contacts_state& st, const idempotency& key, int status, const std::string& body);
std::string convert_cells(const domain::field_definitions& defs, const std::string& text);
std::optional<std::string> without_key(const std::string& text, const std::string& name);
void do_purge(contacts_actor* self, domain::custom_field f, callback<std::int64_t> reply);

// contacts_handlers.cpp
void do_create(contacts_actor* self, contact_fields f, idempotency key,
               callback<stored_response> reply);
void do_match(contacts_actor* self, contact_match_request req, callback<contact_match> reply);
void do_bulk(contacts_actor* self, std::vector<contact_fields> items,
             std::vector<std::vector<issue>> pre_errors, idempotency key, std::string row_loc,
             callback<stored_response> reply, bool upsert = false, std::int64_t first = 0);
void do_update(contacts_actor* self, std::int64_t id, contact_fields f,
               callback<domain::contact> reply);
void do_delete(contacts_actor* self, std::int64_t id, callback<domain::done> reply, bool erase);
void do_merge(contacts_actor* self, std::int64_t survivor_id, contact_merge_request req,
              callback<std::string> reply);
std::string duplicates_page(contacts_state& st, int page, int per_page);
failure merged_failure(std::int64_t survivor);
std::optional<domain::company> committed_company(contacts_state& st,
                                                 const std::optional<std::int64_t>& id);
void do_add_tags(contacts_actor* self, std::int64_t id, std::vector<std::string> tags,
                 callback<contact_view> reply);
void do_remove_tag(contacts_actor* self, std::int64_t id, const std::string& tag,
                   callback<domain::done> reply);
void do_rename_tag(contacts_actor* self, const std::string& from, const std::string& to,
                   callback<domain::tag_count> reply);
std::vector<issue> apply_company_fields(const contacts_state& st, domain::company& c,
                                        const company_fields& f, bool creating);
void do_create_company(contacts_actor* self, company_fields f, callback<domain::company> reply);
void do_update_company(contacts_actor* self, std::int64_t id, company_fields f,
                       callback<domain::company> reply);
void do_delete_company(contacts_actor* self, std::int64_t id, callback<domain::done> reply);
company_list list_companies_of(contacts_state& st, const company_query& q);
caf::behavior contacts_behavior(contacts_actor* self, tenant_env env);

// An id this tenant does not hold: 403 when another tenant does, else 404.
template <class T>
void reply_missing(contacts_actor* self, persistence::record_kind kind, std::int64_t id,
                   callback<T> reply) {
  if (kind == persistence::record_kind::contact)
    if (auto it = self->state.merged_into.find(id); it != self->state.merged_into.end())
      return reply(merged_failure(it->second));
  reply_not_held(
      self->state.env,
      [kind, id](persistence::pg_conn& c) { return persistence::tenant_of(c, kind, id); },
      kind == persistence::record_kind::contact ? missing_contact() : missing_company(),
      std::move(reply));
}

template <class Map>
void forget_committed(Map& m, std::uint64_t seq) {
  for (auto it = m.begin(); it != m.end();) {
    if (it->second.first == seq)
      it = m.erase(it);
    else
      ++it;
  }
}

} // namespace crm::actors::contacts_impl
