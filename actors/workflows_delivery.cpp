// The workflows actor (actors/workflows_internal.hpp): the outbox dispatch to workflows and
// subscriptions, webhook deliveries with their retries, and the timers.
#include "actors/workflows_internal.hpp"

namespace crm::actors::workflows_impl {

// ---- outbox dispatch ---------------------------------------------------------------------

bool has_consumers(const workflows_state& st) {
  for (auto& [id, w] : st.workflows)
    if (w.is_active && domain::is_record_event(w.trigger)) return true;
  for (auto& [id, s] : st.subs)
    if (s.is_active) return true;
  return false;
}

// Tells the record actors (contacts, deals, channels, schedule) whether anyone listens to record
// events, when that changed. It goes through the supervisor before the client hears of the change,
// so the client's next write sees it; without listeners the contacts actor writes no events at all,
// so neither this actor nor Postgres does anything for them.
void tell_listeners(wf_actor* self) {
  auto& st = self->state;
  bool any = has_consumers(st);
  if (st.told_listeners == any) return;
  st.told_listeners = any;
  for (auto k : {child_kind::contacts, child_kind::deals, child_kind::channels,
                 child_kind::schedule, child_kind::tasks})
    st.env.rt->route(st.env.tenant_id, k, caf::make_message(listeners_atom::value, any));
}

// New events: take them at once, unless a batch was taken very recently. Every commit of a
// busy tenant announces events; taking them at most every few milliseconds (every second when
// nothing listens: they only need marking) keeps the dispatch transactions few, so the outbox
// costs the write path little (benchmarks/RESULTS.md).
void request_dispatch(wf_actor* self) {
  auto& st = self->state;
  auto gap = has_consumers(st) ? dispatch_gap : idle_dispatch_gap;
  auto since = std::chrono::steady_clock::now() - st.last_dispatch;
  if (since >= gap) return dispatch(self);
  if (st.dispatch_timer) return;
  st.dispatch_timer = true;
  self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(gap - since),
                     outbox_atom::value, tick_atom::value);
}

void dispatch(wf_actor* self) {
  auto& st = self->state;
  if (!st.loaded || st.stopping) return;
  if (st.writes.busy()) {
    st.dispatch_wanted = true;
    return;
  }
  st.dispatch_wanted = false;
  st.last_dispatch = std::chrono::steady_clock::now();
  persistence::event_consumers to;
  for (auto& [id, w] : st.workflows)
    if (w.is_active && domain::is_record_event(w.trigger)) to.workflows.push_back(w);
  for (auto& [id, s] : st.subs)
    if (s.is_active) to.subscriptions.push_back(s);
  st.writes.run([self, to = std::move(to)] {
    db<persistence::dispatch_result>(
        self,
        [tid = self->state.env.tenant_id, to](persistence::pg_conn& c) {
          return persistence::dispatch_outbox(c, tid, to, dispatch_limit);
        },
        [self](domain::outcome<persistence::dispatch_result> r) {
          auto& st = self->state;
          if (!r) {
            log_warn("tenant {}: outbox dispatch failed ({}); retrying", st.env.tenant_id,
                     r.error().detail);
            st.dispatch_retry = true;
          } else {
            for (auto& run : r->runs) add_open_run(self, std::move(run));
            if (r->deliveries) st.delivery_poked = true, st.next_delivery_at = domain::now_micros();
            if (r->events == dispatch_limit) st.dispatch_wanted = true;
          }
          st.writes.done();
          start_ready(self);
          pump_deliveries(self);
        });
  });
}

// ---- deliveries --------------------------------------------------------------------------

void attempt(wf_actor* self, domain::webhook_delivery d);
void pump_deliveries(wf_actor* self);

// There are deliveries due now (new ones, a redelivery, pending ones after a load).
void poke_deliveries(wf_actor* self) {
  auto& st = self->state;
  st.next_delivery_at = domain::now_micros();
  st.delivery_poked = true;
  pump_deliveries(self);
}

void pump_deliveries(wf_actor* self) {
  auto& st = self->state;
  if (!st.loaded || st.stopping || st.fetching || !st.opts || !st.opts->client) return;
  if (st.delivering.size() >= max_delivering) return;
  auto now = domain::now_micros();
  if (!st.next_delivery_at || st.next_delivery_at > now) return;
  st.fetching = true;
  st.delivery_poked = false;
  std::vector<std::int64_t> busy(st.delivering.begin(), st.delivering.end());
  auto want = max_delivering - st.delivering.size();
  using found = std::pair<std::vector<domain::webhook_delivery>, std::int64_t>;
  db<found>(
      self,
      [tid = st.env.tenant_id, busy, want](persistence::pg_conn& c) {
        auto due = persistence::due_deliveries(c, tid, busy, want);
        auto next = due.size() < want ? persistence::next_delivery_due(c, tid) : 0;
        return found{std::move(due), next};
      },
      [self, want](domain::outcome<found> r) {
        auto& st = self->state;
        st.fetching = false;
        if (!r) return;
        auto now = domain::now_micros();
        if (r->first.size() < want) {
          // Everything due is taken: wait for the next due time (or a new delivery), but look
          // again soon while attempts are in flight, as their retries may come due.
          auto next = r->second;
          if (next && next <= now) next = now + 500'000;
          // A poke while this fetch ran may concern rows it could not see yet.
          st.next_delivery_at = st.delivery_poked ? now : next;
        }
        for (auto& d : r->first) attempt(self, std::move(d));
      });
}

