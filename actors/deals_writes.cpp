// The deals actor (actors/deals_internal.hpp): the rules that need its state, idempotency, and
// the deal writes.
#include "actors/deals_internal.hpp"

#include "domain/contact_json.hpp"

namespace crm::actors::deals_impl {

// ---- deal rules that need the state ---------------------------------------------------------

std::vector<domain::loc_part> at(std::vector<domain::loc_part> l, std::string key) {
  l.emplace_back(std::move(key));
  return l;
}

// Applies `f` to a copy of `before` (or a new deal): every rule that needs the state. The rank
// is left to the caller (it may stage renumbering).
built build_deal(deals_state& st, const domain::deal* before, const deal_fields& f) {
  built out;
  auto& d = out.next;
  auto& issues = out.issues;
  bool creating = before == nullptr;
  if (before) d = *before;
  if (f.title) d.title = *f.title;
  if (f.amount) d.amount = *f.amount;
  if (f.currency)
    d.currency = *f.currency;
  else if (creating)
    d.currency = st.currency;
  if (f.contact_id) d.contact_id = *f.contact_id;
  if (f.company_id) d.company_id = *f.company_id;
  if (f.owner_id) d.owner_id = *f.owner_id;
  if (f.expected_close) d.expected_close = *f.expected_close;
  if (f.lost_reason) d.lost_reason = *f.lost_reason;

  const domain::pipeline* pipe = nullptr;
  if (f.pipeline_id) {
    auto it = st.pipelines.find(*f.pipeline_id);
    if (it == st.pipelines.end())
      issues.push_back(
          {at(f.loc, "pipeline_id"), "pipeline not found in this tenant", "value_error"});
    else
      pipe = &it->second;
  } else if (creating) {
    pipe = default_pipeline(st);
  } else {
    auto it = st.pipelines.find(d.pipeline_id);
    pipe = it == st.pipelines.end() ? nullptr : &it->second;
  }
  const domain::stage* stage = nullptr;
  if (pipe) {
    bool pipeline_changed = creating || pipe->id != d.pipeline_id;
    if (f.stage_id) {
      stage = pipe->find(*f.stage_id);
      if (!stage)
        issues.push_back({at(f.loc, "stage_id"),
                          "stage " + std::to_string(*f.stage_id) + " is not a stage of pipeline " +
                              std::to_string(pipe->id),
                          "value_error"});
      else if (f.status && stage->kind != *f.status)
        issues.push_back({at(f.loc, "status"),
                          "status '" + std::string(domain::to_string(*f.status)) +
                              "' does not match the kind of stage " + std::to_string(stage->id),
                          "value_error"});
    } else if (f.status) {
      auto cur = pipeline_changed ? nullptr : pipe->find(d.stage_id);
      if (*f.status == stage_kind::open)
        stage = cur && cur->kind == stage_kind::open ? cur : pipe->first_open();
      else
        stage = pipe->of_kind(*f.status);
    } else if (pipeline_changed) {
      stage = pipe->first_open();
    } else {
      stage = pipe->find(d.stage_id);
    }
  }
  if (stage) {
    out.stage_changed = creating || stage->id != d.stage_id;
    d.pipeline_id = pipe->id;
    d.stage_id = stage->id;
    auto was = creating ? stage_kind::open : d.status;
    d.status = stage->kind;
    auto now = domain::now_micros();
    if (d.status == stage_kind::open)
      d.closed_at.reset();
    else if (creating || was != d.status)
      d.closed_at = now;
  }

  if (f.custom_fields) {
    auto merged = domain::merge_custom_values(d.custom_fields, *f.custom_fields, creating);
    if (!merged) {
      issues.push_back(
          {at(f.loc, "custom_fields"), "Input should be a valid dictionary", "value_error"});
    } else if (merged->size() > max_custom_fields_bytes) {
      issues.push_back(
          {at(f.loc, "custom_fields"), "custom_fields must be at most 16 KiB", "value_error"});
    } else {
      for (auto& i : domain::check_custom_values(st.defs, domain::field_entity::deal,
                                                 *f.custom_fields, *merged, creating, f.loc))
        issues.push_back(std::move(i));
      d.custom_fields = std::move(*merged);
    }
  } else if (creating) {
    for (auto& i :
         domain::check_custom_values(st.defs, domain::field_entity::deal, "{}", "{}", true, f.loc))
      issues.push_back(std::move(i));
  }
  if (d.contact_id && st.gone_contacts.count(*d.contact_id))
    issues.push_back({at(f.loc, "contact_id"), "contact not found in this tenant", "value_error"});
  if (d.company_id && st.gone_companies.count(*d.company_id))
    issues.push_back({at(f.loc, "company_id"), "company not found in this tenant", "value_error"});
  return out;
}

// References (contact, company, owner) that a write names are checked in Postgres, which
// holds every acknowledged write; then `k` runs in the actor with the issues found, or with
// the failure when Postgres could not answer.
void check_refs(deals_actor* self, const std::vector<const deal_fields*>& items,
                std::function<void(domain::outcome<ref_issues>)> k) {
  struct asked {
    std::optional<std::int64_t> contact, company, owner;
    std::vector<domain::loc_part> loc;
  };
  std::vector<asked> asks;
  persistence::deal_refs wanted;
  for (auto f : items) {
    auto& a = asks.emplace_back();
    a.loc = f->loc;
    if (f->contact_id && *f->contact_id) wanted.contacts.push_back(*(a.contact = *f->contact_id));
    if (f->company_id && *f->company_id) wanted.companies.push_back(*(a.company = *f->company_id));
    if (f->owner_id && *f->owner_id) wanted.users.push_back(*(a.owner = *f->owner_id));
  }
  if (wanted.contacts.empty() && wanted.companies.empty() && wanted.users.empty())
    return k(ref_issues(items.size()));
  db<persistence::deal_refs>(
      self,
      [tid = self->state.env.tenant_id, wanted](persistence::pg_conn& c) {
        return persistence::existing_refs(c, tid, wanted);
      },
      [asks = std::move(asks), k = std::move(k)](domain::outcome<persistence::deal_refs> r) {
        if (!r) return k(r.error());
        auto has = [](const std::vector<std::int64_t>& v, std::int64_t id) {
          return std::find(v.begin(), v.end(), id) != v.end();
        };
        ref_issues out(asks.size());
        for (std::size_t i = 0; i < asks.size(); ++i) {
          auto& a = asks[i];
          if (a.contact && !has(r->contacts, *a.contact))
            out[i].push_back(
                {at(a.loc, "contact_id"), "contact not found in this tenant", "value_error"});
          if (a.company && !has(r->companies, *a.company))
            out[i].push_back(
                {at(a.loc, "company_id"), "company not found in this tenant", "value_error"});
          if (a.owner && !has(r->users, *a.owner))
            out[i].push_back({at(a.loc, "owner_id"),
                              "owner_id must be an active user of the tenant", "value_error"});
        }
        k(std::move(out));
      });
}

// ---- idempotency ----------------------------------------------------------------------------

std::string key_of(const idempotency& k) {
  return k.key.empty() ? std::string() : "deals:" + k.key;
}

// Handles a key already known; true if the request is answered (or will be).
bool answer_known_key(deals_actor* self, const idempotency& key,
                      const callback<stored_response>& reply) {
  auto& st = self->state;
  auto name = key_of(key);
  if (name.empty()) return false;
  if (auto it = st.p_keys.find(name); it != st.p_keys.end()) {
    if (it->second.second != key.request_hash) {
      reply(failure::of(errc::conflict, "this Idempotency-Key was used with a different request"));
      return true;
    }
    auto answer = [self, name, reply] {
      auto& keys = self->state.keys;
      if (auto k = keys.find(name); k != keys.end())
        reply(stored_response{k->second.status, k->second.response, std::nullopt});
      else
        reply(failure::of(errc::service_unavailable, "retry"));
    };
    auto& b = it->second.first == st.open.seq ? st.open : *st.in_flight;
    b.on_commit.push_back(answer);
    b.on_fail.push_back(fail_with(reply));
    return true;
  }
  auto it = st.keys.find(name);
  if (it == st.keys.end() || it->second.created_at < domain::now_micros() - idempotency_window)
    return false;
  if (it->second.request_hash != key.request_hash) {
    reply(failure::of(errc::conflict, "this Idempotency-Key was used with a different request"));
    return true;
  }
  reply(stored_response{it->second.status, it->second.response, std::nullopt});
  return true;
}

void stage_key(deals_state& st, const idempotency& key, int status, const std::string& body) {
  auto name = key_of(key);
  if (name.empty()) return;
  auto now = domain::now_micros();
  persistence::forget_expired_keys(st.keys, st.keys_pruned_at, now);
  st.open.sql.keys.push_back({name, key.request_hash, status, body, now});
  st.p_keys[name] = {st.open.seq, key.request_hash};
}

// ---- deal writes ----------------------------------------------------------------------------

// In the actor, ready for a write with one id reserved.
std::optional<domain::deal> stage_create(deals_actor* self, const deal_fields& f,
                                         const deal_actor_ref& who,
                                         std::vector<domain::issue>& issues) {
  auto& st = self->state;
  auto b = build_deal(st, nullptr, f);
  if (!b.issues.empty()) {
    issues = std::move(b.issues);
    return std::nullopt;
  }
  auto& d = b.next;
  d.id = st.ids.front();
  st.ids.pop_front();
  d.tenant_id = st.env.tenant_id;
  d.created_at = d.updated_at = domain::now_micros();
  if (d.status != stage_kind::open) d.closed_at = d.created_at;
  d.rank =
      f.position ? rank_at(self, d.stage_id, *f.position, d.id) : take_last_rank(st, d.stage_id);
  stage_deal(self, nullptr, d, who);
  return d;
}

void do_create(deals_actor* self, deal_fields f, deal_actor_ref who, idempotency key,
               callback<stored_response> reply) {
  std::vector<const deal_fields*> items{&f};
  check_refs(self, items, [self, f, who, key, reply](domain::outcome<ref_issues> found) {
    if (!found) return reply(found.error());
    when_ready(
        self, need::write, fail_with(reply),
        [self, f, who, key, reply, refs = std::move(*found)]() mutable {
          if (answer_known_key(self, key, reply)) return;
          auto issues = f.issues;
          issues.insert(issues.end(), refs[0].begin(), refs[0].end());
          if (!issues.empty()) return reply(failure::invalid(std::move(issues)));
          auto d = stage_create(self, f, who, issues);
          if (!d) return reply(failure::invalid(std::move(issues)));
          audit_change(self->state, reply.who(), d->id, "create",
                       changed_fields(domain::deal{}, *d), 201);
          auto body = domain::encode_deal(*d);
          stage_key(self->state, key, 201, body);
          stage_write(
              self,
              [reply, body, id = d->id] {
                reply(stored_response{201, body, id});
              },
              fail_with(reply));
        },
        1);
  });
}

void do_bulk(deals_actor* self, std::vector<deal_fields> items, deal_actor_ref who, idempotency key,
             std::int64_t first, callback<stored_response> reply) {
  std::vector<const deal_fields*> ptrs;
  for (auto& f : items) ptrs.push_back(&f);
  // check_refs copies what it needs from `ptrs` before the lambda below is called; moving the
  // vector keeps its elements where they are.
  check_refs(self, ptrs,
             [self, items = std::move(items), who, key, first,
              reply](domain::outcome<ref_issues> found) mutable {
               if (!found) return reply(found.error());
               when_ready(
                   self, need::write, fail_with(reply),
                   [self, items = std::move(items), who, key, first, reply,
                    refs = std::move(*found)]() mutable {
                     if (answer_known_key(self, key, reply)) return;
                     std::vector<domain::bulk_item> results(items.size());
                     std::vector<std::int64_t> created;
                     for (std::size_t i = 0; i < items.size(); ++i) {
                       auto issues = items[i].issues;
                       issues.insert(issues.end(), refs[i].begin(), refs[i].end());
                       std::optional<domain::deal> d;
                       if (issues.empty()) d = stage_create(self, items[i], who, issues);
                       if (d)
                         created.push_back(results[i].id = d->id);
                       else
                         results[i].errors = std::move(issues);
                     }
                     auto body = domain::encode_bulk_results(results, first);
                     // Nothing created: no answer stored for the key (a corrected retry is new).
                     if (!created.empty()) stage_key(self->state, key, 200, body);
                     audit_change(self->state, reply.who(), std::nullopt, "bulk_create", {}, 200,
                                  std::move(created));
                     stage_write(
                         self,
                         [reply, body] {
                           reply(stored_response{200, body, std::nullopt});
                         },
                         fail_with(reply));
                   },
                   items.size());
             });
}

void do_update(deals_actor* self, std::int64_t id, deal_fields f, deal_actor_ref who,
               callback<domain::deal> reply) {
  std::vector<const deal_fields*> items{&f};
  check_refs(self, items, [self, id, f, who, reply](domain::outcome<ref_issues> found) {
    if (!found) return reply(found.error());
    when_ready(self, need::write, fail_with(reply),
               [self, id, f, who, reply, refs = std::move(*found)]() mutable {
                 auto& st = self->state;
                 auto found = projected(st, id);
                 if (!found)
                   return reply_missing(self, persistence::pipeline_record::deal, id, "deal",
                                        reply);
                 // A copy: staging (renumbered ranks) may move the projection's entries.
                 const auto before = *found;
                 auto b = build_deal(st, &before, f);
                 auto issues = f.issues;
                 issues.insert(issues.end(), refs[0].begin(), refs[0].end());
                 issues.insert(issues.end(), b.issues.begin(), b.issues.end());
                 if (!issues.empty()) return reply(failure::invalid(std::move(issues)));
                 auto& d = b.next;
                 d.updated_at = std::max(domain::now_micros(), before.updated_at + 1);
                 if (f.position)
                   d.rank = rank_at(self, d.stage_id, *f.position, d.id);
                 else if (b.stage_changed)
                   d.rank = take_last_rank(st, d.stage_id);
                 audit_change(st, reply.who(), id, b.stage_changed ? "move" : "update",
                              changed_fields(before, d), 200);
                 stage_deal(self, &before, d, who);
                 stage_write(
                     self, [reply, d] { reply(d); }, fail_with(reply));
               });
  });
}

void do_delete(deals_actor* self, std::int64_t id, deal_actor_ref who,
               callback<domain::done> reply) {
  when_ready(self, need::write, fail_with(reply), [self, id, who, reply] {
    auto& st = self->state;
    auto before = projected(st, id);
    if (!before) return reply_missing(self, persistence::pipeline_record::deal, id, "deal", reply);
    auto& b = st.open;
    audit_change(st, reply.who(), id, "delete", {}, 204);
    b.sql.deletes.push_back(id);
    if (st.event_listeners)
      b.sql.events.push_back({"deal.deleted", event_payload(st, *before, ""), who.chain_depth});
    st.p_deals[id] = {b.seq, std::nullopt};
    // The tasks actor hears of it before the client does (its tasks stay, unlinked).
    stage_write(
        self,
        [self, id, reply] {
          forget_deal_tasks(*self->state.env.rt->owner, self->state.env.tenant_id, id);
          reply(domain::done{});
        },
        fail_with(reply));
  });
}

// A contact or company was deleted: Postgres already nulled the deals' references in that
// transaction, so memory follows at once (committed and staged deals alike), and the
// deal.updated events are written in a batch of their own.
void do_gone(deals_actor* self, bool contact, std::int64_t id) {
  auto& st = self->state;
  (contact ? st.gone_contacts : st.gone_companies).insert(id);
  when_ready(
      self, need::write, [](const failure&) {},
      [self, contact, id] {
        auto& st = self->state;
        auto refers = [&](const domain::deal& d) {
          return (contact ? d.contact_id : d.company_id) == id;
        };
        std::vector<domain::deal> befores;
        for (auto& [did, d] : st.deals)
          if (refers(d)) befores.push_back(d);
        for (auto& d : befores) put_committed(st, d); // nulls the reference (gone set)
        for (auto& [did, p] : st.p_deals)
          if (p.value && refers(*p.value))
            (contact ? p.value->contact_id : p.value->company_id).reset();
        if (!st.event_listeners || befores.empty()) return;
        for (auto& before : befores) {
          auto after = st.deals.at(before.id);
          record_change(st, st.open.sql, &before, after, {}, false);
          st.open.sql.upserts.pop_back(); // the row already holds null: only the event
        }
        stage_write(
            self, [] {}, [](const failure&) {});
      });
}

// A contact merged into another: its deals name the survivor (their rows already do).
void do_contact_moved(deals_actor* self, std::int64_t from, std::int64_t into) {
  self->state.moved_contacts[from] = into;
  when_ready(
      self, need::write, [](const failure&) {},
      [self, from, into] {
        auto& st = self->state;
        std::vector<domain::deal> moved;
        for (auto& [id, d] : st.deals)
          if (d.contact_id == from) moved.push_back(d);
        for (auto& d : moved) put_committed(st, d); // names the survivor (moved_contacts)
        for (auto& [id, p] : st.p_deals)
          if (p.value && p.value->contact_id == from) p.value->contact_id = into;
      });
}

} // namespace crm::actors::deals_impl
