// The deals actor of one tenant (docs/pipeline.md): pipelines, stages and deals, loaded from
// Postgres on first use and served from memory, with a board order and running totals per
// stage. Deal writes are validated against the projected state (what is committed plus every
// write ahead of them), staged with their history rows and events into the open batch, and
// handed to the shared group committer when no batch of this tenant is in flight. Memory and
// replies follow COMMIT; a failed commit answers 503 to its writes and those staged behind them.
// Pipeline and stage changes are exclusive: they wait until nothing is staged or in flight and
// commit alone, with the deal moves they cause.
#include "actors/deals.hpp"

#include "actors/async_io.hpp"
#include "actors/group_batch.hpp"
#include "actors/system.hpp"
#include "domain/clock.hpp"
#include "domain/custom_field.hpp"
#include "domain/json_parse.hpp"
#include "domain/json_writer.hpp"
#include "domain/page_json.hpp"
#include "domain/validation.hpp"
#include "persistence/deal_repo.hpp"
#include "persistence/field_repo.hpp"
#include "persistence/group_committer.hpp"

#include <boost/json.hpp>

#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::actors::deal_fields> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::vector<crm::actors::deal_fields>> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::deal_actor_ref> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::idempotency> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::pipeline_input> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::pipeline_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::stage_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::board_query> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::summary_query> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::deal_query> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::stage> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<int>> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<std::int64_t>> : std::true_type {};
} // namespace caf

namespace crm::actors {
namespace {

namespace json = boost::json;
using domain::errc;
using domain::failure;
using domain::money_sum;
using domain::stage_kind;

using pl_list_atom = caf::atom_constant<caf::atom("pllist")>;
using pl_get_atom = caf::atom_constant<caf::atom("plget")>;
using pl_new_atom = caf::atom_constant<caf::atom("plnew")>;
using pl_put_atom = caf::atom_constant<caf::atom("plput")>;
using pl_del_atom = caf::atom_constant<caf::atom("pldel")>;
using st_new_atom = caf::atom_constant<caf::atom("stnew")>;
using st_get_atom = caf::atom_constant<caf::atom("stget")>;
using st_put_atom = caf::atom_constant<caf::atom("stput")>;
using st_del_atom = caf::atom_constant<caf::atom("stdel")>;
using board_atom = caf::atom_constant<caf::atom("board")>;
using summary_atom = caf::atom_constant<caf::atom("summary")>;
using d_new_atom = caf::atom_constant<caf::atom("dnew")>;
using d_bulk_atom = caf::atom_constant<caf::atom("dbulk")>;
using d_get_atom = caf::atom_constant<caf::atom("dget")>;
using d_put_atom = caf::atom_constant<caf::atom("dput")>;
using d_del_atom = caf::atom_constant<caf::atom("ddel")>;
using d_list_atom = caf::atom_constant<caf::atom("dlist")>;
using d_contact_atom = caf::atom_constant<caf::atom("dcontact")>;
using d_export_atom = caf::atom_constant<caf::atom("dexport")>;
using d_hist_atom = caf::atom_constant<caf::atom("dhist")>;
using gone_atom = caf::atom_constant<caf::atom("gone")>;

constexpr int id_block = 256;
constexpr std::size_t max_batch = 2000;
constexpr std::int64_t rank_gap = 1 << 20;
constexpr std::size_t max_custom_fields_bytes = 16 * 1024;
constexpr std::int64_t idempotency_window = persistence::idempotency_window_micros;

struct batch {
  std::uint64_t seq = 0;
  persistence::deal_batch sql;
  std::unordered_set<std::int64_t> in_group; // deals in the current statement group
  std::vector<continuation> on_commit;
  std::vector<std::function<void(const failure&)>> on_fail;
  std::size_t writes = 0;
};

enum class need : std::uint8_t { read, write, exclusive };

struct held {
  need n;
  std::size_t ids = 0;
  continuation k;
  std::function<void(const failure&)> fail;
};

struct stage_totals {
  std::int64_t count = 0;
  std::map<std::string, money_sum> sums; // cents per currency
};

struct deals_state {
  tenant_env env;
  bool loaded = false;
  bool loading = false;
  bool stopping = false;
  bool exclusive_busy = false; // a pipeline change is committing

