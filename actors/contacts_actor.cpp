// The contacts actor of one tenant: contacts, companies and tags. State is loaded from Postgres
// on first use and served from memory. Writes are validated against the projected state (what
// is committed plus every write ahead of them), staged into the open batch, and committed as
// one transaction when no other commit is in flight (group commit). Memory changes and replies
// follow COMMIT; a failed commit answers 503 to its writes and to those staged behind them.
#include "actors/contacts.hpp"

#include "actors/async_io.hpp"
#include "actors/deals.hpp"
#include "actors/group_batch.hpp"
#include "actors/notes.hpp"
#include "actors/schedule.hpp"

#include "actors/system.hpp"
#include "domain/clock.hpp"
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

#include <boost/json.hpp>

#include <deque>
#include <map>
#include <unordered_map>

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
struct allowed_unsafe_message_type<std::vector<crm::actors::contact_fields>> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::vector<std::vector<crm::domain::issue>>> : std::true_type {
};
} // namespace caf

namespace crm::actors {
namespace {

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

// What the actor and a reader of the view (docs/design.md "Reads on the I/O thread") both
// render: a contact's company, and a page of the list (its items carry no custom fields).
const domain::company* company_of(const contacts_records& r, const domain::contact& c) {
  if (!c.company_id) return nullptr;
  auto it = r.companies.find(*c.company_id);
  return it == r.companies.end() ? nullptr : &it->second;
}

std::string page_json(const contacts_records& r, const domain::contact_query& q, int page,
                      int per_page) {
  auto found = r.store.list(q);
  return domain::encode_contact_page(found.items, found.total, page, per_page);
}

failure missing_contact() {
  return failure::of(errc::not_found, "contact not found");
}
failure missing_company() {
  return failure::of(errc::not_found, "company not found");
}

// ---- projection ------------------------------------------------------------------------

const domain::contact* projected_contact(contacts_state& st, std::int64_t id) {
  if (auto it = st.p_contacts.find(id); it != st.p_contacts.end())
    return it->second.value ? &*it->second.value : nullptr;
  return st.store().find(id);
}

const domain::company* projected_company(contacts_state& st, std::int64_t id) {
  if (auto it = st.p_companies.find(id); it != st.p_companies.end())
    return it->second.value ? &*it->second.value : nullptr;
  auto it = st.companies().find(id);
  return it == st.companies().end() ? nullptr : &it->second;
}

// The contact that holds `email` once everything staged commits (0: nobody).
std::int64_t email_owner(contacts_state& st, const std::string& email) {
  auto key = domain::ascii_lower(email);
  if (auto it = st.p_emails.find(key); it != st.p_emails.end()) return it->second.second;
  auto c = st.store().find_by_email(email);
  return c ? c->id : 0;
}

// The lowest id of a contact with `phone` once everything staged commits (0: nobody). A scan:
// phones have no index, and only inbound messages from unknown senders look them up.
std::int64_t phone_owner(contacts_state& st, const std::string& phone) {
  std::int64_t best = 0;
  auto consider = [&](std::int64_t id) {
    if (!best || id < best) best = id;
  };
  for (auto& [id, p] : st.p_contacts)
    if (p.value && p.value->phone == phone) consider(id);
  st.store().for_each({}, [&](const domain::contact& c) {
    if (c.phone == phone && !st.p_contacts.count(c.id)) consider(c.id);
  });
  return best;
}

// ---- readiness ---------------------------------------------------------------------------

void drain(contacts_actor* self, const failure* error = nullptr);
void reserve(contacts_actor* self);

void read_snapshot(contacts_actor* self);
void definitions_changed(contacts_state& st);

// Loads the state once whatever a predecessor of this actor (one that crashed or was failed)
// handed the group committer has settled: its rows are then in the snapshot, or never will be.
void load(contacts_actor* self) {
  auto& st = self->state;
  if (st.loading) return;
  st.loading = true;
  after_settled<persistence::contact_batch>(self, [self] { read_snapshot(self); });
}

// After a commit whose outcome is unknown (or that met a row this actor did not know of), the
// state is read again before anything else is served: it may hold rows memory does not.
void reload(contacts_actor* self) {
  auto& st = self->state;
  st.loaded = false;
  st.view->set_current(st.view_owner, false);
  st.view->write([](contacts_records& r) { r = contacts_records{}; });
  st.keys.clear();
  load(self);
}

void read_snapshot(contacts_actor* self) {
  auto& st = self->state;
  auto me = caf::actor_cast<caf::actor>(self);
  using loaded = std::pair<persistence::contacts_snapshot, domain::field_definitions>;
  st.env.pool->run<loaded>(
      [tid = st.env.tenant_id](persistence::pg_conn& c) {
        auto defs = persistence::load_fields(c, tid);
        return loaded{persistence::load_contacts(c, tid), std::move(defs)};
      },
      [me, self](domain::outcome<loaded> r) mutable {
        caf::anon_send(me, resume_atom::value, continuation{[self, r = std::move(r)]() mutable {
                         auto& st = self->state;
                         st.loading = false;
                         bool told = std::exchange(st.listeners_told_while_loading, false);
                         if (!r) {
                           drain(self, &r.error());
                           return;
                         }
                         auto& snap = r->first;
                         st.view->write([&](contacts_records& records) {
                           records = contacts_records{};
                           for (auto& co : snap.companies)
                             records.companies.emplace(co.id, std::move(co));
                           for (auto& c : snap.contacts) records.store.upsert(std::move(c));
                         });
                         for (auto& k : snap.keys) st.keys.emplace(k.key, std::move(k));
                         if (!told) st.event_listeners = snap.event_listeners;
                         // Definitions pushed while loading may be newer than the snapshot's.
                         if (r->second.version >= st.defs.version) st.defs = std::move(r->second);
                         definitions_changed(st);
                         st.loaded = true;
                         st.view->set_current(st.view_owner, true);
                         drain(self);
                       }});
      });
}

void reserve(contacts_actor* self) {
  auto& st = self->state;
  if (st.reserving) return;
  st.reserving = true;
  auto me = caf::actor_cast<caf::actor>(self);
  using ids = std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>;
  auto want_contacts = st.contact_ids.size() < id_block;
  auto want_companies = st.company_ids.size() < 16;
  st.env.pool->run<ids>(
      [want_contacts, want_companies](persistence::pg_conn& c) {
        ids out;
        if (want_contacts)
          out.first = persistence::reserve_ids(c, persistence::id_kind::contact, id_block * 2);
        if (want_companies)
          out.second = persistence::reserve_ids(c, persistence::id_kind::company, 64);
        return out;
      },
      [me, self](domain::outcome<ids> r) mutable {
        caf::anon_send(me, resume_atom::value, continuation{[self, r = std::move(r)]() mutable {
                         auto& st = self->state;
                         st.reserving = false;
                         if (!r) {
                           drain(self, &r.error());
                           return;
                         }
                         for (auto id : r->first) st.contact_ids.push_back(id);
                         for (auto id : r->second) st.company_ids.push_back(id);
                         drain(self);
                       }});
      });
}

bool idle_pipeline(const contacts_state& st) {
  return !st.in_flight && st.open.writes == 0 && !st.purging;
}

bool ready(const contacts_state& st, const held& h) {
  if (!st.loaded) return false;
  if (st.purging && h.n != need::read) return false;
  if (st.contact_ids.size() < h.ids || st.company_ids.size() < h.company_ids) return false;
  if (h.n == need::exclusive && !idle_pipeline(st)) return false;
  return true;
}

// Runs `k` now if the state allows (loaded; enough reserved ids; for exclusive operations
// nothing staged or committing) and nothing is held before it, else holds it in order.
void when_ready(contacts_actor* self, need n, std::function<void(const failure&)> fail,
                continuation k, std::size_t ids = 0, std::size_t company_ids = 0) {
  auto& st = self->state;
  held h{n, ids, company_ids, std::move(k), std::move(fail)};
  if (st.waiting.empty() && ready(st, h)) {
    h.k();
    return;
  }
  st.waiting.push_back(std::move(h));
  if (!st.loaded)
    load(self);
  else if (st.contact_ids.size() < ids || st.company_ids.size() < company_ids)
    reserve(self);
}

// Runs what is held, in order, up to the first that still cannot run. With `error`, what
// cannot run is answered with it instead (a load or an id reservation failed).
void drain(contacts_actor* self, const failure* error) {
  auto& st = self->state;
  auto first = run_held(
      st.waiting, [&st](const held& h) { return ready(st, h); }, error);
  if (first && st.loaded &&
      (st.contact_ids.size() < first->ids || st.company_ids.size() < first->company_ids))
    reserve(self);
  if (st.stopping && idle_pipeline(st) && st.waiting.empty()) self->quit();
}

// An id this tenant does not hold: 403 when another tenant does, else 404.
template <class T>
void reply_missing(contacts_actor* self, persistence::record_kind kind, std::int64_t id,
                   callback<T> reply) {
  reply_not_held(
      self->state.env,
      [kind, id](persistence::pg_conn& c) { return persistence::tenant_of(c, kind, id); },
      kind == persistence::record_kind::contact ? missing_contact() : missing_company(),
      std::move(reply));
}

// ---- staging and group commit -----------------------------------------------------------

void flush(contacts_actor* self);

void stage_contact(contacts_state& st, const domain::contact* before, domain::contact after) {
  auto seq = st.open.seq;
  auto old_email = before && before->email ? domain::ascii_lower(*before->email) : std::string();
  auto new_email = after.email ? domain::ascii_lower(*after.email) : std::string();
  if (old_email != new_email) {
    if (!old_email.empty()) st.p_emails[old_email] = {seq, 0};
  }
  if (!new_email.empty()) st.p_emails[new_email] = {seq, after.id};
  // A multi-row upsert may touch a row only once: a contact changed again within the batch
  // starts a new statement, so rows apply in the order their changes were validated (an e-mail
  // released by one change is free before a later change takes it).
  auto& b = st.open.sql;
  if (st.open.contact_pos.count(after.id)) {
    b.contact_group_starts.push_back(b.contact_upserts.size());
    st.open.contact_pos.clear();
  }
  st.open.contact_pos[after.id] = b.contact_upserts.size();
  b.contact_upserts.push_back(after);
  st.p_contacts[after.id] = {seq, std::move(after)};
}

void stage_contact_delete(contacts_state& st, const domain::contact& before) {
  auto seq = st.open.seq;
  if (before.email) st.p_emails[domain::ascii_lower(*before.email)] = {seq, 0};
  // Deletes run before the batch's upserts, which skip deleted contacts: an e-mail a deleted
  // contact released is then free for a contact created in the same batch.
  auto& b = st.open.sql;
  b.contact_deletes.push_back(before.id);
  st.p_contacts[before.id] = {seq, std::nullopt};
}

void stage_company(contacts_state& st, domain::company after) {
  auto& b = st.open.sql;
  if (auto it = st.open.company_pos.find(after.id); it != st.open.company_pos.end()) {
    b.company_upserts[it->second] = after;
  } else {
    st.open.company_pos[after.id] = b.company_upserts.size();
    b.company_upserts.push_back(after);
  }
  st.p_companies[after.id] = {st.open.seq, std::move(after)};
}

void append_optional(std::string& out, const std::optional<std::string>& v) {
  if (v)
    domain::append_json_string(out, *v);
  else
    out += "null";
}

// The value of contact field `key` as JSON, for the `previous` object of an update event.
void append_field_value(std::string& out, const domain::contact& c, std::string_view key) {
  if (key == "first_name") {
    domain::append_json_string(out, c.first_name);
  } else if (key == "last_name") {
    append_optional(out, c.last_name);
  } else if (key == "email") {
    append_optional(out, c.email);
  } else if (key == "phone") {
    append_optional(out, c.phone);
  } else if (key == "company_id") {
    out += c.company_id ? std::to_string(*c.company_id) : "null";
  } else if (key == "status") {
    domain::append_json_string(out, domain::to_string(c.status));
  } else if (key == "source") {
    if (c.source)
      domain::append_json_string(out, domain::to_string(*c.source));
    else
      out += "null";
  } else if (key == "tags") {
    out += '[';
    for (std::size_t i = 0; i < c.tags.size(); ++i) {
      if (i) out += ',';
      domain::append_json_string(out, c.tags[i]);
    }
    out += ']';
  } else {
    out += c.custom_fields;
  }
}

// ---- sensitive values (docs/compliance.md "Sensitive fields") ---------------------------

// After any change of the definitions: which fields are sensitive, and the tenant's data key.
void definitions_changed(contacts_state& st) {
  st.sensitive = st.defs.sensitive(domain::field_entity::contact);
  st.view->set_plain(st.sensitive.empty());
  if (st.defs.sealed_data_key.empty() || st.defs.sealed_data_key == st.data_key_sealed) return;
  try {
    auto raw = st.env.pool->keys().open(persistence::sealed::tenant_data_key, st.env.tenant_id,
                                        st.defs.sealed_data_key);
    st.data_key = domain::data_key::from_bytes(raw);
    st.data_key_sealed = st.defs.sealed_data_key;
  } catch (const domain::secret_error& e) {
    log_error("tenant {}: its data key does not open: {}", st.env.tenant_id, e.what());
  }
}

bool sees_sensitive(const domain::audit_context* who) {
  return who && who->actor == domain::audit_actor::user &&
         (who->role == "manager" || who->role == "admin");
}

bool holds_sealed(const contacts_state& st, const domain::contact& c) {
  return !st.sensitive.empty() && domain::may_hold_sealed(c.custom_fields);
}

// The contact as it may be shown: its sensitive values opened for a read by a manager or an
// admin (their names added to `disclosed`), masked for anyone else and in every write's answer
// and event. Answers `c` itself when it holds none; else a copy kept in `storage`.
const domain::contact& shown(const contacts_state& st, const domain::contact& c,
                             const domain::audit_context* who, bool reading,
                             std::deque<domain::contact>& storage,
                             std::vector<std::string>* disclosed = nullptr) {
  if (!holds_sealed(st, c)) return c;
  auto& copy = storage.emplace_back(c);
  if (reading && disclosed && sees_sensitive(who) && st.data_key) {
    std::vector<std::string> opened;
    copy.custom_fields = domain::open_custom_values(
        c.custom_fields, st.sensitive,
        [&](std::string_view key, std::string_view sealed) {
          return st.data_key->open(persistence::sealed::contact_field(c.id, key), sealed);
        },
        opened);
    for (auto& k : opened) {
      auto name = "custom_fields." + k;
      if (std::find(disclosed->begin(), disclosed->end(), name) == disclosed->end())
        disclosed->push_back(std::move(name));
    }
  } else {
    copy.custom_fields = domain::mask_custom_values(c.custom_fields, st.sensitive);
  }
  return copy;
}

domain::contact masked(const contacts_state& st, const domain::contact& c) {
  std::deque<domain::contact> storage;
  return shown(st, c, nullptr, false, storage);
}

// Records that `who` was shown sensitive values (`fields`) of contacts `ids`: the row is queued
// before the answer leaves; false (the read is then refused with 503) when it cannot be.
bool audit_disclosure(const contacts_state& st, const domain::audit_context* who,
                      std::vector<std::int64_t> ids, std::vector<std::string> fields) {
  auto* writer = st.env.rt->opts.audit;
  if (!writer) return false;
  auto row =
      domain::make_audit(who, st.env.tenant_id, "contact",
                         ids.size() == 1 ? std::optional(ids[0]) : std::nullopt, "read_sensitive");
  row.fields = std::move(fields);
  if (ids.size() > 1) row.ids = std::move(ids);
  row.status = 200;
  return writer->record(std::move(row));
}

failure disclosure_unaudited() {
  return failure::of(errc::service_unavailable,
                     "the audit trail cannot record this read of sensitive values now; retry");
}

// Events of a contact change: {"contact_id", "contact": <single-contact shape>, then the
// event's own keys, "tenant_id"}. Written directly: this runs for every write, so no DOM
// round trip. `extra` is JSON text of the own keys (with a leading comma) or empty.
void contact_event(contacts_state& st, const char* name, const domain::contact& c,
                   std::string_view extra = {}) {
  if (!st.event_listeners) return; // nobody to tell: no row, no payload
  std::string out;
  out.reserve(512 + extra.size());
  out += "{\"contact_id\":";
  out += std::to_string(c.id);
  out += ",\"contact\":";
  // Events reach integrations and sit in the outbox: sensitive values never go with them.
  std::deque<domain::contact> storage;
  out += domain::encode_contact_full(shown(st, c, nullptr, false, storage), nullptr);
  out += extra;
  out += ",\"tenant_id\":";
  out += std::to_string(st.env.tenant_id);
  out += '}';
  st.open.sql.events.push_back({name, std::move(out), st.event_depth});
}

// contact.updated: also the names of the fields sent and their values before the change.
void update_event(contacts_state& st, const domain::contact& before, const domain::contact& c,
                  const std::vector<std::string>& changed) {
  std::string extra = ",\"changed\":[";
  for (std::size_t i = 0; i < changed.size(); ++i) {
    if (i) extra += ',';
    domain::append_json_string(extra, changed[i]);
  }
  extra += "],\"previous\":{";
  for (std::size_t i = 0; i < changed.size(); ++i) {
    if (i) extra += ',';
    domain::append_json_string(extra, changed[i]);
    extra += ':';
    append_field_value(extra, masked(st, before), changed[i]);
  }
  extra += '}';
  contact_event(st, "contact.updated", c, extra);
}

// Registers one write of the open batch: `applied` runs after COMMIT (apply + reply),
// `failed` if the transaction fails. Starts a commit when none is in flight.
void stage_write(contacts_actor* self, continuation applied,
                 std::function<void(const failure&)> failed) {
  auto& st = self->state;
  st.open.on_commit.push_back(std::move(applied));
  st.open.on_fail.push_back(std::move(failed));
  ++st.open.writes;
  if (!st.in_flight || st.open.writes >= max_batch) flush(self);
}

// Audits one change in the open batch: the row commits with the change or not at all
// (docs/compliance.md "Audit trail").
void audit_change(contacts_state& st, const domain::audit_context* who, const char* resource,
                  std::optional<std::int64_t> id, const char* action,
                  std::vector<std::string> fields, int status, std::vector<std::int64_t> ids = {}) {
  auto r = domain::make_audit(who, st.env.tenant_id, resource, id, action);
  r.fields = std::move(fields);
  r.status = status;
  r.ids = std::move(ids);
  st.open.sql.audit.push_back(std::move(r));
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

void apply_committed(contacts_state& st, const batch& b, const persistence::contact_batch& sql) {
  st.view->write([&](contacts_records& r) {
    for (auto& co : sql.company_upserts) r.companies[co.id] = co;
    for (auto& c : sql.contact_upserts) r.store.upsert(c);
    for (auto id : sql.contact_deletes) r.store.erase(id);
    for (auto id : sql.company_deletes) r.companies.erase(id);
  });
  for (auto& k : sql.keys) st.keys[k.key] = k;
  // Projection entries written by this batch and not overwritten since are now committed.
  for (auto it = st.p_contacts.begin(); it != st.p_contacts.end();)
    it = it->second.seq == b.seq ? st.p_contacts.erase(it) : std::next(it);
  for (auto it = st.p_companies.begin(); it != st.p_companies.end();)
    it = it->second.seq == b.seq ? st.p_companies.erase(it) : std::next(it);
  forget_committed(st.p_emails, b.seq);
  forget_committed(st.p_keys, b.seq);
}

// Hands the open batch to the group committer (docs/design.md), which may carry it in one
// transaction with other tenants' batches; one batch per tenant is in flight at a time.
void flush(contacts_actor* self) {
  flush_open_batch(
      self,
      [self](const batch& done, const persistence::contact_batch& sql) {
        apply_committed(self->state, done, sql);
      },
      [self](const failure& f) {
        auto& st = self->state;
        st.p_contacts.clear();
        st.p_companies.clear();
        st.p_emails.clear();
        st.p_keys.clear();
        if (f.code == errc::service_unavailable) reload(self);
      },
      [self] {
        flush(self);
        drain(self);
      });
}

// ---- field rules that need the state ----------------------------------------------------

std::int64_t next_timestamp(std::int64_t previous) {
  return std::max(domain::now_micros(), previous + 1);
}

// Adds `extra` to `tags`, skipping case-insensitive duplicates; returns the ones added.
std::vector<std::string> add_unique(std::vector<std::string>& tags,
                                    const std::vector<std::string>& extra) {
  std::vector<std::string> added;
  for (auto& t : extra) {
    auto lt = domain::ascii_lower(t);
    bool present = false;
    for (auto& e : tags) present = present || domain::ascii_lower(e) == lt;
    if (!present) {
      tags.push_back(t);
      added.push_back(t);
    }
  }
  return added;
}

// Applies `f` to `c` (a copy of the projected contact, or a new one). Collects issues with
// `loc_prefix` + field; returns errc::duplicate_email as a failure separately.
struct apply_result {
  std::vector<issue> issues;
  bool duplicate_email = false;
  std::vector<std::string> tags_added;
  std::optional<domain::contact_status> old_status;
};

apply_result apply_fields(contacts_state& st, domain::contact& c, const contact_fields& f,
                          bool creating, const std::vector<domain::loc_part>& loc_prefix) {
  apply_result out;
  auto loc = [&](const char* field) {
    auto l = loc_prefix;
    l.emplace_back(std::string(field));
    return l;
  };
  if (f.first_name) c.first_name = *f.first_name;
  if (f.last_name) c.last_name = *f.last_name;
  if (f.phone) c.phone = *f.phone;
  if (f.email) {
    c.email = *f.email;
    if (c.email) {
      auto owner = email_owner(st, *c.email);
      if (owner != 0 && owner != c.id) out.duplicate_email = true;
    }
  }
  if (f.company_id) {
    c.company_id = *f.company_id;
    if (c.company_id && !projected_company(st, *c.company_id))
      out.issues.push_back({loc("company_id"), "company not found in this tenant", "value_error"});
  }
  if (f.status) {
    if (c.status != *f.status) out.old_status = c.status;
    c.status = *f.status;
  }
  if (f.source) c.source = *f.source;
  if (f.tags) {
    std::vector<std::string> before = creating ? std::vector<std::string>{} : c.tags;
    c.tags.clear();
    add_unique(c.tags, *f.tags);
    std::vector<std::string> probe = before;
    out.tags_added = add_unique(probe, c.tags);
    if (c.tags.size() > max_tags)
      out.issues.push_back({loc("tags"), "at most 50 tags", "value_error"});
  }
  // A client that read a contact with its sensitive values masked and writes it back sends
  // "***": that is the mask, not a value, and the stored value stays.
  std::optional<std::string> patch = f.custom_fields;
  if (patch && !st.sensitive.empty())
    if (auto kept = domain::drop_masked_values(*patch, st.sensitive)) patch = std::move(*kept);
  if (patch) {
    auto merged = domain::merge_custom_values(c.custom_fields, *patch, creating);
    if (!merged) {
      out.issues.push_back(
          {loc("custom_fields"), "Input should be a valid dictionary", "value_error"});
    } else if (merged->size() > max_custom_fields_bytes) {
      out.issues.push_back({loc("custom_fields"), "custom fields exceed 16 KiB", "value_error"});
    } else {
      c.custom_fields = std::move(*merged);
    }
  }
  if (patch || creating) {
    auto written = patch.value_or("{}");
    for (auto& i : domain::check_custom_values(st.defs, domain::field_entity::contact, written,
                                               c.custom_fields, creating, loc_prefix))
      out.issues.push_back(std::move(i));
  }
  // Values of sensitive fields are sealed with the tenant's data key before they are kept
  // anywhere, memory included.
  if (f.custom_fields && !st.sensitive.empty() && out.issues.empty()) {
    if (!st.data_key) {
      // Unreachable while the definitions carry the key (serve checks at start that the
      // configured keys open every stored one): refused rather than kept in the clear.
      out.issues.push_back({loc("custom_fields"),
                            "sensitive values cannot be sealed now (no data key); retry",
                            "value_error"});
      return out;
    }
    if (auto sealed = domain::seal_custom_values(
            c.custom_fields, st.sensitive, [&](std::string_view key, std::string_view v) {
              return st.data_key->seal(persistence::sealed::contact_field(c.id, key), v);
            }))
      c.custom_fields = std::move(*sealed);
  }
  return out;
}

failure duplicate_email_failure() {
  return failure::of(errc::duplicate_email, "a contact with this e-mail already exists");
}

// Stages the events of one contact change (`before` is null for a create).
void contact_events(contacts_state& st, const domain::contact* before, const domain::contact& c,
                    const apply_result& r, const std::vector<std::string>& fields) {
  if (!st.event_listeners) return;
  if (!before) {
    contact_event(st, "contact.created", c);
  } else {
    update_event(st, *before, c, fields);
  }
  if (r.old_status && before) {
    std::string extra = ",\"from\":";
    domain::append_json_string(extra, domain::to_string(*r.old_status));
    extra += ",\"to\":";
    domain::append_json_string(extra, domain::to_string(c.status));
    extra += ",\"previous\":{\"status\":";
    domain::append_json_string(extra, domain::to_string(*r.old_status));
    extra += '}';
    contact_event(st, "contact.status_changed", c, extra);
  }
  for (auto& t : r.tags_added) {
    std::string extra = ",\"tag\":";
    domain::append_json_string(extra, t);
    contact_event(st, "contact.tag_added", c, extra);
  }
}

std::vector<std::string> fields_sent(const contact_fields& f) {
  std::vector<std::string> out;
  if (f.first_name) out.emplace_back("first_name");
  if (f.last_name) out.emplace_back("last_name");
  if (f.email) out.emplace_back("email");
  if (f.phone) out.emplace_back("phone");
  if (f.company_id) out.emplace_back("company_id");
  if (f.status) out.emplace_back("status");
  if (f.source) out.emplace_back("source");
  if (f.tags) out.emplace_back("tags");
  if (f.custom_fields) out.emplace_back("custom_fields");
  return out;
}

// ---- idempotency ----------------------------------------------------------------------

enum class key_state : std::uint8_t { fresh, replay, pending, conflict };

key_state check_key(contacts_state& st, const idempotency& key,
                    persistence::idempotency_record** stored) {
  if (key.key.empty()) return key_state::fresh;
  if (auto it = st.p_keys.find(key.key); it != st.p_keys.end())
    return it->second.second == key.request_hash ? key_state::pending : key_state::conflict;
  auto it = st.keys.find(key.key);
  if (it == st.keys.end() || it->second.created_at < domain::now_micros() - idempotency_window)
    return key_state::fresh;
  if (it->second.request_hash != key.request_hash) return key_state::conflict;
  *stored = &it->second;
  return key_state::replay;
}

// Handles a key already known; true if the request is answered (or will be).
bool answer_known_key(contacts_actor* self, const idempotency& key,
                      const callback<stored_response>& reply) {
  auto& st = self->state;
  persistence::idempotency_record* stored = nullptr;
  switch (check_key(st, key, &stored)) {
  case key_state::fresh: return false;
  case key_state::conflict:
    reply(failure::of(errc::conflict, "this Idempotency-Key was used with a different request"));
    return true;
  case key_state::replay:
    reply(stored_response{stored->status, stored->response, std::nullopt});
    return true;
  case key_state::pending: {
    // The first request with this key is committing: answer as it is answered.
    auto answer = [self, key = key.key, reply] {
      auto& keys = self->state.keys;
      if (auto it = keys.find(key); it != keys.end())
        reply(stored_response{it->second.status, it->second.response, std::nullopt});
      else
        reply(failure::of(errc::service_unavailable, "retry"));
    };
    auto& b = st.p_keys[key.key].first == st.open.seq ? st.open : *st.in_flight;
    b.on_commit.push_back(answer);
    b.on_fail.push_back(fail_with(reply));
    return true;
  }
  }
  return false;
}

void stage_key(contacts_state& st, const idempotency& key, int status, const std::string& body) {
  if (key.key.empty()) return;
  auto now = domain::now_micros();
  persistence::forget_expired_keys(st.keys, st.keys_pruned_at, now);
  st.open.sql.keys.push_back({key.key, key.request_hash, status, body, now});
  st.p_keys[key.key] = {st.open.seq, key.request_hash};
}

// CSV cells arrive as text: convert those under a defined contact field to its type.
std::string convert_cells(const domain::field_definitions& defs, const std::string& text) {
  json::error_code ec;
  auto v = crm::domain::parse_json(text, ec);
  if (ec || !v.is_object()) return text;
  for (auto& kv : v.as_object()) {
    auto f = defs.find(domain::field_entity::contact,
                       std::string_view(kv.key().data(), kv.key().size()));
    auto s = kv.value().if_string();
    if (!f || !s) continue;
    if (auto converted = domain::cell_to_json(f->type, std::string_view(s->data(), s->size())))
      kv.value() = crm::domain::parse_json(*converted, ec);
  }
  return json::serialize(v);
}

// Removes key `name` from a custom-fields JSON text; nothing if it was not there.
std::optional<std::string> without_key(const std::string& text, const std::string& name) {
  if (text.find('"' + name + '"') == std::string::npos) return std::nullopt;
  json::error_code ec;
  auto v = crm::domain::parse_json(text, ec);
  if (ec || !v.is_object() || !v.as_object().contains(name)) return std::nullopt;
  v.as_object().erase(name);
  return json::serialize(v);
}

// Hard delete of a custom field (exclusive): one transaction removes the definition and every
// value under its name; memory follows after COMMIT, within this one actor step, so no request
// ever sees the field gone with its values still there, or the reverse.
void do_purge(contacts_actor* self, domain::custom_field f, callback<std::int64_t> reply) {
  auto& st = self->state;
  st.purging = true;
  auto me = caf::actor_cast<caf::actor>(self);
  st.env.pool->run<std::int64_t>(
      [f, audit = std::vector{persistence::purge_audit(reply.who(), f)}](persistence::pg_conn& c) {
        return persistence::purge_field(c, f, audit);
      },
      [me, self, f, reply](domain::outcome<std::int64_t> r) mutable {
        caf::anon_send(me, resume_atom::value, continuation{[self, f, reply, r]() mutable {
                         auto& st = self->state;
                         st.purging = false;
                         if (r) {
                           if (f.entity == domain::field_entity::contact) {
                             std::vector<domain::contact> changed;
                             domain::contact_query all;
                             all.limit = 0;
                             st.store().for_each(all, [&](const domain::contact& c) {
                               if (auto next = without_key(c.custom_fields, f.name)) {
                                 changed.push_back(c);
                                 changed.back().custom_fields = std::move(*next);
                               }
                             });
                             st.view->write([&](contacts_records& r) {
                               for (auto& c : changed) r.store.upsert(std::move(c));
                             });
                           } else if (f.entity == domain::field_entity::company) {
                             st.view->write([&](contacts_records& r) {
                               for (auto& [id, co] : r.companies)
                                 if (auto next = without_key(co.custom_fields, f.name))
                                   co.custom_fields = std::move(*next);
                             });
                           }
                           std::erase_if(st.defs.fields, [&](const domain::custom_field& d) {
                             return d.id == f.id;
                           });
                           st.defs.version = std::max(st.defs.version, *r);
                           definitions_changed(st);
                         }
                         reply(std::move(r));
                         drain(self);
                       }});
      });
}

// ---- handlers ---------------------------------------------------------------------------

void do_create(contacts_actor* self, contact_fields f, idempotency key,
               callback<stored_response> reply) {
  auto& st = self->state;
  if (answer_known_key(self, key, reply)) return;
  domain::contact c;
  c.id = st.contact_ids.front();
  c.tenant_id = st.env.tenant_id;
  auto r = apply_fields(st, c, f, true, {"body"});
  r.issues.insert(r.issues.begin(), f.issues.begin(), f.issues.end());
  if (!r.issues.empty()) return reply(failure::invalid(std::move(r.issues)));
  if (r.duplicate_email) return reply(duplicate_email_failure());
  st.contact_ids.pop_front();
  c.created_at = c.updated_at = domain::now_micros();
  auto body = domain::encode_contact_created(masked(st, c));
  audit_change(st, reply.who(), "contact", c.id, "create", domain::contact_field_names(c), 201);
  stage_contact(st, nullptr, c);
  contact_events(st, nullptr, c, r, {});
  stage_key(st, key, 201, body);
  stage_write(
      self,
      [reply, body, id = c.id] {
        reply(stored_response{201, body, id});
      },
      fail_with(reply));
}

void do_match(contacts_actor* self, contact_match_request req, callback<contact_match> reply) {
  auto& st = self->state;
  // A match that is still being committed is answered after its COMMIT (never acknowledge
  // what might not be stored).
  auto answer = [&](const domain::contact& c) {
    if (!st.p_contacts.count(c.id)) return reply(contact_match{masked(st, c), false});
    stage_write(
        self,
        [self, reply, id = c.id] {
          auto now = self->state.store().find(id);
          if (!now) return reply(missing_contact());
          reply(contact_match{masked(self->state, *now), false});
        },
        fail_with(reply));
  };
  if (req.known_id)
    if (auto c = projected_contact(st, *req.known_id)) return answer(*c);
  auto by_phone = req.phone ? phone_owner(st, *req.phone) : 0;
  auto by_email = req.email ? email_owner(st, *req.email) : 0;
  if (by_phone && by_email && by_phone != by_email)
    // Both named, so that an operator can tell which two records are the same patient.
    return reply(failure::of(
        errc::conflict, "the contact block matches two different contacts: the phone contact " +
                            std::to_string(by_phone) + ", the e-mail contact " +
                            std::to_string(by_email)));
  if (auto id = by_phone ? by_phone : by_email) {
    if (auto c = projected_contact(st, id)) return answer(*c);
  }
  domain::contact c;
  c.id = st.contact_ids.front();
  c.tenant_id = st.env.tenant_id;
  auto r = apply_fields(st, c, req.create, true, {"body", "contact"});
  if (!r.issues.empty()) return reply(failure::invalid(std::move(r.issues)));
  if (r.duplicate_email) return reply(duplicate_email_failure());
  st.contact_ids.pop_front();
  c.created_at = c.updated_at = domain::now_micros();
  audit_change(st, reply.who(), "contact", c.id, "create", domain::contact_field_names(c), 0);
  stage_contact(st, nullptr, c);
  contact_events(st, nullptr, c, r, {});
  stage_write(
      self,
      [reply, c = masked(st, c)] {
        reply(contact_match{c, true});
      },
      fail_with(reply));
}

void do_bulk(contacts_actor* self, std::vector<contact_fields> items,
             std::vector<std::vector<issue>> pre_errors, idempotency key, std::string row_loc,
             callback<stored_response> reply) {
  auto& st = self->state;
  if (answer_known_key(self, key, reply)) return;
  std::vector<domain::bulk_item> results(items.size());
  std::vector<std::int64_t> created;
  auto now = domain::now_micros();
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::vector<domain::loc_part> prefix{std::string("body"), row_loc,
                                         static_cast<std::int64_t>(i)};
    if (row_loc == "rows" && items[i].custom_fields)
      items[i].custom_fields = convert_cells(st.defs, *items[i].custom_fields);
    domain::contact c;
    c.id = st.contact_ids.front();
    c.tenant_id = st.env.tenant_id;
    auto r = apply_fields(st, c, items[i], true, prefix);
    if (i < pre_errors.size())
      r.issues.insert(r.issues.begin(), pre_errors[i].begin(), pre_errors[i].end());
    if (r.duplicate_email) {
      auto l = prefix;
      l.emplace_back(std::string("email"));
      r.issues.push_back({l, "a contact with this e-mail already exists", "duplicate_email"});
    }
    if (!r.issues.empty()) {
      results[i].errors = std::move(r.issues);
      continue;
    }
    st.contact_ids.pop_front();
    c.created_at = c.updated_at = now;
    results[i].id = c.id;
    created.push_back(c.id);
    stage_contact(st, nullptr, c);
    contact_events(st, nullptr, c, r, {});
  }
  auto body = domain::encode_bulk_results(results);
  // A request that created nothing stores no answer for its key: sent again (corrected), it is
  // a new request, not a replay of the refusal.
  if (!created.empty()) stage_key(st, key, 200, body);
  // One row for the whole request, naming every contact it created.
  audit_change(st, reply.who(), "contact", std::nullopt,
               row_loc == "rows" ? "import" : "bulk_create", {}, 200, std::move(created));
  stage_write(
      self,
      [reply, body] {
        reply(stored_response{200, body, std::nullopt});
      },
      fail_with(reply));
}

void do_update(contacts_actor* self, std::int64_t id, contact_fields f,
               callback<domain::contact> reply) {
  auto& st = self->state;
  auto cur = projected_contact(st, id);
  if (!cur) {
    // A body that fails validation is 422 whatever the id (validation comes first).
    if (!f.issues.empty()) return reply(failure::invalid(std::move(f.issues)));
    if (st.p_contacts.count(id)) return reply(missing_contact()); // deleted, not yet committed
    return reply_missing(self, persistence::record_kind::contact, id, reply);
  }
  auto before = *cur;
  auto c = before;
  auto r = apply_fields(st, c, f, false, {"body"});
  r.issues.insert(r.issues.begin(), f.issues.begin(), f.issues.end());
  if (!r.issues.empty()) return reply(failure::invalid(std::move(r.issues)));
  if (r.duplicate_email) return reply(duplicate_email_failure());
  c.updated_at = next_timestamp(before.updated_at);
  audit_change(st, reply.who(), "contact", id, "update", domain::changed_fields(before, c), 200);
  stage_contact(st, &before, c);
  contact_events(st, &before, c, r, fields_sent(f));
  stage_write(
      self, [reply, c = masked(st, c)] { reply(c); }, fail_with(reply));
}

void do_delete(contacts_actor* self, std::int64_t id, callback<domain::done> reply, bool erase) {
  auto& st = self->state;
  auto cur = projected_contact(st, id);
  if (!cur) {
    if (st.p_contacts.count(id)) return reply(missing_contact());
    return reply_missing(self, persistence::record_kind::contact, id, reply);
  }
  auto before = *cur;
  audit_change(st, reply.who(), "contact", id, erase ? "erase" : "delete",
               domain::contact_field_names(before), erase ? 200 : 204);
  stage_contact_delete(st, before);
  if (!erase) {
    contact_event(st, "contact.deleted", before);
  } else if (st.event_listeners) {
    st.open.sql.events.push_back(
        {"contact.deleted",
         "{\"contact_id\":" + std::to_string(id) +
             ",\"erased\":true,\"tenant_id\":" + std::to_string(st.env.tenant_id) + "}",
         st.event_depth});
  }
  // The deals actor hears of it before the client does (docs/pipeline.md).
  stage_write(
      self,
      [self, id, reply] {
        contact_deleted(*self->state.env.rt->owner, self->state.env.tenant_id, id);
        forget_contact_notes(*self->state.env.rt->owner, self->state.env.tenant_id, id);
        forget_contact_appointments(*self->state.env.rt->owner, self->state.env.tenant_id, id);
        reply(domain::done{});
      },
      fail_with(reply));
}

std::optional<domain::company> committed_company(contacts_state& st,
                                                 const std::optional<std::int64_t>& id) {
  if (!id) return std::nullopt;
  auto it = st.companies().find(*id);
  if (it == st.companies().end()) return std::nullopt;
  return it->second;
}

void do_add_tags(contacts_actor* self, std::int64_t id, std::vector<std::string> tags,
                 callback<contact_view> reply) {
  auto& st = self->state;
  auto cur = projected_contact(st, id);
  if (!cur) {
    if (st.p_contacts.count(id)) return reply(missing_contact());
    return reply_missing(self, persistence::record_kind::contact, id, reply);
  }
  auto before = *cur;
  auto c = before;
  apply_result r;
  r.tags_added = add_unique(c.tags, tags);
  if (c.tags.size() > max_tags)
    return reply(failure::invalid({{{"body", "tags"}, "at most 50 tags", "value_error"}}));
  if (r.tags_added.empty()) {
    // Nothing changes: answer with the contact as it will be once staged writes commit.
    stage_write(
        self,
        [self, reply, id] {
          auto& s = self->state;
          auto now = s.store().find(id);
          if (!now) return reply(missing_contact());
          reply(contact_view{*now, committed_company(s, now->company_id)});
        },
        fail_with(reply));
    return;
  }
  c.updated_at = next_timestamp(before.updated_at);
  audit_change(st, reply.who(), "contact", id, "update", {"tags"}, 200);
  stage_contact(st, &before, c);
  contact_events(st, &before, c, r, {"tags"});
  stage_write(
      self,
      [self, reply, c = masked(st, c)] {
        reply(contact_view{c, committed_company(self->state, c.company_id)});
      },
      fail_with(reply));
}

void do_remove_tag(contacts_actor* self, std::int64_t id, const std::string& tag,
                   callback<domain::done> reply) {
  auto& st = self->state;
  auto cur = projected_contact(st, id);
  if (!cur) {
    if (st.p_contacts.count(id)) return reply(missing_contact());
    return reply_missing(self, persistence::record_kind::contact, id, reply);
  }
  auto before = *cur;
  auto c = before;
  auto lt = domain::ascii_lower(tag);
  auto it = std::find_if(c.tags.begin(), c.tags.end(),
                         [&](const std::string& t) { return domain::ascii_lower(t) == lt; });
  if (it == c.tags.end()) return reply(failure::of(errc::not_found, "the contact has no such tag"));
  c.tags.erase(it);
  c.updated_at = next_timestamp(before.updated_at);
  audit_change(st, reply.who(), "contact", id, "update", {"tags"}, 204);
  stage_contact(st, &before, c);
  contact_events(st, &before, c, apply_result{}, {"tags"});
  stage_write(
      self, [reply] { reply(domain::done{}); }, fail_with(reply));
}

// Exclusive (runs with nothing staged or in flight), so the committed store is the whole truth.
void do_rename_tag(contacts_actor* self, const std::string& from, const std::string& to,
                   callback<domain::tag_count> reply) {
  auto& st = self->state;
  auto ids = st.store().with_tag(from);
  if (ids.empty()) return reply(failure::of(errc::not_found, "no contact has this tag"));
  auto lfrom = domain::ascii_lower(from);
  auto lto = domain::ascii_lower(to);
  auto now = domain::now_micros();
  audit_change(st, reply.who(), "contact", std::nullopt, "rename_tag", {"tags"}, 200, ids);
  for (auto id : ids) {
    auto before = *st.store().find(id);
    auto c = before;
    std::vector<std::string> next;
    for (auto& t : c.tags) {
      auto lt = domain::ascii_lower(t);
      std::vector<std::string> one{lt == lfrom || lt == lto ? to : t};
      add_unique(next, one);
    }
    c.tags = std::move(next);
    c.updated_at = std::max(now, before.updated_at + 1);
    stage_contact(st, &before, c);
    contact_events(st, &before, c, apply_result{}, {"tags"});
  }
  stage_write(
      self,
      [self, reply, lto, to] {
        for (auto& t : self->state.store().tags())
          if (domain::ascii_lower(t.name) == lto) return reply(domain::tag_count{to, t.count});
        reply(domain::tag_count{to, 0});
      },
      fail_with(reply));
}

// ---- companies -------------------------------------------------------------------------

std::vector<issue> apply_company_fields(const contacts_state& st, domain::company& c,
                                        const company_fields& f, bool creating) {
  std::vector<issue> out;
  if (f.name) c.name = *f.name;
  if (f.domain) c.domain = *f.domain;
  if (f.phone) c.phone = *f.phone;
  if (f.industry) c.industry = *f.industry;
  if (f.address) c.address = *f.address;
  if (f.custom_fields) {
    auto merged = domain::merge_custom_values(c.custom_fields, *f.custom_fields, creating);
    if (!merged)
      out.push_back(
          {{"body", "custom_fields"}, "Input should be a valid dictionary", "value_error"});
    else if (merged->size() > max_custom_fields_bytes)
      out.push_back({{"body", "custom_fields"}, "custom fields exceed 16 KiB", "value_error"});
    else
      c.custom_fields = std::move(*merged);
  }
  if (f.custom_fields || creating) {
    for (auto& i : domain::check_custom_values(st.defs, domain::field_entity::company,
                                               f.custom_fields.value_or("{}"), c.custom_fields,
                                               creating, {std::string("body")}))
      out.push_back(std::move(i));
  }
  return out;
}

void do_create_company(contacts_actor* self, company_fields f, callback<domain::company> reply) {
  auto& st = self->state;
  domain::company c;
  c.id = st.company_ids.front();
  c.tenant_id = st.env.tenant_id;
  auto issues = apply_company_fields(st, c, f, true);
  issues.insert(issues.begin(), f.issues.begin(), f.issues.end());
  if (!issues.empty()) return reply(failure::invalid(std::move(issues)));
  st.company_ids.pop_front();
  c.created_at = c.updated_at = domain::now_micros();
  audit_change(st, reply.who(), "company", c.id, "create",
               domain::changed_fields(domain::company{}, c), 201);
  stage_company(st, c);
  stage_write(
      self, [reply, c] { reply(c); }, fail_with(reply));
}

void do_update_company(contacts_actor* self, std::int64_t id, company_fields f,
                       callback<domain::company> reply) {
  auto& st = self->state;
  auto cur = projected_company(st, id);
  if (!cur) {
    if (!f.issues.empty()) return reply(failure::invalid(std::move(f.issues)));
    if (st.p_companies.count(id)) return reply(missing_company());
    return reply_missing(self, persistence::record_kind::company, id, reply);
  }
  auto c = *cur;
  auto issues = apply_company_fields(st, c, f, false);
  issues.insert(issues.begin(), f.issues.begin(), f.issues.end());
  if (!issues.empty()) return reply(failure::invalid(std::move(issues)));
  c.updated_at = next_timestamp(cur->updated_at);
  audit_change(st, reply.who(), "company", id, "update", domain::changed_fields(*cur, c), 200);
  stage_company(st, c);
  stage_write(
      self, [reply, c] { reply(c); }, fail_with(reply));
}

// Exclusive: its contacts lose their company_id in the same transaction.
void do_delete_company(contacts_actor* self, std::int64_t id, callback<domain::done> reply) {
  auto& st = self->state;
  auto it = st.companies().find(id);
  if (it == st.companies().end())
    return reply_missing(self, persistence::record_kind::company, id, reply);
  auto now = domain::now_micros();
  audit_change(st, reply.who(), "company", id, "delete", {}, 204, st.store().of_company(id));
  for (auto cid : st.store().of_company(id)) {
    auto before = *st.store().find(cid);
    auto c = before;
    c.company_id = std::nullopt;
    c.updated_at = std::max(now, before.updated_at + 1);
    stage_contact(st, &before, c);
    contact_events(st, &before, c, apply_result{}, {"company_id"});
  }
  st.open.sql.company_deletes.push_back(id);
  st.p_companies[id] = {st.open.seq, std::nullopt};
  stage_write(
      self,
      [self, id, reply] {
        company_deleted(*self->state.env.rt->owner, self->state.env.tenant_id, id);
        reply(domain::done{});
      },
      fail_with(reply));
}

company_list list_companies_of(contacts_state& st, const company_query& q) {
  auto lq = domain::ascii_lower(q.search);
  std::vector<const domain::company*> hits;
  for (auto& [id, c] : st.companies()) {
    if (q.industry && c.industry != q.industry) continue;
    if (!lq.empty()) {
      bool m = domain::ascii_lower(c.name).find(lq) != std::string::npos ||
               (c.domain && domain::ascii_lower(*c.domain).find(lq) != std::string::npos);
      if (!m) continue;
    }
    hits.push_back(&c);
  }
  auto key = [&](const domain::company* c) -> std::optional<std::string> {
    if (q.sort == "name") return domain::ascii_lower(c->name);
    if (q.sort == "domain")
      return c->domain ? std::optional(domain::ascii_lower(*c->domain)) : std::nullopt;
    if (q.sort == "industry")
      return c->industry ? std::optional(domain::ascii_lower(*c->industry)) : std::nullopt;
    return std::nullopt;
  };
  auto num = [&](const domain::company* c) {
    if (q.sort == "created_at") return c->created_at;
    if (q.sort == "updated_at") return c->updated_at;
    return c->id;
  };
  bool text = q.sort == "name" || q.sort == "domain" || q.sort == "industry";
  std::stable_sort(hits.begin(), hits.end(), [&](auto* a, auto* b) {
    int cmp = 0;
    if (text) {
      auto ka = key(a), kb = key(b);
      if (ka && kb)
        cmp = ka->compare(*kb);
      else if (ka != kb)
        cmp = ka ? -1 : 1; // absent last (ascending)
      if (q.descending) cmp = -cmp;
    } else {
      auto na = num(a), nb = num(b);
      cmp = na < nb ? -1 : na > nb ? 1 : 0;
      if (q.descending) cmp = -cmp;
    }
    if (cmp != 0) return cmp < 0;
    return a->id < b->id;
  });
  company_list out;
  out.total = static_cast<std::int64_t>(hits.size());
  for (auto i = q.offset; i < out.total && static_cast<std::int64_t>(out.items.size()) < q.limit;
       ++i)
    out.items.push_back(*hits[static_cast<std::size_t>(i)]);
  return out;
}

// ---- behaviour -------------------------------------------------------------------------

caf::behavior contacts_behavior(contacts_actor* self, tenant_env env) {
  auto& st0 = self->state;
  st0.env = env;
  st0.view = env.stats->contacts;
  st0.view_owner = st0.view->claim();
  st0.open.seq = st0.next_seq++;
  auto measure = instrument(self, child_kind::contacts);
  return {
      [self, measure](resume_atom, continuation& k) {
        auto _ = measure();
        k();
      },
      [self, measure](create_atom, contact_fields& f, idempotency& key,
                      callback<stored_response>& reply) {
        auto _ = measure();
        when_ready(
            self, need::write, fail_with(reply),
            [self, f = std::move(f), key = std::move(key), reply]() mutable {
              do_create(self, std::move(f), std::move(key), reply);
            },
            1);
      },
      [self, measure](find_atom, contact_match_request& req, callback<contact_match>& reply) {
        auto _ = measure();
        when_ready(
            self, need::write, fail_with(reply),
            [self, req = std::move(req), reply]() mutable {
              do_match(self, std::move(req), reply);
            },
            1);
      },
      [self, measure](bulk_atom, std::vector<contact_fields>& items,
                      std::vector<std::vector<issue>>& pre, idempotency& key, std::string& row_loc,
                      callback<stored_response>& reply) {
        auto _ = measure();
        auto n = items.size();
        when_ready(
            self, need::write, fail_with(reply),
            [self, items = std::move(items), pre = std::move(pre), key = std::move(key),
             row_loc = std::move(row_loc), reply]() mutable {
              do_bulk(self, std::move(items), std::move(pre), std::move(key), std::move(row_loc),
                      reply);
            },
            n);
      },
      [self, measure](get_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, id, reply] {
          auto& st = self->state;
          auto c = st.store().find(id);
          if (!c) return reply_missing(self, persistence::record_kind::contact, id, reply);
          auto co = company_of(st.view->records(), *c);
          std::deque<domain::contact> storage;
          std::vector<std::string> disclosed;
          const auto& view = shown(st, *c, reply.who(), true, storage, &disclosed);
          if (!disclosed.empty() && !audit_disclosure(st, reply.who(), {id}, disclosed))
            return reply(disclosure_unaudited());
          reply(domain::encode_contact_full(view, co));
        });
      },
      [self, measure](update_atom, std::int64_t id, contact_fields& f,
                      callback<domain::contact>& reply) {
        auto _ = measure();
        when_ready(self, need::write, fail_with(reply),
                   [self, id, f = std::move(f), reply]() mutable {
                     self->state.event_depth = f.chain_depth;
                     do_update(self, id, std::move(f), reply);
                     self->state.event_depth = 0;
                   });
      },
      [self, measure](delete_atom, std::int64_t id, callback<domain::done>& reply, bool erase) {
        auto _ = measure();
        when_ready(self, need::write, fail_with(reply),
                   [self, id, reply, erase] { do_delete(self, id, reply, erase); });
      },
      [self, measure](list_atom, domain::contact_query& q, int page, int per_page,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply),
                   [self, q = std::move(q), page, per_page, reply] {
                     // List items carry no custom fields (contract §4): nothing sensitive.
                     reply(page_json(self->state.view->records(), q, page, per_page));
                   });
      },
      [self, measure](match_atom, domain::contact_query& q,
                      callback<std::vector<std::int64_t>>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, q = std::move(q), reply] {
          std::vector<std::int64_t> ids;
          self->state.store().for_each(q, [&](const domain::contact& c) { ids.push_back(c.id); });
          reply(std::move(ids));
        });
      },
      [self, measure](fetch_atom, std::vector<std::int64_t>& ids,
                      callback<std::vector<domain::contact>>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, ids = std::move(ids), reply] {
          auto& st = self->state;
          std::vector<domain::contact> out;
          out.reserve(ids.size());
          std::vector<std::string> disclosed;
          std::vector<std::int64_t> shown_ids;
          for (auto id : ids)
            if (auto c = st.store().find(id)) {
              std::deque<domain::contact> storage;
              auto before = disclosed.size();
              out.push_back(shown(st, *c, reply.who(), true, storage, &disclosed));
              if (disclosed.size() > before) shown_ids.push_back(id);
            }
          if (!disclosed.empty() &&
              !audit_disclosure(st, reply.who(), std::move(shown_ids), disclosed))
            return reply(disclosure_unaudited());
          reply(std::move(out));
        });
      },
      [self, measure](tags_atom, callback<std::vector<domain::tag_count>>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply),
                   [self, reply] { reply(self->state.store().tags()); });
      },
      [self, measure](tag_add_atom, std::int64_t id, std::vector<std::string>& tags,
                      callback<contact_view>& reply, int depth) {
        auto _ = measure();
        when_ready(self, need::write, fail_with(reply),
                   [self, id, tags = std::move(tags), reply, depth]() mutable {
                     self->state.event_depth = depth;
                     do_add_tags(self, id, std::move(tags), reply);
                     self->state.event_depth = 0;
                   });
      },
      [self, measure](tag_rm_atom, std::int64_t id, std::string& tag, callback<domain::done>& reply,
                      int depth) {
        auto _ = measure();
        when_ready(self, need::write, fail_with(reply),
                   [self, id, tag = std::move(tag), reply, depth] {
                     self->state.event_depth = depth;
                     do_remove_tag(self, id, tag, reply);
                     self->state.event_depth = 0;
                   });
      },
      [self, measure](tag_mv_atom, std::string& from, std::string& to,
                      callback<domain::tag_count>& reply) {
        auto _ = measure();
        when_ready(self, need::exclusive, fail_with(reply),
                   [self, from = std::move(from), to = std::move(to), reply] {
                     do_rename_tag(self, from, to, reply);
                   });
      },
      [self, measure](co_new_atom, company_fields& f, callback<domain::company>& reply) {
        auto _ = measure();
        when_ready(
            self, need::write, fail_with(reply),
            [self, f = std::move(f), reply]() mutable {
              do_create_company(self, std::move(f), reply);
            },
            0, 1);
      },
      [self, measure](co_get_atom, std::int64_t id, callback<domain::company>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, id, reply] {
          auto& st = self->state;
          auto it = st.companies().find(id);
          if (it == st.companies().end())
            return reply_missing(self, persistence::record_kind::company, id, reply);
          reply(it->second);
        });
      },
      [self, measure](co_put_atom, std::int64_t id, company_fields& f,
                      callback<domain::company>& reply) {
        auto _ = measure();
        when_ready(self, need::write, fail_with(reply),
                   [self, id, f = std::move(f), reply]() mutable {
                     do_update_company(self, id, std::move(f), reply);
                   });
      },
      [self, measure](co_del_atom, std::int64_t id, callback<domain::done>& reply) {
        auto _ = measure();
        when_ready(self, need::exclusive, fail_with(reply),
                   [self, id, reply] { do_delete_company(self, id, reply); });
      },
      [self, measure](co_list_atom, company_query& q, callback<company_list>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply),
                   [self, q = std::move(q), reply] { reply(list_companies_of(self->state, q)); });
      },
      [self](defs_atom, domain::field_definitions& defs) {
        auto& st = self->state;
        if (defs.version > st.defs.version) st.defs = std::move(defs);
        definitions_changed(st);
      },
      [self, measure](purge_atom, domain::custom_field& f, callback<std::int64_t>& reply) {
        auto _ = measure();
        when_ready(
            self, need::exclusive, fail_with(reply),
            [self, f = std::move(f), reply]() mutable { do_purge(self, std::move(f), reply); });
      },
      [self](listeners_atom, bool any) {
        self->state.event_listeners = any;
        if (self->state.loading) self->state.listeners_told_while_loading = true;
      },
      [self](stop_atom) {
        auto& st = self->state;
        st.stopping = true;
        if (idle_pipeline(st) && st.waiting.empty()) self->quit();
      },
  };
}