// Writes the attempts answered so far in one transaction, unless one is being written (its end
// writes what came meanwhile); then frees their slots and takes the next due deliveries.
void record_attempts(wf_actor* self) {
  auto& st = self->state;
  if (st.recording || st.attempts_unrecorded.empty()) return;
  st.recording = true;
  std::vector<domain::delivery_attempt> batch;
  batch.swap(st.attempts_unrecorded);
  db<domain::done>(
      self,
      [tid = st.env.tenant_id, batch](persistence::pg_conn& c) {
        persistence::record_attempts(c, tid, batch);
        return domain::done{};
      },
      [self, batch](domain::outcome<domain::done> r) {
        auto& st = self->state;
        st.recording = false;
        bool gone = false;
        for (auto& a : batch) {
          st.delivering.erase(a.delivery_id);
          if (!r) continue;
          auto& c = automation_counts();
          (a.delivered ? c.deliveries_delivered : c.deliveries_failed)++;
          if (!a.delivered && !a.next_attempt_at) c.deliveries_given_up++;
          if (a.gone) {
            if (auto it = st.subs.find(a.subscription_id); it != st.subs.end()) {
              it->second.is_active = false;
              it->second.disabled_reason =
                  "the receiver answered 410 Gone on " + domain::format_rfc3339(a.at);
            }
            gone = true;
          }
          if (a.next_attempt_at &&
              (!st.next_delivery_at || a.next_attempt_at < st.next_delivery_at))
            st.next_delivery_at = a.next_attempt_at;
        }
        if (!r) {
          // Not recorded: the deliveries are still pending in Postgres and are tried again.
          st.next_delivery_at = domain::now_micros() + 1'000'000;
          return;
        }
        if (gone) tell_listeners(self);
        record_attempts(self);
        pump_deliveries(self);
      });
}

void attempt(wf_actor* self, domain::webhook_delivery d) {
  auto& st = self->state;
  auto sub = st.subs.find(d.subscription_id);
  // Switched off or deleted after this delivery was fetched: the transaction that did it has
  // already failed (or removed) its pending deliveries, and record_attempt never revives one.
  if (sub == st.subs.end() || !sub->second.is_active) return;
  st.delivering.insert(d.id);
  auto body = envelope(d.event, d.created_at, d.payload);
  net::client_request req;
  req.method = "POST";
  req.url = sub->second.url;
  req.body = body;
  req.headers.emplace_back("content-type", "application/json");
  sign(req.headers, sub->second.secret, "msg_" + std::to_string(d.id), body);
  auto started = domain::now_micros();
  auto done = in_actor<net::client_response>(self, [self, d, started](net::client_response res) {
    auto& st = self->state;
    domain::delivery_attempt a;
    a.delivery_id = d.id;
    a.subscription_id = d.subscription_id;
    a.attempt = d.attempts + 1;
    a.at = started;
    a.duration_ms = res.elapsed.count();
    a.status_code = res.ok ? res.status : 0;
    a.delivered = res.ok && res.status >= 200 && res.status < 300;
    a.gone = res.ok && res.status == 410;
    if (!res.ok)
      a.error = res.error;
    else if (!a.delivered)
      a.error = "the receiver answered " + std::to_string(res.status);
    auto now = domain::now_micros();
    auto window = static_cast<std::int64_t>(st.opts->retry_window * 1e6);
    if (!a.delivered && !a.gone && now - d.retry_from < window) {
      std::uniform_real_distribution<double> jitter(0.0, 1.0);
      auto delay = domain::retry_delay_seconds(a.attempt, st.opts->retry_base, st.opts->retry_max,
                                               jitter(st.rng));
      a.next_attempt_at = now + static_cast<std::int64_t>(delay * 1e6);
    }
    st.attempts_unrecorded.push_back(std::move(a));
    record_attempts(self);
  });
  st.opts->client->send(std::move(req), std::move(done));
}

// ---- timers ------------------------------------------------------------------------------

void fire_schedules(wf_actor* self) {
  auto& st = self->state;
  auto now = domain::now_micros();
  for (auto& [id, w] : st.workflows) {
    if (w.trigger != domain::trigger_type::schedule || !w.is_active || !w.next_run_at ||
        w.next_run_at > now || st.firing.count(id))
      continue;
    st.firing.insert(id);
    json::value payload = json::object();
    if (auto p = w.trigger_config.if_contains("payload"); p && p->is_object()) payload = *p;
    payload.as_object()["scheduled_at"] = domain::format_rfc3339(w.next_run_at);
    auto next = domain::next_schedule_time(w.trigger_config, now);
    create_run(self, w, std::move(payload), 0,
               callback<std::int64_t>([](domain::outcome<std::int64_t>) {}), next);
  }
}

void resume_waiting(wf_actor* self) {
  auto& st = self->state;
  auto now = domain::now_micros();
  for (auto& [id, x] : st.runs)
    if (x.run.status == domain::run_status::waiting && !x.busy && x.run.resume_at <= now) {
      x.run.status = domain::run_status::queued;
      st.ready.push_back(id);
    }
  start_ready(self);
}

void on_tick(wf_actor* self) {
  auto& st = self->state;
  if (st.stopping) return;
  if (!st.loaded) {
    if (!st.loading) load(self); // the load failed (Postgres down): try again
    return;
  }
  if (st.dispatch_retry) {
    st.dispatch_retry = false;
    request_dispatch(self);
  }
  for (auto& [id, x] : st.runs)
    if (x.resave && !x.busy) {
      x.resave = false;
      st.running++;
      save_then(self, id);
    }
  fire_schedules(self);
  resume_waiting(self);
  pump_deliveries(self);
}

} // namespace crm::actors::workflows_impl
