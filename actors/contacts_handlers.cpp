// The contacts actor (actors/contacts_internal.hpp): the request handlers, and companies.
#include "actors/contacts_internal.hpp"

#include "actors/workflows.hpp"
#include "domain/page_json.hpp"

namespace crm::actors::contacts_impl {

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
  if (req.known_id) {
    // A contact merged away is found as the one it was merged into.
    auto id = *req.known_id;
    if (auto m = st.merged_into.find(id); m != st.merged_into.end()) id = m->second;
    if (auto c = projected_contact(st, id)) return answer(*c);
  }
  auto by_phone = req.phone ? phone_owner(st, *req.phone) : 0;
  auto by_email = req.email ? email_owner(st, *req.email) : 0;
  if (by_phone && by_email && by_phone != by_email) {
    // Both named, so that an operator can tell which two records are the same patient (and
    // merge them: POST /contacts/{id}/merge).
    auto f = failure::of(errc::conflict,
                         "the contact block matches two different contacts: the phone contact " +
                             std::to_string(by_phone) + ", the e-mail contact " +
                             std::to_string(by_email));
    f.extra =
        ",\"contact_ids\":[" + std::to_string(by_phone) + "," + std::to_string(by_email) + "]";
    return reply(std::move(f));
  }
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

// An upsert's row whose e-mail is a contact's: that contact updated with the row's fields (the
// columns the file has; an empty cell leaves the value as it is). Nothing changed: no write.
bool upsert_row(contacts_state& st, contact_fields& f, const std::vector<issue>& pre,
                const std::vector<domain::loc_part>& prefix, domain::bulk_item& result,
                std::vector<std::int64_t>& touched) {
  if (!f.email || !*f.email) return false;
  auto owner = email_owner(st, **f.email);
  auto cur = owner ? projected_contact(st, owner) : nullptr;
  if (!cur) return false;
  auto before = *cur;
  auto c = before;
  f.email.reset(); // the key it was found by (kept in the contact's own spelling)
  auto r = apply_fields(st, c, f, false, prefix);
  r.issues.insert(r.issues.begin(), pre.begin(), pre.end());
  result.updated = true;
  if (!r.issues.empty()) {
    result.errors = std::move(r.issues);
    return true;
  }
  result.id = c.id;
  auto changed = domain::changed_fields(before, c);
  if (changed.empty()) return true;
  c.updated_at = next_timestamp(before.updated_at);
  touched.push_back(c.id);
  stage_contact(st, &before, c);
  contact_events(st, &before, c, r, fields_sent(f));
  return true;
}

void do_bulk(contacts_actor* self, std::vector<contact_fields> items,
             std::vector<std::vector<issue>> pre_errors, idempotency key, std::string row_loc,
             callback<stored_response> reply, bool upsert, std::int64_t first) {
  auto& st = self->state;
  if (answer_known_key(self, key, reply)) return;
  std::vector<domain::bulk_item> results(items.size());
  std::vector<std::int64_t> created;
  auto now = domain::now_micros();
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::vector<domain::loc_part> prefix{std::string("body"), row_loc,
                                         first + static_cast<std::int64_t>(i)};
    if (row_loc == "rows" && items[i].custom_fields)
      items[i].custom_fields = convert_cells(st.defs, *items[i].custom_fields);
    static const std::vector<issue> none;
    if (upsert && upsert_row(st, items[i], i < pre_errors.size() ? pre_errors[i] : none, prefix,
                             results[i], created))
      continue;
    if (upsert) results[i].updated = false;
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
  auto body = domain::encode_bulk_results(results, first);
  // A request that created nothing stores no answer for its key: sent again (corrected), it is
  // a new request, not a replay of the refusal.
  if (!created.empty()) stage_key(st, key, 200, body);
  // One row for the whole request, naming every contact it created (or an upsert updated).
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
        forget_contact_tasks(*self->state.env.rt->owner, self->state.env.tenant_id, id);
        forget_contact_appointments(*self->state.env.rt->owner, self->state.env.tenant_id, id);
        reply(domain::done{});
      },
      fail_with(reply));
}

failure merged_failure(std::int64_t survivor) {
  auto f = failure::of(errc::not_found,
                       "contact not found: it was merged into contact " + std::to_string(survivor));
  f.extra = ",\"merged_into\":" + std::to_string(survivor);
  return f;
}

