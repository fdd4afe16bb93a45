// The deals actor of one tenant (docs/pipeline.md): pipelines, stages and deals, loaded from
// Postgres on first use and served from memory, with a board order and running totals per
// stage. Deal writes are validated against the projected state (what is committed plus every
// write ahead of them), staged with their history rows and events into the open batch, and
// handed to the shared group committer when no batch of this tenant is in flight. Memory and
// replies follow COMMIT; a failed commit answers 503 to its writes and those staged behind them.
// Pipeline and stage changes are exclusive: they wait until nothing is staged or in flight and
// commit alone, with the deal moves they cause.
#include "actors/deals_internal.hpp"

namespace crm::actors {
namespace deals_impl {

bool idle_pipeline(const deals_state& st) {
  return !st.in_flight && st.open.writes == 0 && !st.exclusive_busy;
}

void settle(deals_actor* self) {
  auto& st = self->state;
  if (st.stopping && st.pending_io == 0 && !st.loading && idle_pipeline(st) && st.waiting.empty())
    self->quit();
}

failure missing(const char* what) {
  return failure::of(errc::not_found, std::string(what) + " not found");
}

// ---- indexes ------------------------------------------------------------------------------

void index_add(deals_state& st, const domain::deal& d) {
  st.board[d.stage_id].emplace(d.rank, d.id);
  auto& t = st.totals[d.stage_id];
  t.count++;
  if (d.amount) t.sums[d.currency] += *d.amount;
  if (d.contact_id) st.by_contact[*d.contact_id].insert(d.id);
  auto& next = st.next_rank[d.stage_id];
  next = std::max(next, d.rank + rank_gap);
}

void index_remove(deals_state& st, const domain::deal& d) {
  st.board[d.stage_id].erase({d.rank, d.id});
  auto& t = st.totals[d.stage_id];
  t.count--;
  if (d.amount) {
    auto it = t.sums.find(d.currency);
    if (it != t.sums.end() && (it->second -= *d.amount) == 0) t.sums.erase(it);
  }
  if (d.contact_id) {
    auto it = st.by_contact.find(*d.contact_id);
    if (it != st.by_contact.end()) {
      it->second.erase(d.id);
      if (it->second.empty()) st.by_contact.erase(it);
    }
  }
}

void put_committed(deals_state& st, domain::deal d) {
  st.board_cache.clear();
  if (d.contact_id)
    if (auto m = st.moved_contacts.find(*d.contact_id); m != st.moved_contacts.end())
      d.contact_id = m->second;
  if (d.contact_id && st.gone_contacts.count(*d.contact_id)) d.contact_id.reset();
  if (d.company_id && st.gone_companies.count(*d.company_id)) d.company_id.reset();
  if (auto it = st.deals.find(d.id); it != st.deals.end()) index_remove(st, it->second);
  index_add(st, d);
  st.deals[d.id] = std::move(d);
}

void erase_committed(deals_state& st, std::int64_t id) {
  auto it = st.deals.find(id);
  if (it == st.deals.end()) return;
  st.board_cache.clear();
  index_remove(st, it->second);
  st.deals.erase(it);
}

void keep_pipeline(deals_state& st, domain::pipeline p) {
  st.board_cache.clear();
  for (auto& s : p.stages) st.stage_pipeline[s.id] = p.id;
  st.pipelines[p.id] = std::move(p);
}

const domain::pipeline* default_pipeline(const deals_state& st) {
  for (auto& [id, p] : st.pipelines)
    if (p.is_default) return &p;
  return st.pipelines.empty() ? nullptr : &st.pipelines.begin()->second;
}

const domain::deal* projected(const deals_state& st, std::int64_t id) {
  if (auto it = st.p_deals.find(id); it != st.p_deals.end())
    return it->second.value ? &*it->second.value : nullptr;
  auto it = st.deals.find(id);
  return it == st.deals.end() ? nullptr : &it->second;
}

// ---- readiness ----------------------------------------------------------------------------

void read_snapshot(deals_actor* self);

// Loads once what a predecessor of this actor handed the group committer has settled (see the
// contacts actor).
void load(deals_actor* self) {
  auto& st = self->state;
  if (st.loading || st.loaded) return;
  st.loading = true;
  after_settled<persistence::deal_batch>(self, [self] { read_snapshot(self); });
}

// After a commit whose outcome is unknown, the state is read again before anything is served.
void reload(deals_actor* self) {
  auto& st = self->state;
  st.loaded = false;
  st.pipelines.clear();
  st.stage_pipeline.clear();
  st.deals.clear();
  st.board.clear();
  st.totals.clear();
  st.by_contact.clear();
  st.board_cache.clear();
  st.keys.clear();
  load(self);
}

void read_snapshot(deals_actor* self) {
  auto& st = self->state;
  using loaded = std::pair<persistence::deals_snapshot, domain::field_definitions>;
  db<loaded>(
      self,
      [tid = st.env.tenant_id](persistence::pg_conn& c) {
        auto defs = persistence::load_fields(c, tid);
        return loaded{persistence::load_deals(c, tid), std::move(defs)};
      },
      [self](domain::outcome<loaded> r) {
        auto& st = self->state;
        st.loading = false;
        if (!r) return drain(self, &r.error());
        auto& snap = r->first;
        for (auto& p : snap.pipelines) keep_pipeline(st, std::move(p));
        for (auto& d : snap.deals) put_committed(st, std::move(d));
        for (auto& k : snap.keys) st.keys[k.key] = std::move(k);
        st.currency = snap.currency;
        if (!st.listeners_told_while_loading) st.event_listeners = snap.event_listeners;
        if (r->second.version >= st.defs.version) st.defs = std::move(r->second);
        st.loaded = true;
        drain(self);
      });
}

void reserve(deals_actor* self) {
  auto& st = self->state;
  if (st.reserving) return;
  st.reserving = true;
  db<std::vector<std::int64_t>>(
      self, [](persistence::pg_conn& c) { return persistence::reserve_deal_ids(c, id_block); },
      [self](domain::outcome<std::vector<std::int64_t>> r) {
        auto& st = self->state;
        st.reserving = false;
        if (!r) return drain(self, &r.error());
        st.ids.insert(st.ids.end(), r->begin(), r->end());
        drain(self);
      });
}

bool ready(const deals_state& st, const held& h) {
  if (!st.loaded) return false;
  if (h.n == need::read) return true;
  if (st.exclusive_busy) return false;
  if (st.ids.size() < h.ids) return false;
  if (h.n == need::exclusive && !idle_pipeline(st)) return false;
  return true;
}

void when_ready(deals_actor* self, need n, std::function<void(const failure&)> fail, continuation k,
                std::size_t ids) {
  auto& st = self->state;
  held h{n, ids, std::move(k), std::move(fail)};
  if (st.waiting.empty() && ready(st, h)) return h.k();
  st.waiting.push_back(std::move(h));
  if (!st.loaded)
    load(self);
  else if (st.ids.size() < ids)
    reserve(self);
}

void drain(deals_actor* self, const failure* error) {
  auto& st = self->state;
  auto first = run_held(
      st.waiting, [&st](const held& h) { return ready(st, h); }, error);
  if (first && st.loaded && st.ids.size() < first->ids) reserve(self);
  settle(self);
}

// ---- events, history, staging --------------------------------------------------------------

std::string event_payload(const deals_state& st, const domain::deal& d, std::string_view extra) {
  std::string p = "{\"deal_id\":" + std::to_string(d.id) + ",\"deal\":";
  domain::append_deal(p, d);
  p += ",\"contact_id\":";
  p += d.contact_id ? std::to_string(*d.contact_id) : "null";
  p += extra;
  p += ",\"tenant_id\":" + std::to_string(st.env.tenant_id) + "}";
  return p;
}

// The fields whose value differs (stage changes have their own event).
std::vector<std::string> changed_fields(const domain::deal& a, const domain::deal& b) {
  std::vector<std::string> out;
  if (a.title != b.title) out.emplace_back("title");
  if (a.amount != b.amount) out.emplace_back("amount");
  if (a.currency != b.currency) out.emplace_back("currency");
  if (a.contact_id != b.contact_id) out.emplace_back("contact_id");
  if (a.company_id != b.company_id) out.emplace_back("company_id");
  if (a.owner_id != b.owner_id) out.emplace_back("owner_id");
  if (a.pipeline_id != b.pipeline_id) out.emplace_back("pipeline_id");
  if (a.expected_close != b.expected_close) out.emplace_back("expected_close_date");
  if (a.lost_reason != b.lost_reason) out.emplace_back("lost_reason");
  if (a.custom_fields != b.custom_fields) out.emplace_back("custom_fields");
  return out;
}

// Appends a deal change to `b`: the row, its history and its events (`before` null: created).
void record_change(const deals_state& st, persistence::deal_batch& b, const domain::deal* before,
                   const domain::deal& after, const deal_actor_ref& who, bool history) {
  b.upserts.push_back(after);
  auto now = after.updated_at;
  auto row = [&](const char* kind) {
    persistence::deal_history_row h;
    h.deal_id = after.id;
    h.kind = kind;
    h.currency = after.currency;
    h.user_id = who.user_id;
    h.workflow_run_id = who.workflow_run_id;
    h.at = now;
    return h;
  };
  if (!before) {
    if (history) {
      auto h = row("created");
      h.to_stage_id = after.stage_id;
      h.to_amount = after.amount;
      b.history.push_back(std::move(h));
    }
  } else if (history) {
    if (before->stage_id != after.stage_id) {
      auto h = row("stage_changed");
      h.from_stage_id = before->stage_id;
      h.to_stage_id = after.stage_id;
      b.history.push_back(std::move(h));
    }
    if (before->amount != after.amount) {
      auto h = row("amount_changed");
      h.from_amount = before->amount;
      h.to_amount = after.amount;
      b.history.push_back(std::move(h));
    }
  }
  if (!st.event_listeners) return;
  auto event = [&](const char* name, std::string_view extra) {
    b.events.push_back({name, event_payload(st, after, extra), who.chain_depth});
  };
  if (!before) {
    event("deal.created", "");
    return;
  }
  auto changed = changed_fields(*before, after);
  if (!changed.empty()) {
    std::string extra = ",\"changed\":[";
    for (std::size_t i = 0; i < changed.size(); ++i) {
      if (i) extra += ',';
      domain::append_json_string(extra, changed[i]);
    }
    extra += "],\"previous\":{";
    json::error_code ec;
    auto prev = crm::domain::parse_json(domain::encode_deal(*before), ec);
    for (std::size_t i = 0; i < changed.size(); ++i) {
      if (i) extra += ',';
      domain::append_json_string(extra, changed[i]);
      extra += ':';
      auto v = !ec && prev.is_object() ? prev.as_object().if_contains(changed[i]) : nullptr;
      extra += v ? json::serialize(*v) : "null";
    }
    extra += '}';
    event("deal.updated", extra);
  }
  if (before->stage_id != after.stage_id) {
    auto extra = ",\"from_stage_id\":" + std::to_string(before->stage_id) +
                 ",\"to_stage_id\":" + std::to_string(after.stage_id);
    event("deal.stage_changed", extra);
    if (after.status != before->status && after.status != stage_kind::open)
      event(after.status == stage_kind::won ? "deal.won" : "deal.lost", extra);
  }
}

void flush(deals_actor* self);

// Audits one change in the open batch: the row commits with the change or not at all
// (docs/compliance.md "Audit trail").
void audit_change(deals_state& st, const domain::audit_context* who, std::optional<std::int64_t> id,
                  const char* action, std::vector<std::string> fields, int status,
                  std::vector<std::int64_t> ids) {
  auto r = domain::make_audit(who, st.env.tenant_id, "deal", id, action);
  r.fields = std::move(fields);
  r.status = status;
  r.ids = std::move(ids);
  st.open.sql.audit.push_back(std::move(r));
}

// Stages `after` into the open batch (projection, row, history, events).
void stage_deal(deals_actor* self, const domain::deal* before, domain::deal after,
                const deal_actor_ref& who, bool history) {
  auto& st = self->state;
  auto& b = st.open;
  if (b.in_group.count(after.id)) {
    b.sql.group_starts.push_back(b.sql.upserts.size());
    b.in_group.clear();
  }
  b.in_group.insert(after.id);
  record_change(st, b.sql, before, after, who, history);
  st.p_deals[after.id] = {b.seq, std::move(after)};
}

void stage_write(deals_actor* self, continuation applied,
                 std::function<void(const failure&)> failed) {
  auto& st = self->state;
  st.open.on_commit.push_back(std::move(applied));
  st.open.on_fail.push_back(std::move(failed));
  ++st.open.writes;
  if (!st.in_flight || st.open.writes >= max_batch) flush(self);
}

void apply_batch(deals_state& st, const persistence::deal_batch& sql) {
  for (auto id : sql.deletes) erase_committed(st, id);
  for (auto& d : sql.upserts)
    if (std::find(sql.deletes.begin(), sql.deletes.end(), d.id) == sql.deletes.end())
      put_committed(st, d);
  for (auto& k : sql.keys) st.keys[k.key] = k;
}

void flush(deals_actor* self) {
  flush_open_batch(
      self,
      [self](const batch& done, const persistence::deal_batch& sql) {
        auto& st = self->state;
        apply_batch(st, sql);
        for (auto it = st.p_deals.begin(); it != st.p_deals.end();)
          it = it->second.seq == done.seq ? st.p_deals.erase(it) : std::next(it);
        for (auto it = st.p_keys.begin(); it != st.p_keys.end();)
          it = it->second.first == done.seq ? st.p_keys.erase(it) : std::next(it);
      },
      [self](const failure& f) {
        self->state.p_deals.clear();
        self->state.p_keys.clear();
        if (f.code == errc::service_unavailable) reload(self);
      },
      [self] {
        flush(self);
        drain(self);
      });
}

// ---- board order --------------------------------------------------------------------------

// The deals of `stage` in board order as they will be once everything staged commits.
std::vector<std::pair<std::int64_t, std::int64_t>> projected_order(const deals_state& st,
                                                                   std::int64_t stage) {
  std::vector<std::pair<std::int64_t, std::int64_t>> v;
  if (auto it = st.board.find(stage); it != st.board.end())
    for (auto& e : it->second)
      if (!st.p_deals.count(e.second)) v.push_back(e);
  for (auto& [id, p] : st.p_deals)
    if (p.value && p.value->stage_id == stage) v.emplace_back(p.value->rank, id);
  std::sort(v.begin(), v.end());
  return v;
}

std::int64_t take_last_rank(deals_state& st, std::int64_t stage) {
  auto& next = st.next_rank[stage];
  if (next == 0) next = rank_gap;
  auto r = next;
  next += rank_gap;
  return r;
}

// The rank that puts deal `id` at index `position` of `stage`. When no gap is left there,
// the stage's other deals are renumbered (staged as rank-only changes: no history, no event).
std::int64_t rank_at(deals_actor* self, std::int64_t stage, std::int64_t position,
                     std::int64_t id) {
  auto& st = self->state;
  auto order = projected_order(st, stage);
  std::erase_if(order, [id](auto& e) { return e.second == id; });
  auto pos = static_cast<std::size_t>(
      std::clamp<std::int64_t>(position, 0, static_cast<std::int64_t>(order.size())));
  if (pos == order.size()) return take_last_rank(st, stage);
  auto hi = order[pos].first;
  auto lo = pos > 0 ? order[pos - 1].first : hi - 2 * rank_gap;
  if (hi - lo >= 2) return lo + (hi - lo) / 2;
  std::int64_t r = rank_gap;
  std::int64_t mine = 0;
  for (std::size_t i = 0; i <= order.size(); ++i) {
    if (i == pos) {
      mine = r;
      r += rank_gap;
    }
    if (i == order.size()) break;
    auto cur = projected(st, order[i].second);
    if (!cur) continue;
    auto moved = *cur;
    moved.rank = r;
    r += rank_gap;
    stage_deal(self, cur, std::move(moved), {}, false);
  }
  st.next_rank[stage] = std::max(st.next_rank[stage], r);
  return mine;
}

// ---- behaviour ----------------------------------------------------------------------------

caf::behavior deals_behavior(deals_actor* self, tenant_env env) {
  auto& st0 = self->state;
  st0.env = env;
  st0.open.seq = st0.next_seq++;
  auto measure = instrument(self, child_kind::deals);
  return {
      [self, measure](resume_atom, continuation& k) {
        auto _ = measure();
        k();
      },
      [self](defs_atom, domain::field_definitions& defs) {
        auto& st = self->state;
        if (defs.version > st.defs.version) st.defs = std::move(defs);
      },
      [self](listeners_atom, bool any) {
        auto& st = self->state;
        st.event_listeners = any;
        if (!st.loaded) st.listeners_told_while_loading = true;
      },
      [self, measure](purge_atom, domain::custom_field& f, callback<std::int64_t>& reply) {
        auto _ = measure();
        when_ready(self, need::exclusive, fail_with(reply), [self, f, reply] {
          auto& st = self->state;
          st.exclusive_busy = true;
          db<std::int64_t>(
              self,
              [f, audit = std::vector{persistence::purge_audit(reply.who(), f)}](
                  persistence::pg_conn& c) { return persistence::purge_field(c, f, audit); },
              [self, f, reply](domain::outcome<std::int64_t> r) {
                auto& st = self->state;
                st.exclusive_busy = false;
                if (r) {
                  for (auto& [id, d] : st.deals) {
                    json::error_code ec;
                    auto v = crm::domain::parse_json(d.custom_fields, ec);
                    if (!ec && v.is_object() && v.as_object().erase(f.name))
                      d.custom_fields = json::serialize(v);
                  }
                  std::erase_if(st.defs.fields,
                                [&](const domain::custom_field& d) { return d.id == f.id; });
                  st.defs.version = std::max(st.defs.version, *r);
                }
                reply(std::move(r));
                drain(self);
              });
        });
      },
      [self, measure](gone_atom, bool contact, std::int64_t id) {
        auto _ = measure();
        do_gone(self, contact, id);
      },
      [self, measure](gone_atom, std::int64_t from, std::int64_t into) {
        auto _ = measure();
        do_contact_moved(self, from, into);
      },
      // ---- pipelines ----
      [self, measure](pl_list_atom, int page, int per_page, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, page, per_page, reply] {
          std::vector<json::value> all;
          for (auto& [id, p] : self->state.pipelines)
            all.push_back(crm::domain::parse_json(domain::encode_pipeline(p)));
          reply(domain::render_page_of(std::move(all), page, per_page));
        });
      },
      [self, measure](pl_get_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, id, reply] {
          domain::pipeline* p = nullptr;
          if (find_pipeline(self, id, reply, &p)) reply(domain::encode_pipeline(*p));
        });
      },
      [self, measure](pl_new_atom, pipeline_input& in, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::exclusive, fail_with(reply), [self, in, reply] {
          domain::pipeline p;
          p.tenant_id = self->state.env.tenant_id;
          p.name = in.name;
          p.is_default = in.is_default;
          p.stages = in.stages.empty() ? domain::default_stages() : in.stages;
          for (auto& s : p.stages) s.id = 0;
          domain::renumber(p.stages);
          p.created_at = p.updated_at = domain::now_micros();
          save_pipeline(self, std::move(p), reply, domain::encode_pipeline);
        });
      },
      [self, measure](pl_put_atom, std::int64_t id, pipeline_patch& patch,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::exclusive, fail_with(reply), [self, id, patch, reply] {
          domain::pipeline* cur = nullptr;
          if (!find_pipeline(self, id, reply, &cur)) return;
          auto next = *cur;
          if (patch.name) next.name = *patch.name;
          if (patch.is_default) {
            if (!*patch.is_default && cur->is_default)
              return reply(conflict("a tenant always has a default pipeline: make another "
                                    "pipeline the default instead"));
            next.is_default = *patch.is_default;
          }
          next.updated_at = std::max(domain::now_micros(), cur->updated_at + 1);
          save_pipeline(self, std::move(next), reply, domain::encode_pipeline);
        });
      },
      [self, measure](pl_del_atom, std::int64_t id, callback<domain::done>& reply) {
        auto _ = measure();
        when_ready(self, need::exclusive, fail_with(reply), [self, id, reply] {
          domain::pipeline* cur = nullptr;
          if (!find_pipeline(self, id, reply, &cur)) return;
          if (cur->is_default) return reply(conflict("the default pipeline cannot be deleted"));
          if (deals_in_pipeline(self->state, *cur) > 0)
            return reply(conflict("the pipeline holds deals: move or delete them first"));
          persistence::pipeline_change ch;
          ch.deleted_pipelines.push_back(id);
          commit_change(self, std::move(ch), [reply](auto r) {
            if (!r) return reply(r.error());
            reply(domain::done{});
          });
        });
      },
      // ---- stages ----
      [self, measure](st_new_atom, std::int64_t pid, domain::stage& s, std::optional<int>& pos,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::exclusive, fail_with(reply), [self, pid, s, pos, reply] {
          domain::pipeline* cur = nullptr;
          if (!find_pipeline(self, pid, reply, &cur)) return;
          auto next = *cur;
          auto stage = s;
          stage.id = 0;
          stage.pipeline_id = pid;
          std::size_t at_index = 0;
          if (pos) {
            at_index =
                static_cast<std::size_t>(std::clamp(*pos, 0, static_cast<int>(next.stages.size())));
          } else {
            for (std::size_t i = 0; i < next.stages.size(); ++i)
              if (next.stages[i].kind == stage_kind::open) at_index = i + 1;
          }
          next.stages.insert(next.stages.begin() + static_cast<std::ptrdiff_t>(at_index), stage);
          if (auto why = domain::stage_rules_broken(next.stages); !why.empty())
            return reply(conflict(why));
          domain::renumber(next.stages);
          next.updated_at = std::max(domain::now_micros(), cur->updated_at + 1);
          auto name = stage.name;
          save_pipeline(self, std::move(next), reply, [name](const domain::pipeline& p) {
            for (auto& x : p.stages)
              if (x.name == name) return domain::encode_stage(x);
            return std::string("{}");
          });
        });
      },
      [self, measure](st_get_atom, std::int64_t pid, std::int64_t sid,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, pid, sid, reply] {
          domain::pipeline* cur = nullptr;
          if (!find_pipeline(self, pid, reply, &cur)) return;
          if (auto s = find_stage_of(self, *cur, sid, reply)) reply(domain::encode_stage(*s));
        });
      },
      [self, measure](st_put_atom, std::int64_t pid, std::int64_t sid, stage_patch& patch,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::exclusive, fail_with(reply), [self, pid, sid, patch, reply] {
          domain::pipeline* cur = nullptr;
          if (!find_pipeline(self, pid, reply, &cur)) return;
          auto s = find_stage_of(self, *cur, sid, reply);
          if (!s) return;
          auto next = *cur;
          auto it = std::find_if(next.stages.begin(), next.stages.end(),
                                 [sid](auto& x) { return x.id == sid; });
          auto stage = *it;
          if (patch.name) stage.name = *patch.name;
          if (patch.probability) stage.probability = *patch.probability;
          if (patch.kind && *patch.kind != stage.kind) {
            if (deals_in_stage(self->state, sid) > 0)
              return reply(conflict("the kind of a stage that holds deals cannot change"));
            stage.kind = *patch.kind;
          }
          next.stages.erase(it);
          auto index = patch.position
                           ? static_cast<std::size_t>(std::clamp(
                                 *patch.position, 0, static_cast<int>(next.stages.size())))
                           : static_cast<std::size_t>(s->position);
          index = std::min(index, next.stages.size());
          next.stages.insert(next.stages.begin() + static_cast<std::ptrdiff_t>(index), stage);
          if (auto why = domain::stage_rules_broken(next.stages); !why.empty())
            return reply(conflict(why));
          domain::renumber(next.stages);
          next.updated_at = std::max(domain::now_micros(), cur->updated_at + 1);
          save_pipeline(self, std::move(next), reply, [sid](const domain::pipeline& p) {
            auto x = p.find(sid);
            return x ? domain::encode_stage(*x) : std::string("{}");
          });
        });
      },
      [self, measure](st_del_atom, std::int64_t pid, std::int64_t sid,
                      std::optional<std::int64_t>& move_to, deal_actor_ref& who,
                      callback<domain::done>& reply) {
        auto _ = measure();
        when_ready(self, need::exclusive, fail_with(reply), [self, pid, sid, move_to, who, reply] {
          auto& st = self->state;
          domain::pipeline* cur = nullptr;
          if (!find_pipeline(self, pid, reply, &cur)) return;
          if (!find_stage_of(self, *cur, sid, reply)) return;
          auto next = *cur;
          std::erase_if(next.stages, [sid](auto& x) { return x.id == sid; });
          if (auto why = domain::stage_rules_broken(next.stages); !why.empty())
            return reply(conflict(why));
          domain::renumber(next.stages);
          next.updated_at = std::max(domain::now_micros(), cur->updated_at + 1);
          persistence::pipeline_change ch;
          auto holding = deals_in_stage(st, sid);
          if (holding > 0) {
            if (!move_to)
              return reply(conflict("the stage holds " + std::to_string(holding) +
                                    " deals: give ?move_to=<stage_id> to move them"));
            auto target = next.find(*move_to);
            if (!target)
              return reply(failure::invalid({{{std::string("query"), std::string("move_to")},
                                              "move_to must be another stage of this pipeline",
                                              "value_error"}}));
            auto now = domain::now_micros();
            for (auto& [rank, id] : st.board[sid]) {
              auto& before = st.deals.at(id);
              auto d = before;
              d.stage_id = target->id;
              auto was = d.status;
              d.status = target->kind;
              if (d.status == stage_kind::open)
                d.closed_at.reset();
              else if (was != d.status)
                d.closed_at = now;
              d.rank = take_last_rank(st, target->id);
              d.updated_at = std::max(now, before.updated_at + 1);
              record_change(st, ch.deals, &before, d, who);
            }
          }
          ch.saves.push_back(std::move(next));
          ch.deleted_stages.push_back(sid);
          commit_change(self, std::move(ch), [reply](auto r) {
            if (!r) return reply(r.error());
            reply(domain::done{});
          });
        });
      },
      [self, measure](board_atom, std::int64_t pid, board_query& q, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, pid, q, reply] {
          domain::pipeline* cur = nullptr;
          if (!find_pipeline(self, pid, reply, &cur)) return;
          if (q.stage_id && !find_stage_of(self, *cur, *q.stage_id, reply)) return;
          auto& cache = self->state.board_cache;
          auto key = std::to_string(pid) + '/' + std::to_string(q.per_stage) + '/' +
                     std::to_string(q.offset) + '/' + std::to_string(q.stage_id.value_or(0));
          auto it = cache.find(key);
          if (it == cache.end()) {
            if (cache.size() >= 64) cache.clear();
            it = cache.emplace(std::move(key), render_board(self->state, *cur, q)).first;
          }
          reply(std::string(it->second));
        });
      },
      [self, measure](summary_atom, std::int64_t pid, summary_query& q,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, pid, q, reply] {
          domain::pipeline* cur = nullptr;
          if (!find_pipeline(self, pid, reply, &cur)) return;
          reply(render_summary(self->state, *cur, q));
        });
      },
      // ---- deals ----
      [self, measure](d_new_atom, deal_fields& f, deal_actor_ref& who, idempotency& key,
                      callback<stored_response>& reply) {
        auto _ = measure();
        do_create(self, std::move(f), who, std::move(key), std::move(reply));
      },
      [self, measure](d_bulk_atom, std::vector<deal_fields>& items, deal_actor_ref& who,
                      idempotency& key, std::int64_t first, callback<stored_response>& reply) {
        auto _ = measure();
        do_bulk(self, std::move(items), who, std::move(key), first, std::move(reply));
      },
      [self, measure](d_get_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, id, reply] {
          auto& deals = self->state.deals;
          auto it = deals.find(id);
          if (it == deals.end())
            return reply_missing(self, persistence::pipeline_record::deal, id, "deal", reply);
          reply(domain::encode_deal(it->second));
        });
      },
      [self, measure](d_put_atom, std::int64_t id, deal_fields& f, deal_actor_ref& who,
                      callback<domain::deal>& reply) {
        auto _ = measure();
        do_update(self, id, std::move(f), who, std::move(reply));
      },
      [self, measure](d_del_atom, std::int64_t id, deal_actor_ref& who,
                      callback<domain::done>& reply) {
        auto _ = measure();
        do_delete(self, id, who, std::move(reply));
      },
      [self, measure](d_list_atom, domain::deal_query& q, int page, int per_page,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, q, page, per_page, reply] {
          reply(render_deal_page(self->state, q, page, per_page));
        });
      },
      [self, measure](d_contact_atom, std::int64_t contact, domain::deal_query& q, int page,
                      int per_page, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, contact, q, page, per_page, reply] {
          auto& st = self->state;
          if (auto it = st.by_contact.find(contact); it != st.by_contact.end())
            return reply(render_deal_page(st, q, page, per_page, &it->second));
          // No deals: whether the contact is the tenant's decides between an empty page,
          // 403 and 404.
          auto tid = st.env.tenant_id;
          st.env.pool->run<std::optional<std::int64_t>>(
              [contact](persistence::pg_conn& c) {
                return persistence::tenant_of(c, persistence::record_kind::contact, contact);
              },
              [reply, tid, page, per_page](domain::outcome<std::optional<std::int64_t>> r) {
                if (!r) return reply(r.error());
                if (!*r) return reply(missing("contact"));
                if (**r != tid)
                  return reply(failure::of(errc::insufficient_permissions,
                                           "the record belongs to another tenant"));
                reply(domain::render_page(json::array{}, 0, page, per_page));
              });
        });
      },
      [self, measure](d_export_atom, domain::deal_query& q, callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, q, reply] {
          std::vector<const domain::deal*> found;
          for (auto& [id, d] : self->state.deals)
            if (domain::deal_matches(d, q)) found.push_back(&d);
          std::sort(found.begin(), found.end(),
                    [&q](auto a, auto b) { return domain::deal_before(*a, *b, q); });
          auto out = domain::deal_csv_header();
          for (auto d : found) out += domain::deal_csv_row(*d);
          reply(std::move(out));
        });
      },
      [self, measure](d_hist_atom, std::int64_t id, int page, int per_page,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_ready(self, need::read, fail_with(reply), [self, id, page, per_page, reply] {
          auto& st = self->state;
          if (!st.deals.count(id))
            return reply_missing(self, persistence::pipeline_record::deal, id, "deal", reply);
          st.env.pool->run<std::string>(
              [tid = st.env.tenant_id, id, page, per_page](persistence::pg_conn& c) {
                return persistence::deal_history_page(c, tid, id, page, per_page);
              },
              [reply](domain::outcome<std::string> r) { reply(std::move(r)); });
        });
      },
      [self](stop_atom) {
        self->state.stopping = true;
        settle(self);
      },
  };
}

} // namespace deals_impl