void send(runtime& rt, std::int64_t tenant, caf::message m) {
  rt.internals().route(tenant, child_kind::contacts, std::move(m));
}

} // namespace

caf::actor spawn_contacts(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(contacts_behavior, env);
}

void create_contact(runtime& rt, std::int64_t tenant, contact_fields f, idempotency key,
                    callback<stored_response> reply) {
  send(rt, tenant,
       caf::make_message(create_atom::value, std::move(f), std::move(key), std::move(reply)));
}

void bulk_create_contacts(runtime& rt, std::int64_t tenant, std::vector<contact_fields> items,
                          std::vector<std::vector<issue>> pre_errors, idempotency key,
                          std::string row_loc, callback<stored_response> reply) {
  send(rt, tenant,
       caf::make_message(bulk_atom::value, std::move(items), std::move(pre_errors), std::move(key),
                         std::move(row_loc), std::move(reply)));
}

void match_contact(runtime& rt, std::int64_t tenant, contact_match_request req,
                   callback<contact_match> reply) {
  send(rt, tenant, caf::make_message(find_atom::value, std::move(req), std::move(reply)));
}

// Reads of a live tenant are answered on the calling thread from its committed contacts when
// the view is current (docs/design.md "Reads on the I/O thread"); else by the actor, which also
// answers an id it does not hold (403 or 404) and anything sensitive.
void get_contact(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  if (auto view = rt.internals().contacts_view_of(tenant)) {
    std::string body;
    view->read([&](const contacts_records& r) {
      if (auto c = r.store.find(id)) body = domain::encode_contact_full(*c, company_of(r, *c));
    });
    if (!body.empty()) return reply(std::move(body));
  }
  send(rt, tenant, caf::make_message(get_atom::value, id, std::move(reply)));
}