  // Committed state.
  std::map<std::int64_t, domain::pipeline> pipelines;
  std::unordered_map<std::int64_t, std::int64_t> stage_pipeline; // stage → pipeline
  std::unordered_map<std::int64_t, domain::deal> deals;
  std::unordered_map<std::int64_t, std::set<std::pair<std::int64_t, std::int64_t>>> board;
  std::unordered_map<std::int64_t, stage_totals> totals;
  std::unordered_map<std::int64_t, std::set<std::int64_t>> by_contact;
  std::unordered_map<std::int64_t, std::int64_t> next_rank; // per stage, only grows
  // Rendered boards by query, dropped by every change to a deal or a pipeline: a board shown to
  // many users between two changes is rendered once.
  std::unordered_map<std::string, std::string> board_cache;
  std::unordered_map<std::string, persistence::idempotency_record> keys;
  std::int64_t keys_pruned_at = 0; // persistence::forget_expired_keys
  domain::field_definitions defs;
  std::string currency = "USD";
  bool event_listeners = true;
  bool listeners_told_while_loading = false;
  // Contacts and companies deleted since the actor started: a deal staged with one of them is
  // written without it (the statement re-reads them) and applied without it.
  std::unordered_set<std::int64_t> gone_contacts, gone_companies;

  // Projection of staged and in-flight writes over the committed state.
  struct pending {
    std::uint64_t seq;
    std::optional<domain::deal> value; // nothing: deleted
  };
  std::unordered_map<std::int64_t, pending> p_deals;
  std::unordered_map<std::string, std::pair<std::uint64_t, std::string>> p_keys;

