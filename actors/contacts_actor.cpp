// The contacts actor of one tenant: contacts, companies and tags. State is loaded from Postgres
// on first use and served from memory. Writes are validated against the projected state (what
// is committed plus every write ahead of them), staged into the open batch, and committed as
// one transaction when no other commit is in flight (group commit). Memory changes and replies
// follow COMMIT; a failed commit answers 503 to its writes and to those staged behind them.
#include "actors/contacts_internal.hpp"

namespace crm::actors {
namespace contacts_impl {

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

// The query of a search whose custom fields are checked: its predicate, order and page.
domain::contact_query search_query(const domain::contact_search& s) {
  domain::contact_query q;
  q.extra = domain::search_predicate(s);
  q.plan = domain::search_value_plan(s);
  q.sort = s.sort;
  q.descending = s.descending;
  q.offset = static_cast<std::int64_t>(s.page - 1) * s.per_page;
  q.limit = s.per_page;
  return q;
}

// The same, its custom fields checked against the definitions first (422).
domain::outcome<domain::contact_query> search_query(const contacts_state& st,
                                                    domain::contact_search& s) {
  auto issues = domain::check_custom_filters(s, st.defs);
  if (!issues.empty()) return failure::invalid(std::move(issues));
  return search_query(s);
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

// Reserves contact and company ids until `ids` and `company_ids` are held, and a block beyond.
void reserve(contacts_actor* self, std::size_t ids, std::size_t company_ids);

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
  ++st.contacts_version;
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
                         ++st.contacts_version;
                         for (auto& k : snap.keys) st.keys.emplace(k.key, std::move(k));
                         // Users told of while loading may be newer than the snapshot's.
                         st.active_users = std::move(snap.active_users);
                         st.merged_into.clear();
                         for (auto [duplicate, survivor] : snap.merges)
                           st.merged_into[duplicate] = survivor;
                         for (auto [id, active] : std::exchange(st.users_told_while_loading, {}))
                           user_active(st, id, active);
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

void reserve(contacts_actor* self, std::size_t need_contacts, std::size_t need_companies) {
  auto& st = self->state;
  if (st.reserving) return;
  st.reserving = true;
  auto me = caf::actor_cast<caf::actor>(self);
  using ids = std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>;
  // Enough for the request that waits (a bulk of 1,000 needs more than a block), and a block
  // beyond: a reservation that gave nothing the waiting request lacks would be asked for again
  // and again (it did: a bulk with 512 to 999 ids left span forever).
  auto contacts = st.contact_ids.size() < std::max<std::size_t>(id_block, need_contacts)
                      ? static_cast<int>(need_contacts) + id_block * 2
                      : 0;
  auto companies = st.company_ids.size() < std::max<std::size_t>(16, need_companies)
                       ? static_cast<int>(need_companies) + 64
                       : 0;
  st.env.pool->run<ids>(
      [contacts, companies](persistence::pg_conn& c) {
        ids out;
        if (contacts > 0)
          out.first = persistence::reserve_ids(c, persistence::id_kind::contact, contacts);
        if (companies > 0)
          out.second = persistence::reserve_ids(c, persistence::id_kind::company, companies);
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
                continuation k, std::size_t ids, std::size_t company_ids) {
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
    reserve(self, ids, company_ids);
}

// Runs what is held, in order, up to the first that still cannot run. With `error`, what
// cannot run is answered with it instead (a load or an id reservation failed).
void drain(contacts_actor* self, const failure* error) {
  auto& st = self->state;
  auto first = run_held(
      st.waiting, [&st](const held& h) { return ready(st, h); }, error);
  if (first && st.loaded &&
      (st.contact_ids.size() < first->ids || st.company_ids.size() < first->company_ids))
    reserve(self, first->ids, first->company_ids);
  if (st.stopping && idle_pipeline(st) && st.waiting.empty()) self->quit();
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
  } else if (key == "owner_id") {
    out += c.owner_id ? std::to_string(*c.owner_id) : "null";
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
                      bool upsert, std::int64_t first, callback<stored_response>& reply) {
        auto _ = measure();
        auto n = items.size();
        when_ready(
            self, need::write, fail_with(reply),
            [self, items = std::move(items), pre = std::move(pre), key = std::move(key),
             row_loc = std::move(row_loc), upsert, first, reply]() mutable {
              do_bulk(self, std::move(items), std::move(pre), std::move(key), std::move(row_loc),
                      reply, upsert, first);
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
      [self, measure](search_atom, domain::contact_search& s, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, s = std::move(s), reply]() mutable {
          auto q = search_query(self->state, s);
          if (!q) return reply(q.error());
          reply(page_json(self->state.view->records(), *q, s.page, s.per_page));
        });
      },
      [self, measure](timeline_atom, std::int64_t id,
                      std::optional<domain::timeline_position>& after, int limit,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, id, after, limit, reply] {
          auto& st = self->state;
          if (!st.store().find(id))
            return reply_missing(self, persistence::record_kind::contact, id, reply);
          st.env.pool->run<std::string>(
              [tenant = st.env.tenant_id, id, after, limit](persistence::pg_conn& c) {
                return persistence::contact_timeline(c, tenant, id, after, limit);
              },
              [reply](domain::outcome<std::string> r) { reply(std::move(r)); });
        });
      },
      [self, measure](merge_atom, std::int64_t id, contact_merge_request& req,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::write, fail_with(reply),
                   [self, id, req = std::move(req), reply]() mutable {
                     do_merge(self, id, std::move(req), reply);
                   });
      },
      [self, measure](dupes_atom, int page, int per_page, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, page, per_page, reply] {
          reply(duplicates_page(self->state, page, per_page));
        });
      },
      [self, measure](count_atom, domain::contact_search& s, callback<std::int64_t>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, s = std::move(s), reply]() mutable {
          auto q = search_query(self->state, s);
          if (!q) return reply(q.error());
          q->limit = 0; // the total alone
          reply(self->state.store().list(*q).total);
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
      // A user of the tenant created, deactivated or reactivated (the users actor, after its
      // COMMIT and before its answer): who may own a contact.
      [self](user_active_atom, std::int64_t id, bool active) {
        auto& st = self->state;
        user_active(st, id, active);
        if (st.loading) st.users_told_while_loading.emplace_back(id, active);
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

} // namespace contacts_impl

using contacts_impl::bulk_atom;
using contacts_impl::co_del_atom;
using contacts_impl::co_get_atom;
using contacts_impl::co_list_atom;
using contacts_impl::co_new_atom;
using contacts_impl::co_put_atom;
using contacts_impl::company_of;
using contacts_impl::contacts_behavior;
using contacts_impl::count_atom;
using contacts_impl::delete_atom;
using contacts_impl::dupes_atom;
using contacts_impl::fetch_atom;
using contacts_impl::find_atom;
using contacts_impl::match_atom;
using contacts_impl::merge_atom;
using contacts_impl::page_json;
using contacts_impl::search_atom;
using contacts_impl::send;
using contacts_impl::tag_add_atom;
using contacts_impl::tag_mv_atom;
using contacts_impl::tag_rm_atom;
using contacts_impl::tags_atom;
using contacts_impl::timeline_atom;
using domain::errc;
using domain::failure;
using domain::issue;
namespace json = boost::json;

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
                          std::string row_loc, callback<stored_response> reply, bool upsert,
                          std::int64_t first) {
  send(rt, tenant,
       caf::make_message(bulk_atom::value, std::move(items), std::move(pre_errors), std::move(key),
                         std::move(row_loc), upsert, first, std::move(reply)));
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

void search_contacts(runtime& rt, std::int64_t tenant, domain::contact_search s,
                     callback<std::string> reply) {
  // Like a list, on the calling thread while the view is current; a custom field needs the
  // definitions, which the actor holds.
  if (!domain::names_custom_fields(s))
    if (auto view = rt.internals().contacts_view_of(tenant)) {
      std::string body;
      auto q = contacts_impl::search_query(s);
      if (view->read([&](const contacts_records& r) { body = page_json(r, q, s.page, s.per_page); },
                     contacts_view::shows::no_custom_fields))
        return reply(std::move(body));
    }
  send(rt, tenant, caf::make_message(search_atom::value, std::move(s), std::move(reply)));
}

void count_contacts(runtime& rt, std::int64_t tenant, domain::contact_search s,
                    callback<std::int64_t> reply) {
  send(rt, tenant, caf::make_message(count_atom::value, std::move(s), std::move(reply)));
}

void contact_timeline(runtime& rt, std::int64_t tenant, std::int64_t id,
                      std::optional<domain::timeline_position> after, int limit,
                      callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(timeline_atom::value, id, std::move(after), limit, std::move(reply)));
}

void merge_contacts(runtime& rt, std::int64_t tenant, std::int64_t survivor_id,
                    contact_merge_request req, callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(merge_atom::value, survivor_id, std::move(req), std::move(reply)));
}

void find_duplicate_contacts(runtime& rt, std::int64_t tenant, int page, int per_page,
                             callback<std::string> reply) {
  send(rt, tenant, caf::make_message(dupes_atom::value, page, per_page, std::move(reply)));
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