void update_contact(runtime& rt, std::int64_t tenant, std::int64_t id, contact_fields f,
                    callback<domain::contact> reply) {
  send(rt, tenant, caf::make_message(update_atom::value, id, std::move(f), std::move(reply)));
}

void delete_contact(runtime& rt, std::int64_t tenant, std::int64_t id, callback<domain::done> reply,
                    bool erase) {
  send(rt, tenant, caf::make_message(delete_atom::value, id, std::move(reply), erase));
}

void list_contacts(runtime& rt, std::int64_t tenant, domain::contact_query q, int page,
                   int per_page, callback<std::string> reply) {
  if (auto view = rt.internals().contacts_view_of(tenant)) {
    std::string body;
    if (view->read([&](const contacts_records& r) { body = page_json(r, q, page, per_page); },
                   contacts_view::shows::no_custom_fields))
      return reply(std::move(body));
  }
  send(rt, tenant,
       caf::make_message(list_atom::value, std::move(q), page, per_page, std::move(reply)));
}

void match_contacts(runtime& rt, std::int64_t tenant, domain::contact_query q,
                    callback<std::vector<std::int64_t>> reply) {
  send(rt, tenant, caf::make_message(match_atom::value, std::move(q), std::move(reply)));
}

void fetch_contacts(runtime& rt, std::int64_t tenant, std::vector<std::int64_t> ids,
                    callback<std::vector<domain::contact>> reply) {
  send(rt, tenant, caf::make_message(fetch_atom::value, std::move(ids), std::move(reply)));
}

