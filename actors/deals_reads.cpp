// The deals actor (actors/deals_internal.hpp): pipelines (written exclusively) and the reads.
#include "actors/deals_internal.hpp"

namespace crm::actors::deals_impl {

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
                             int per_page, const std::set<std::int64_t>* only) {
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

} // namespace crm::actors::deals_impl