using deals_impl::board_atom;
using deals_impl::d_bulk_atom;
using deals_impl::d_contact_atom;
using deals_impl::d_del_atom;
using deals_impl::d_export_atom;
using deals_impl::d_get_atom;
using deals_impl::d_hist_atom;
using deals_impl::d_list_atom;
using deals_impl::d_new_atom;
using deals_impl::d_put_atom;
using deals_impl::deals_behavior;
using deals_impl::gone_atom;
using deals_impl::pl_del_atom;
using deals_impl::pl_get_atom;
using deals_impl::pl_list_atom;
using deals_impl::pl_new_atom;
using deals_impl::pl_put_atom;
using deals_impl::st_del_atom;
using deals_impl::st_get_atom;
using deals_impl::st_new_atom;
using deals_impl::st_put_atom;
using deals_impl::summary_atom;
namespace json = boost::json;

caf::actor spawn_deals(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(deals_behavior, env);
}

void list_pipelines(runtime& rt, std::int64_t tenant, int page, int per_page,
                    callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, pl_list_atom::value, page, per_page, std::move(reply));
}
void get_pipeline(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, pl_get_atom::value, id, std::move(reply));
}
void create_pipeline(runtime& rt, std::int64_t tenant, pipeline_input in,
                     callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, pl_new_atom::value, std::move(in), std::move(reply));
}
void update_pipeline(runtime& rt, std::int64_t tenant, std::int64_t id, pipeline_patch p,
                     callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, pl_put_atom::value, id, std::move(p), std::move(reply));
}
void delete_pipeline(runtime& rt, std::int64_t tenant, std::int64_t id,
                     callback<domain::done> reply) {
  tell<child_kind::deals>(rt, tenant, pl_del_atom::value, id, std::move(reply));
}
void add_stage(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, domain::stage s,
               std::optional<int> position, callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, st_new_atom::value, pipeline_id, std::move(s), position,
                          std::move(reply));
}
void get_stage(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, std::int64_t stage_id,
               callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, st_get_atom::value, pipeline_id, stage_id, std::move(reply));
}
void update_stage(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, std::int64_t stage_id,
                  stage_patch p, callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, st_put_atom::value, pipeline_id, stage_id, std::move(p),
                          std::move(reply));
}
void delete_stage(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, std::int64_t stage_id,
                  std::optional<std::int64_t> move_to, deal_actor_ref who,
                  callback<domain::done> reply) {
  tell<child_kind::deals>(rt, tenant, st_del_atom::value, pipeline_id, stage_id, move_to, who,
                          std::move(reply));
}
void pipeline_board(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, board_query q,
                    callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, board_atom::value, pipeline_id, std::move(q),
                          std::move(reply));
}
void pipeline_summary(runtime& rt, std::int64_t tenant, std::int64_t pipeline_id, summary_query q,
                      callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, summary_atom::value, pipeline_id, std::move(q),
                          std::move(reply));
}
void create_deal(runtime& rt, std::int64_t tenant, deal_fields f, deal_actor_ref who,
                 idempotency key, callback<stored_response> reply) {
  tell<child_kind::deals>(rt, tenant, d_new_atom::value, std::move(f), who, std::move(key),
                          std::move(reply));
}
void bulk_create_deals(runtime& rt, std::int64_t tenant, std::vector<deal_fields> items,
                       deal_actor_ref who, idempotency key, callback<stored_response> reply,
                       std::int64_t first) {
  tell<child_kind::deals>(rt, tenant, d_bulk_atom::value, std::move(items), who, std::move(key),
                          first, std::move(reply));
}
void get_deal(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, d_get_atom::value, id, std::move(reply));
}
void update_deal(runtime& rt, std::int64_t tenant, std::int64_t id, deal_fields f,
                 deal_actor_ref who, callback<domain::deal> reply) {
  tell<child_kind::deals>(rt, tenant, d_put_atom::value, id, std::move(f), who, std::move(reply));
}
void delete_deal(runtime& rt, std::int64_t tenant, std::int64_t id, deal_actor_ref who,
                 callback<domain::done> reply) {
  tell<child_kind::deals>(rt, tenant, d_del_atom::value, id, who, std::move(reply));
}
void list_deals(runtime& rt, std::int64_t tenant, domain::deal_query q, int page, int per_page,
                callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, d_list_atom::value, std::move(q), page, per_page,
                          std::move(reply));
}
void list_contact_deals(runtime& rt, std::int64_t tenant, std::int64_t contact_id,
                        domain::deal_query q, int page, int per_page, callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, d_contact_atom::value, contact_id, std::move(q), page,
                          per_page, std::move(reply));
}
void export_deals(runtime& rt, std::int64_t tenant, domain::deal_query q,
                  callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, d_export_atom::value, std::move(q), std::move(reply));
}
void deal_history(runtime& rt, std::int64_t tenant, std::int64_t id, int page, int per_page,
                  callback<std::string> reply) {
  tell<child_kind::deals>(rt, tenant, d_hist_atom::value, id, page, per_page, std::move(reply));
}
void contact_deleted(runtime& rt, std::int64_t tenant, std::int64_t contact_id) {
  tell<child_kind::deals>(rt, tenant, gone_atom::value, true, contact_id);
}
void contact_merged(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t into) {
  tell<child_kind::deals>(rt, tenant, gone_atom::value, from, into);
}
void company_deleted(runtime& rt, std::int64_t tenant, std::int64_t company_id) {
  tell<child_kind::deals>(rt, tenant, gone_atom::value, false, company_id);
}

} // namespace crm::actors