void do_merge(contacts_actor* self, std::int64_t survivor_id, contact_merge_request req,
              callback<std::string> reply) {
  auto& st = self->state;
  auto at_duplicate = [](std::string msg) {
    return failure::invalid({{{"body", "duplicate_id"}, std::move(msg), "value_error"}});
  };
  auto cur = projected_contact(st, survivor_id);
  if (!cur) {
    if (st.p_contacts.count(survivor_id)) return reply(missing_contact());
    return reply_missing(self, persistence::record_kind::contact, survivor_id, reply);
  }
  if (req.duplicate_id == survivor_id)
    return reply(at_duplicate("a contact cannot be merged into itself"));
  auto dup = projected_contact(st, req.duplicate_id);
  if (!dup) {
    if (auto it = st.merged_into.find(req.duplicate_id); it != st.merged_into.end())
      return reply(at_duplicate("already merged into contact " + std::to_string(it->second)));
    return reply(at_duplicate("no such contact in this tenant"));
  }
  auto before = *cur;
  auto duplicate = *dup;
  // Sealed values are bound to their contact: the duplicate's are resealed for the survivor.
  auto custom = duplicate.custom_fields;
  if (holds_sealed(st, duplicate)) {
    if (!st.data_key)
      return reply(failure::of(errc::service_unavailable,
                               "sensitive values cannot be resealed now (no data key); retry"));
    auto& key = *st.data_key;
    bool lost = false;
    auto resealed = domain::reseal_custom_values(
        custom, [&](std::string_view field, std::string_view sealed) -> std::optional<std::string> {
          auto plain = key.open(persistence::sealed::contact_field(duplicate.id, field), sealed);
          if (!plain) {
            lost = true;
            return std::nullopt;
          }
          return key.seal(persistence::sealed::contact_field(survivor_id, field), *plain);
        });
    if (lost)
      return reply(failure::of(errc::conflict, "a sensitive value of the duplicate does not open "
                                               "with the tenant's data key; nothing was merged"));
    if (resealed) custom = std::move(*resealed);
  }
  auto c = domain::merged_contact(before, duplicate, req.prefer, custom);
  c.updated_at = next_timestamp(before.updated_at);
  auto changed = domain::changed_fields(before, c);
  audit_change(st, reply.who(), "contact", survivor_id, "merge", changed, 200,
               {survivor_id, duplicate.id});
  persistence::contact_merge m;
  m.survivor_id = survivor_id;
  m.duplicate_id = duplicate.id;
  if (auto* who = reply.who()) m.merged_by = who->user_id;
  m.merged_at = domain::now_micros();
  st.open.sql.merges.push_back(m);
  // The duplicate goes first: the e-mail it releases may be the survivor's now.
  stage_contact_delete(st, duplicate);
  stage_contact(st, &before, c);
  contact_event(st, "contact.merged", c, [&] {
    std::string extra = ",\"duplicate_id\":" + std::to_string(duplicate.id) + ",\"changed\":";
    append_names(extra, changed);
    return extra;
  }());
  // Every actor holding rows about the duplicate hears of the move before the client does.
  stage_write(
      self,
      [self, survivor_id, duplicate = duplicate.id, reply] {
        auto& s = self->state;
        auto& rt = *s.env.rt->owner;
        auto tenant = s.env.tenant_id;
        contact_merged(rt, tenant, duplicate, survivor_id);
        move_contact_notes(rt, tenant, duplicate, survivor_id);
        move_contact_tasks(rt, tenant, duplicate, survivor_id);
        move_contact_appointments(rt, tenant, duplicate, survivor_id);
        move_contact_messaging(rt, tenant, duplicate, survivor_id);
        move_contact_runs(rt, tenant, duplicate, survivor_id);
        auto now = s.store().find(survivor_id);
        if (!now) return reply(missing_contact());
        std::deque<domain::contact> storage;
        std::vector<std::string> disclosed;
        const auto& view = shown(s, *now, reply.who(), true, storage, &disclosed);
        if (!disclosed.empty() && !audit_disclosure(s, reply.who(), {survivor_id}, disclosed))
          return reply(disclosure_unaudited());
        reply(domain::encode_contact_full(view, company_of(s.view->records(), *now)));
      },
      fail_with(reply));
}

std::string duplicates_page(contacts_state& st, int page, int per_page) {
  if (st.duplicates.version != st.contacts_version) {
    std::vector<const domain::contact*> all;
    all.reserve(st.store().size());
    st.store().for_each(domain::contact_query{},
                        [&](const domain::contact& c) { all.push_back(&c); });
    st.duplicates.pairs = domain::find_duplicates(all);
    st.duplicates.version = st.contacts_version;
  }
  const auto& pairs = st.duplicates.pairs;
  auto from = std::min<std::size_t>(pairs.size(), static_cast<std::size_t>(page - 1) * per_page);
  auto to = std::min<std::size_t>(pairs.size(), from + static_cast<std::size_t>(per_page));
  json::array items;
  for (auto i = from; i < to; ++i) {
    auto& p = pairs[i];
    json::array reasons(p.reasons.begin(), p.reasons.end());
    items.push_back(json::object{{"contact_ids", json::array{p.first, p.second}},
                                 {"reasons", std::move(reasons)}});
  }
  return domain::render_page(std::move(items), static_cast<std::int64_t>(pairs.size()), page,
                             per_page);
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

} // namespace crm::actors::contacts_impl
