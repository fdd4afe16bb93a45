// The contacts actor (actors/contacts_internal.hpp): the rules that need its state: sensitive
// values, custom-field rules, idempotency.
#include "actors/contacts_internal.hpp"

namespace crm::actors::contacts_impl {

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
                             std::vector<std::string>* disclosed) {
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
                   std::string_view extra) {
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

void append_names(std::string& out, const std::vector<std::string>& names) {
  out += '[';
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += ',';
    domain::append_json_string(out, names[i]);
  }
  out += ']';
}

// contact.updated: also the names of the fields sent and their values before the change.
void update_event(contacts_state& st, const domain::contact& before, const domain::contact& c,
                  const std::vector<std::string>& changed) {
  std::string extra = ",\"changed\":";
  append_names(extra, changed);
  extra += ",\"previous\":{";
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
                  std::vector<std::string> fields, int status, std::vector<std::int64_t> ids) {
  auto r = domain::make_audit(who, st.env.tenant_id, resource, id, action);
  r.fields = std::move(fields);
  r.status = status;
  r.ids = std::move(ids);
  st.open.sql.audit.push_back(std::move(r));
}

void apply_committed(contacts_state& st, const batch& b, const persistence::contact_batch& sql) {
  if (!sql.contact_upserts.empty() || !sql.contact_deletes.empty()) ++st.contacts_version;
  st.view->write([&](contacts_records& r) {
    for (auto& co : sql.company_upserts) r.companies[co.id] = co;
    for (auto& c : sql.contact_upserts) r.store.upsert(c);
    for (auto id : sql.contact_deletes) r.store.erase(id);
    for (auto id : sql.company_deletes) r.companies.erase(id);
  });
  for (auto& k : sql.keys) st.keys[k.key] = k;
  for (auto& m : sql.merges) {
    for (auto& [duplicate, survivor] : st.merged_into)
      if (survivor == m.duplicate_id) survivor = m.survivor_id;
    st.merged_into[m.duplicate_id] = m.survivor_id;
  }
  // A deleted survivor takes the record of its merges with it (contact_merges cascades).
  if (!st.merged_into.empty())
    for (auto id : sql.contact_deletes)
      std::erase_if(st.merged_into, [id](const auto& kv) { return kv.second == id; });
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

void user_active(contacts_state& st, std::int64_t id, bool active) {
  if (active)
    st.active_users.insert(id);
  else
    st.active_users.erase(id);
}

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
  if (f.owner_id) {
    // An owner kept as it was stays valid even if the user was deactivated since.
    if (*f.owner_id && *f.owner_id != c.owner_id && !st.active_users.count(**f.owner_id))
      out.issues.push_back(
          {loc("owner_id"), "owner_id must be an active user of the tenant", "value_error"});
    c.owner_id = *f.owner_id;
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
  if (f.owner_id) out.emplace_back("owner_id");
  if (f.status) out.emplace_back("status");
  if (f.source) out.emplace_back("source");
  if (f.tags) out.emplace_back("tags");
  if (f.custom_fields) out.emplace_back("custom_fields");
  return out;
}

// ---- idempotency ----------------------------------------------------------------------

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

} // namespace crm::actors::contacts_impl