  std::deque<std::int64_t> ids;
  bool reserving = false;
  std::uint64_t next_seq = 1;
  batch open;
  std::optional<batch> in_flight;
  std::deque<held> waiting;
  int pending_io = 0;

  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
  static inline const char* name = "deals";
};

using deals_actor = caf::stateful_actor<deals_state>;

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

template <class T>
void reply_missing(deals_actor* self, persistence::pipeline_record kind, std::int64_t id,
                   const char* what, callback<T> reply) {
  reply_not_held(
      self->state.env,
      [kind, id](persistence::pg_conn& c) { return persistence::tenant_of(c, kind, id); },
      missing(what), std::move(reply));
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

void drain(deals_actor* self, const failure* error = nullptr);

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
                std::size_t ids = 0) {
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
                   const domain::deal& after, const deal_actor_ref& who, bool history = true) {
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
                  std::vector<std::int64_t> ids = {}) {
  auto r = domain::make_audit(who, st.env.tenant_id, "deal", id, action);
  r.fields = std::move(fields);
  r.status = status;
  r.ids = std::move(ids);
  st.open.sql.audit.push_back(std::move(r));
}

// Stages `after` into the open batch (projection, row, history, events).
void stage_deal(deals_actor* self, const domain::deal* before, domain::deal after,
                const deal_actor_ref& who, bool history = true) {
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

// ---- deal rules that need the state ---------------------------------------------------------

std::vector<domain::loc_part> at(std::vector<domain::loc_part> l, std::string key) {
  l.emplace_back(std::move(key));
  return l;
}

struct built {
  domain::deal next;
  std::vector<domain::issue> issues;
  bool stage_changed = false;
};

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

// The reference issues of each item of a write (contact, company, owner not the tenant's).
using ref_issues = std::vector<std::vector<domain::issue>>;

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

enum class key_state : std::uint8_t { fresh, replay, pending, conflict };

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
             callback<stored_response> reply) {
  std::vector<const deal_fields*> ptrs;
  for (auto& f : items) ptrs.push_back(&f);
  // check_refs copies what it needs from `ptrs` before the lambda below is called; moving the
  // vector keeps its elements where they are.
  check_refs(
      self, ptrs,
      [self, items = std::move(items), who, key, reply](domain::outcome<ref_issues> found) mutable {
        if (!found) return reply(found.error());
        when_ready(
            self, need::write, fail_with(reply),
            [self, items = std::move(items), who, key, reply, refs = std::move(*found)]() mutable {
              if (answer_known_key(self, key, reply)) return;
              json::array results;
              std::vector<std::int64_t> created;
              for (std::size_t i = 0; i < items.size(); ++i) {
                auto issues = items[i].issues;
                issues.insert(issues.end(), refs[i].begin(), refs[i].end());
                std::optional<domain::deal> d;
                if (issues.empty()) d = stage_create(self, items[i], who, issues);
                json::object r{{"index", static_cast<std::int64_t>(i)}};
                if (d) {
                  r["id"] = d->id;
                  created.push_back(d->id);
                } else {
                  json::array errs;
                  for (auto& is : issues) {
                    json::array loc;
                    for (auto& p : is.loc) std::visit([&](auto& v) { loc.emplace_back(v); }, p);
                    errs.push_back(json::object{{"loc", loc}, {"msg", is.msg}, {"type", is.type}});
                  }
                  r["errors"] = std::move(errs);
                }
                results.push_back(std::move(r));
              }
              auto body = json::serialize(json::object{{"results", std::move(results)}});
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
    stage_write(
        self, [reply] { reply(domain::done{}); }, fail_with(reply));
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

// ---- pipelines (exclusive) ----------------------------------------------------------------

void commit_change(deals_actor* self, persistence::pipeline_change ch,
                   std::function<void(domain::outcome<std::vector<domain::pipeline>>)> done) {
  auto& st = self->state;
  st.exclusive_busy = true;
  ch.tenant_id = st.env.tenant_id;
  ch.deals.tenant_id = st.env.tenant_id;
  auto shared = std::make_shared<persistence::pipeline_change>(std::move(ch));
  db<std::vector<domain::pipeline>>(
      self,
      [shared](persistence::pg_conn& c) { return persistence::commit_pipeline_change(c, *shared); },
      [self, shared, done](domain::outcome<std::vector<domain::pipeline>> r) {
        auto& st = self->state;
        st.exclusive_busy = false;
        if (r) {
          st.board_cache.clear();
          for (auto pid : shared->deleted_pipelines) {
            if (auto it = st.pipelines.find(pid); it != st.pipelines.end()) {
              for (auto& s : it->second.stages) st.stage_pipeline.erase(s.id);
              st.pipelines.erase(it);
            }
          }
          for (auto sid : shared->deleted_stages) st.stage_pipeline.erase(sid);
          for (auto& p : *r) {
            if (auto it = st.pipelines.find(p.id); it != st.pipelines.end())
              for (auto& s : it->second.stages) st.stage_pipeline.erase(s.id);
            keep_pipeline(st, p);
          }
          apply_batch(st, shared->deals);
          if (!shared->deals.events.empty())
            st.env.rt->route(st.env.tenant_id, child_kind::workflows,
                             caf::make_message(outbox_atom::value));
        }
        done(std::move(r));
        drain(self);
      });
}

template <class T>
bool find_pipeline(deals_actor* self, std::int64_t id, const callback<T>& reply,
                   domain::pipeline** out) {
  auto it = self->state.pipelines.find(id);
  if (it == self->state.pipelines.end()) {
    reply_missing(self, persistence::pipeline_record::pipeline, id, "pipeline", reply);
    return false;
  }
  *out = &it->second;
  return true;
}

// A stage of pipeline `p`; a stage of another pipeline of the tenant is 404 too.
template <class T>
const domain::stage* find_stage_of(deals_actor* self, const domain::pipeline& p,
                                   std::int64_t stage_id, const callback<T>& reply) {
  if (auto s = p.find(stage_id)) return s;
  if (self->state.stage_pipeline.count(stage_id))
    reply(missing("stage"));
  else
    reply_missing(self, persistence::pipeline_record::stage, stage_id, "stage", reply);
  return nullptr;
}

std::int64_t deals_in_stage(const deals_state& st, std::int64_t stage) {
  auto it = st.totals.find(stage);
  return it == st.totals.end() ? 0 : it->second.count;
}

std::int64_t deals_in_pipeline(const deals_state& st, const domain::pipeline& p) {
  std::int64_t n = 0;
  for (auto& s : p.stages) n += deals_in_stage(st, s.id);
  return n;
}

// Saves `next` (and, when it becomes the default, the previous default without it).
void save_pipeline(deals_actor* self, domain::pipeline next, callback<std::string> reply,
                   std::function<std::string(const domain::pipeline&)> render) {
  auto& st = self->state;
  persistence::pipeline_change ch;
  if (next.is_default)
    for (auto& [id, p] : st.pipelines)
      if (p.is_default && id != next.id) {
        auto prev = p;
        prev.is_default = false;
        prev.updated_at = std::max(domain::now_micros(), p.updated_at + 1);
        ch.saves.push_back(std::move(prev));
      }
  ch.saves.push_back(next);
  // The pipeline asked for is the last one saved (commit_pipeline_change keeps the order).
  commit_change(
      self, std::move(ch), [reply, render](domain::outcome<std::vector<domain::pipeline>> r) {
        if (!r) return reply(r.error());
        if (r->empty())
          return reply(failure::of(errc::internal, "the saved pipeline was not returned"));
        reply(render(r->back()));
      });
}

failure conflict(std::string why) {
  return failure::of(errc::conflict, std::move(why));
}

// ---- reads --------------------------------------------------------------------------------

std::string render_deal_page(const deals_state& st, const domain::deal_query& q, int page,
                             int per_page, const std::set<std::int64_t>* only = nullptr) {
  std::vector<const domain::deal*> found;
  auto consider = [&](const domain::deal& d) {
    if (domain::deal_matches(d, q)) found.push_back(&d);
  };
  if (only) {
    for (auto id : *only)
      if (auto it = st.deals.find(id); it != st.deals.end()) consider(it->second);
  } else {
    for (auto& [id, d] : st.deals) consider(d);
  }
  auto less = [&q](const domain::deal* a, const domain::deal* b) {
    return domain::deal_before(*a, *b, q);
  };
  auto total = static_cast<std::int64_t>(found.size());
  auto from = std::min<std::size_t>(found.size(), static_cast<std::size_t>(page - 1) * per_page);
  auto to = std::min<std::size_t>(found.size(), from + static_cast<std::size_t>(per_page));
  std::partial_sort(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(to), found.end(),
                    less);
  std::string out = "{\"items\":[";
  for (auto i = from; i < to; ++i) {
    if (i > from) out += ',';
    domain::append_deal(out, *found[i]);
  }
  auto pages = per_page > 0 ? (total + per_page - 1) / per_page : 0;
  out += "],\"total\":" + std::to_string(total) + ",\"page\":" + std::to_string(page) +
         ",\"per_page\":" + std::to_string(per_page) + ",\"pages\":" + std::to_string(pages) + "}";
  return out;
}

void write_sums(domain::json_writer& w, const std::map<std::string, money_sum>& sums) {
  w.begin_object();
  for (auto& [cur, v] : sums) w.key(cur).value(domain::format_cents(v));
  w.end_object();
}

std::string render_board(const deals_state& st, const domain::pipeline& p, const board_query& q) {
  std::string out;
  out.reserve(256 + static_cast<std::size_t>(q.per_stage) * p.stages.size() * 200);
  domain::json_writer w(out);
  w.begin_object().key("pipeline_id").value(p.id).key("stages").begin_array();
  for (auto& s : p.stages) {
    if (q.stage_id && s.id != *q.stage_id) continue;
    w.begin_object().key("stage").raw(domain::encode_stage(s));
    auto t = st.totals.find(s.id);
    w.key("count").value(t == st.totals.end() ? std::int64_t{0} : t->second.count);
    w.key("sums");
    write_sums(w, t == st.totals.end() ? std::map<std::string, money_sum>{} : t->second.sums);
    w.key("deals").begin_array();
    bool more = false;
    if (auto b = st.board.find(s.id); b != st.board.end()) {
      auto it = b->second.begin();
      for (std::int64_t i = 0; i < q.offset && it != b->second.end(); ++i) ++it;
      bool first = true;
      for (int n = 0; it != b->second.end() && n < q.per_stage; ++it, ++n) {
        auto d = st.deals.find(it->second);
        if (d == st.deals.end()) continue; // never: the board indexes the deals held
        if (!first) out += ',';
        first = false;
        domain::append_deal_card(out, d->second);
      }
      more = it != b->second.end();
    }
    w.end_array(); // the cards went straight into `out`, with their own commas
    w.key("has_more").value(more).end_object();
  }
  w.end_array().end_object();
  return out;
}

std::string render_summary(const deals_state& st, const domain::pipeline& p,
                           const summary_query& q) {
  bool filtered = q.owner_id || q.close_after || q.close_before;
  std::string out;
  domain::json_writer w(out);
  std::int64_t total_count = 0;
  std::map<std::string, money_sum> total_sums, total_weighted; // weighted: cents × percent
  w.begin_object().key("pipeline_id").value(p.id).key("stages").begin_array();
  for (auto& s : p.stages) {
    std::int64_t count = 0;
    std::map<std::string, money_sum> sums;
    if (!filtered) {
      if (auto t = st.totals.find(s.id); t != st.totals.end()) {
        count = t->second.count;
        sums = t->second.sums;
      }
    } else if (auto b = st.board.find(s.id); b != st.board.end()) {
      for (auto& [rank, id] : b->second) {
        auto& d = st.deals.at(id);
        if (q.owner_id && d.owner_id != q.owner_id) continue;
        if (q.close_after && (!d.expected_close || *d.expected_close < *q.close_after)) continue;
        if (q.close_before && (!d.expected_close || *d.expected_close > *q.close_before)) continue;
        ++count;
        if (d.amount) sums[d.currency] += *d.amount;
      }
    }
    std::map<std::string, money_sum> weighted;
    for (auto& [cur, v] : sums) {
      weighted[cur] = domain::round_weighted(v * s.probability);
      total_sums[cur] += v;
      total_weighted[cur] += v * s.probability;
    }
    total_count += count;
    w.begin_object()
        .key("stage_id")
        .value(s.id)
        .key("name")
        .value(s.name)
        .key("kind")
        .value(domain::to_string(s.kind))
        .key("probability")
        .value(static_cast<std::int64_t>(s.probability))
        .key("count")
        .value(count)
        .key("sums");
    write_sums(w, sums);
    w.key("weighted");
    write_sums(w, weighted);
    w.end_object();
  }
  for (auto& [cur, v] : total_weighted) v = domain::round_weighted(v);
  w.end_array().key("totals").begin_object().key("count").value(total_count).key("sums");
  write_sums(w, total_sums);
  w.key("weighted");
  write_sums(w, total_weighted);
  w.end_object().end_object();
  return out;
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
                      idempotency& key, callback<stored_response>& reply) {
        auto _ = measure();
        do_bulk(self, std::move(items), who, std::move(key), std::move(reply));
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

} // namespace

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
                       deal_actor_ref who, idempotency key, callback<stored_response> reply) {
  tell<child_kind::deals>(rt, tenant, d_bulk_atom::value, std::move(items), who, std::move(key),
                          std::move(reply));
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
void company_deleted(runtime& rt, std::int64_t tenant, std::int64_t company_id) {
  tell<child_kind::deals>(rt, tenant, gone_atom::value, false, company_id);
}

} // namespace crm::actors