void list_tags(runtime& rt, std::int64_t tenant, callback<std::vector<domain::tag_count>> reply) {
  send(rt, tenant, caf::make_message(tags_atom::value, std::move(reply)));
}

void add_tags(runtime& rt, std::int64_t tenant, std::int64_t id, std::vector<std::string> tags,
              callback<contact_view> reply, int chain_depth) {
  send(rt, tenant,
       caf::make_message(tag_add_atom::value, id, std::move(tags), std::move(reply), chain_depth));
}

void remove_tag(runtime& rt, std::int64_t tenant, std::int64_t id, std::string tag,
                callback<domain::done> reply, int chain_depth) {
  send(rt, tenant,
       caf::make_message(tag_rm_atom::value, id, std::move(tag), std::move(reply), chain_depth));
}

void rename_tag(runtime& rt, std::int64_t tenant, std::string from, std::string to,
                callback<domain::tag_count> reply) {
  send(rt, tenant,
       caf::make_message(tag_mv_atom::value, std::move(from), std::move(to), std::move(reply)));
}

void create_company(runtime& rt, std::int64_t tenant, company_fields f,
                    callback<domain::company> reply) {
  send(rt, tenant, caf::make_message(co_new_atom::value, std::move(f), std::move(reply)));
}

void get_company(runtime& rt, std::int64_t tenant, std::int64_t id,
                 callback<domain::company> reply) {
  send(rt, tenant, caf::make_message(co_get_atom::value, id, std::move(reply)));
}

void update_company(runtime& rt, std::int64_t tenant, std::int64_t id, company_fields f,
                    callback<domain::company> reply) {
  send(rt, tenant, caf::make_message(co_put_atom::value, id, std::move(f), std::move(reply)));
}

void delete_company(runtime& rt, std::int64_t tenant, std::int64_t id,
                    callback<domain::done> reply) {
  send(rt, tenant, caf::make_message(co_del_atom::value, id, std::move(reply)));
}

void list_companies(runtime& rt, std::int64_t tenant, company_query q,
                    callback<company_list> reply) {
  send(rt, tenant, caf::make_message(co_list_atom::value, std::move(q), std::move(reply)));
}

void push_field_definitions(runtime& rt, std::int64_t tenant, domain::field_definitions defs) {
  send(rt, tenant, caf::make_message(defs_atom::value, std::move(defs)));
}

void purge_custom_field(runtime& rt, std::int64_t tenant, domain::custom_field f,
                        callback<std::int64_t> reply) {
  send(rt, tenant, caf::make_message(purge_atom::value, std::move(f), std::move(reply)));
}

} // namespace crm::actors
