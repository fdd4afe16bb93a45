// The workflow actor of one tenant (docs/automation.md): the only writer of the tenant's
// workflows, runs and webhook subscriptions.
//
// - Definitions load on first use and are served from memory. Changes, and taking events from
//   the outbox, run one at a time (`writes`, actors/writer.hpp), so a batch of events is matched
//   against the definitions as they were committed before it.
// - Runs step one action at a time: the outcome of each step is written before the next
//   starts, so a restart resumes at the first unfinished step. Delays are stored resume times.
// - Deliveries are read from Postgres when due (a receiver that is down for a day must not
//   fill memory) and attempted a few at a time; each attempt is recorded with its next time.
// Nothing blocks the actor: the pool and the HTTP client answer with continuations.
#include "actors/workflows_internal.hpp"

namespace crm::actors {

struct runtime_automation {
  automation_options opts;
  std::atomic<bool> sweeping{false};
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  std::thread sweeper;
};

namespace workflows_impl {

// Whether anything waits on time: the tick runs only then, so an idle tenant's actor costs
// nothing between requests (many tenants are live at once).
bool needs_tick(const workflows_state& st) {
  // Any open run may come to wait (a delay, a retried save or step): checking for one is O(1),
  // and this runs after every completion.
  if (!st.loaded || st.dispatch_retry || st.next_delivery_at || !st.runs.empty()) return true;
  for (auto& [id, w] : st.workflows)
    if (w.trigger == domain::trigger_type::schedule && w.is_active && w.next_run_at) return true;
  return false;
}

void arm_tick(wf_actor* self) {
  auto& st = self->state;
  if (st.tick_armed || st.stopping || !needs_tick(st)) return;
  st.tick_armed = true;
  self->delayed_send(self, tick_every, tick_atom::value);
}

void dispatch(wf_actor* self);

// After each result of work started outside: quit when stopping and nothing is out; else take
// the events that arrived while a write was under way once none is, and keep the tick going if
// something waits on time.
void settle(wf_actor* self) {
  auto& st = self->state;
  if (st.stopping && st.pending_io == 0 && !st.writes.busy() && !st.loading) return self->quit();
  if (st.dispatch_wanted && !st.writes.busy()) dispatch(self);
  arm_tick(self);
}

std::string to_text(const failure& f) {
  if (f.code != errc::validation) return f.detail;
  std::string out;
  for (auto& i : f.issues) {
    if (!out.empty()) out += "; ";
    std::string loc;
    for (auto& p : i.loc) {
      if (!loc.empty()) loc += '.';
      if (auto s = std::get_if<std::string>(&p))
        loc += *s;
      else
        loc += std::to_string(std::get<std::int64_t>(p));
    }
    out += loc + ": " + i.msg;
  }
  return out.empty() ? f.detail : out;
}

// ---- loading -------------------------------------------------------------------------------

void tell_listeners(wf_actor* self);
void start_ready(wf_actor* self);
void pump_deliveries(wf_actor* self);

void count_finished(domain::run_status s) {
  auto& c = automation_counts();
  (s == domain::run_status::succeeded ? c.runs_succeeded : c.runs_failed)++;
}

// A stored run: counted when it was finished at creation (conditions not met, depth limit),
// else kept to be stepped.
void add_open_run(wf_actor* self, domain::workflow_run r) {
  auto& st = self->state;
  if (domain::finished(r.status)) return count_finished(r.status);
  auto id = r.id;
  bool runnable = r.status != domain::run_status::waiting;
  st.runs[id] = open_run{std::move(r)};
  if (runnable) st.ready.push_back(id);
}

void load(wf_actor* self) {
  auto& st = self->state;
  if (st.loading) return;
  st.loading = true;
  db<persistence::automation_snapshot>(
      self,
      [tid = st.env.tenant_id](persistence::pg_conn& c) {
        return persistence::load_automation(c, tid);
      },
      [self](domain::outcome<persistence::automation_snapshot> r) {
        auto& st = self->state;
        st.loading = false;
        if (!r) return release_waiting(st.waiting, &r.error());
        for (auto& w : r->workflows) st.workflows[w.id] = std::move(w);
        for (auto& s : r->subscriptions) st.subs[s.id] = std::move(s);
        for (auto& run : r->open_runs) add_open_run(self, std::move(run));
        st.loaded = true;
        tell_listeners(self);
        st.next_delivery_at = domain::now_micros(); // look for deliveries left pending
        release_waiting(st.waiting, nullptr);
        dispatch(self);
        start_ready(self);
        pump_deliveries(self);
      });
}

// ---- requests ----------------------------------------------------------------------------

std::string public_url(const workflows_state& st) {
  return st.opts ? st.opts->public_url : "";
}

template <class T>
void reply_missing_workflow(wf_actor* self, std::int64_t id, callback<T> reply) {
  reply_not_held(
      self->state.env,
      [id](persistence::pg_conn& c) { return persistence::tenant_of_workflow(c, id); },
      failure::of(errc::not_found, "workflow not found"), std::move(reply));
}

template <class T>
void reply_missing_subscription(wf_actor* self, std::int64_t id, callback<T> reply) {
  reply_not_held(
      self->state.env,
      [id](persistence::pg_conn& c) { return persistence::tenant_of_subscription(c, id); },
      failure::of(errc::not_found, "webhook subscription not found"), std::move(reply));
}

// Stores `w` and answers it. Runs in its turn among the writes: the caller took the current
// definition in the same continuation, so concurrent changes never overwrite each other.
// `write_schedule`: next_run_at is written too (re-planned); otherwise the stored one stays, as a
// schedule that fires meanwhile moves it.
void save_workflow(wf_actor* self, domain::workflow w, bool write_schedule,
                   callback<std::string> reply) {
  // A webhook workflow always has a secret: one drawn here is shown in this answer, never again.
  auto drawn = domain::ensure_webhook_secret(w);
  db<domain::workflow>(
      self,
      [w, write_schedule](persistence::pg_conn& c) {
        return persistence::save_workflow(c, w, write_schedule);
      },
      [self, reply, drawn](domain::outcome<domain::workflow> r) {
        auto& st = self->state;
        if (r) {
          st.workflows[r->id] = *r;
          tell_listeners(self);
          auto o = domain::workflow_to_json(*r, public_url(st));
          if (drawn) o["webhook_secret"] = *drawn;
          reply(json::serialize(o));
        } else {
          reply(r.error());
        }
      });
}

// next_run_at of an active schedule workflow, planned from now.
std::int64_t plan(const domain::workflow& w) {
  if (w.trigger != domain::trigger_type::schedule || !w.is_active) return 0;
  return domain::next_schedule_time(w.trigger_config, domain::now_micros());
}

// Applies `p` to the current definition (in its turn among the writes); answers a 422 or stores the
// result.
void do_update(wf_actor* self, const domain::workflow& cur, const workflow_patch& p,
               callback<std::string> reply) {
  auto next = cur;
  std::vector<domain::issue> issues;
  if (p.name) next.name = *p.name;
  if (p.description) next.description = *p.description;
  if (p.trigger) next.trigger = *p.trigger;
  if (p.conditions) next.conditions = *p.conditions;
  if (p.actions) next.actions = *p.actions;
  if (p.is_active) next.is_active = *p.is_active;
  if (p.webhook_secret) next.webhook_secret = *p.webhook_secret;
  if (p.trigger || p.trigger_config) {
    json::value cfg = p.trigger_config ? *p.trigger_config : json::value(cur.trigger_config);
    // A new trigger type without a new config starts from an empty one.
    if (p.trigger && *p.trigger != cur.trigger && !p.trigger_config) cfg = json::object();
    auto parsed = domain::parse_trigger_config(next.trigger, cfg, issues);
    if (!issues.empty()) return reply(failure::invalid(std::move(issues)));
    next.trigger_config = *parsed;
  }
  bool replan = p.trigger || p.trigger_config || (p.is_active && *p.is_active != cur.is_active);
  if (replan) next.next_run_at = plan(next);
  next.updated_at = std::max(domain::now_micros(), cur.updated_at + 1);
  save_workflow(self, std::move(next), replan, std::move(reply));
}

// Stores `s` and answers it, in its turn among the writes (see save_workflow).
void save_subscription(wf_actor* self, domain::webhook_subscription s,
                       std::optional<std::string> shown_secret, callback<std::string> reply);

// Applies `p` to the subscription as the changes before it left it (in its turn).
void update_subscription_now(wf_actor* self, std::int64_t id, const subscription_patch& p,
                             callback<std::string> reply) {
  auto& subs = self->state.subs;
  auto it = subs.find(id);
  if (it == subs.end()) return reply_missing_subscription(self, id, reply);
  auto next = it->second;
  if (p.url) next.url = *p.url;
  if (p.events) next.events = *p.events;
  if (p.description) next.description = *p.description;
  if (p.secret) next.secret = *p.secret;
  if (p.is_active) {
    if (*p.is_active && !next.is_active) next.disabled_reason.reset();
    next.is_active = *p.is_active;
  }
  next.updated_at = std::max(domain::now_micros(), it->second.updated_at + 1);
  save_subscription(self, std::move(next), std::nullopt, reply);
}

void save_subscription(wf_actor* self, domain::webhook_subscription s,
                       std::optional<std::string> shown_secret, callback<std::string> reply) {
  db<domain::webhook_subscription>(
      self, [s](persistence::pg_conn& c) { return persistence::save_subscription(c, s); },
      [self, reply, shown_secret](domain::outcome<domain::webhook_subscription> r) {
        auto& st = self->state;
        if (r) {
          st.subs[r->id] = *r;
          tell_listeners(self);
          auto o = domain::subscription_to_json(*r);
          if (shown_secret) o["secret"] = *shown_secret;
          reply(json::serialize(o));
        } else {
          reply(r.error());
        }
      });
}

// A Standard Webhooks message id seen in the last 10 minutes (twice the timestamp tolerance):
// the same message again gets the run it started (0 while that run is being stored), never a
// second run.
std::optional<std::int64_t> replayed_run(workflows_state& st, std::int64_t workflow_id,
                                         const std::string& msg_id) {
  auto now = domain::now_seconds();
  auto it = st.webhook_ids.find({workflow_id, msg_id});
  if (it == st.webhook_ids.end() || it->second.first < now - 600) return std::nullopt;
  return it->second.second;
}

void remember_webhook_id(workflows_state& st, std::int64_t workflow_id, std::string msg_id,
                         std::int64_t run_id) {
  auto now = domain::now_seconds();
  if (st.webhook_ids.size() >= 4096)
    std::erase_if(st.webhook_ids, [now](auto& kv) { return kv.second.first < now - 600; });
  if (st.webhook_ids.size() >= 65536) st.webhook_ids.erase(st.webhook_ids.begin());
  st.webhook_ids[{workflow_id, std::move(msg_id)}] = {now, run_id};
}

caf::behavior workflows_behavior(wf_actor* self, tenant_env env) {
  auto& st = self->state;
  st.env = env;
  st.opts = automation_options_of(*env.rt);
  auto measure = instrument(self, child_kind::workflows);
  // Load at once, whatever the first message: unfinished runs and due deliveries must resume
  // even when the first request is a read that never needs the definitions.
  load(self);
  return {
      [self, measure](resume_atom, continuation& k) {
        auto _ = measure();
        k();
      },
      [self](tick_atom) {
        self->state.tick_armed = false;
        on_tick(self);
        arm_tick(self);
      },
      [self, measure](outbox_atom) {
        auto _ = measure();
        when_loaded(
            self, [](const failure&) {}, [self] { request_dispatch(self); });
      },
      [self](outbox_atom, tick_atom) {
        self->state.dispatch_timer = false;
        dispatch(self);
      },
      // A contact merged into another: the open runs acting on it act on the survivor (their
      // stored payloads were changed in the merge's transaction).
      [self, measure](merged_atom, std::int64_t from, std::int64_t into) {
        auto _ = measure();
        when_loaded(
            self, [](const failure&) {},
            [self, from, into] {
              for (auto& [id, x] : self->state.runs)
                domain::move_payload_contact(x.run.payload, from, into);
            });
      },
      [self, measure](wake_atom) {
        auto _ = measure();
        when_loaded(
            self, [](const failure&) {},
            [self] {
              dispatch(self);
              self->state.next_delivery_at = domain::now_micros();
              on_tick(self);
            });
      },
      [self, measure](list_atom, workflow_filter& f, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, f, reply] {
          auto& st = self->state;
          reply(domain::render_newest_first(
              st.workflows,
              [&f](const domain::workflow& w) {
                return (!f.trigger || w.trigger == *f.trigger) &&
                       (!f.is_active || w.is_active == *f.is_active);
              },
              [&st](const domain::workflow& w) {
                return domain::workflow_to_json(w, public_url(st));
              },
              f.page, f.per_page));
        });
      },
      [self, measure](get_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          auto& st = self->state;
          auto it = st.workflows.find(id);
          if (it == st.workflows.end()) return reply_missing_workflow(self, id, reply);
          reply(json::serialize(domain::workflow_to_json(it->second, public_url(st))));
        });
      },
      [self, measure](info_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          auto& st = self->state;
          auto it = st.workflows.find(id);
          if (it == st.workflows.end()) return reply_missing_workflow(self, id, reply);
          auto& w = it->second;
          json::object o;
          o["has_secret"] = w.webhook_secret.has_value();
          o["workflow_id"] = w.id;
          o["workflow_name"] = w.name;
          o["trigger_type"] = domain::to_string(w.trigger);
          o["is_webhook_trigger"] = w.trigger == domain::trigger_type::webhook;
          o["webhook_url"] = domain::workflow_to_json(w, public_url(st))["webhook_url"];
          reply(json::serialize(o));
        });
      },
      [self, measure](create_atom, domain::workflow& w, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, w = std::move(w), reply]() mutable {
          w.id = 0;
          w.tenant_id = self->state.env.tenant_id;
          w.created_at = w.updated_at = domain::now_micros();
          w.next_run_at = plan(w);
          write_in_turn(self, reply, [self, w = std::move(w)](callback<std::string> reply) {
            save_workflow(self, w, true, reply);
          });
        });
      },
      [self, measure](update_atom, std::int64_t id, workflow_patch& p,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, p = std::move(p), reply]() mutable {
          write_in_turn(self, reply, [self, id, p](callback<std::string> reply) {
            // The definition as the changes before this one left it.
            auto& st = self->state;
            auto it = st.workflows.find(id);
            if (it == st.workflows.end()) return reply_missing_workflow(self, id, reply);
            do_update(self, it->second, p, reply);
          });
        });
      },
      [self, measure](delete_atom, std::int64_t id, callback<domain::done>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          write_in_turn(self, reply, [self, id](callback<domain::done> reply) {
            if (!self->state.workflows.count(id)) return reply_missing_workflow(self, id, reply);
            db<domain::done>(
                self,
                [tid = self->state.env.tenant_id, id](persistence::pg_conn& c) {
                  persistence::delete_workflow(c, tid, id);
                  return domain::done{};
                },
                [self, id, reply](domain::outcome<domain::done> r) {
                  auto& st = self->state;
                  if (r) {
                    st.workflows.erase(id);
                    tell_listeners(self);
                    for (auto it = st.runs.begin(); it != st.runs.end();) {
                      if (it->second.run.workflow_id != id) {
                        ++it;
                      } else if (it->second.busy || it->second.in_step) {
                        it->second.cancelled = true;
                        ++it;
                      } else {
                        it = st.runs.erase(it);
                      }
                    }
                  }
                  reply(r ? domain::outcome<domain::done>(domain::done{})
                          : domain::outcome<domain::done>(r.error()));
                });
          });
        });
      },
      [self, measure](run_atom, std::int64_t id, json::value& payload,
                      callback<std::int64_t>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, payload, reply] {
          auto& st = self->state;
          auto it = st.workflows.find(id);
          if (it == st.workflows.end()) return reply_missing_workflow(self, id, reply);
          auto& w = it->second;
          if (w.trigger != domain::trigger_type::manual)
            return reply(failure::of(errc::conflict, "only a manual workflow can be run by hand"));
          if (!w.is_active) return reply(failure::of(errc::conflict, "the workflow is inactive"));
          create_run(self, w, payload, 0, reply);
        });
      },
      [self, measure](hook_atom, std::int64_t id, webhook_call& call,
                      callback<std::int64_t>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, call = std::move(call), reply] {
          auto& st = self->state;
          auto it = st.workflows.find(id);
          if (it == st.workflows.end())
            return reply(
                failure::of(errc::invalid_credentials, std::string(domain::webhook_refused)));
          auto& w = it->second;
          if (auto refusal = domain::webhook_refusal(w.webhook_secret, call.creds, call.body,
                                                     domain::now_seconds()))
            return reply(failure::of(errc::invalid_credentials, std::string(*refusal)));
          // A signed message id seen before: its run, not another (checked once signed).
          const bool standard = w.webhook_secret && call.creds.std_signature;
          if (standard) {
            if (auto run = replayed_run(self->state, id, *call.creds.std_id)) {
              if (*run == 0)
                return reply(failure::of(errc::conflict, "this webhook-id is being processed"));
              return reply(*run);
            }
          }
          if (w.trigger != domain::trigger_type::webhook)
            return reply(failure::of(errc::conflict, "the workflow is not a webhook workflow"));
          if (!w.is_active) return reply(failure::of(errc::conflict, "the workflow is inactive"));
          json::value payload = json::object();
          if (!call.body.empty()) {
            json::error_code ec;
            payload = crm::domain::parse_json(call.body, ec);
            if (ec)
              return reply(failure::invalid(
                  {{{"body"}, "JSON decode error: " + ec.message(), "json_invalid"}}));
            if (auto at = domain::nul_location(call.body, payload))
              return reply(failure::invalid({domain::nul_issue(std::move(*at))}));
          }
          auto done = reply;
          if (standard) {
            remember_webhook_id(self->state, id, *call.creds.std_id, 0); // in progress
            done = callback<std::int64_t>(
                [self, id, msg_id = *call.creds.std_id, reply](domain::outcome<std::int64_t> r) {
                  if (r)
                    remember_webhook_id(self->state, id, msg_id, *r);
                  else
                    self->state.webhook_ids.erase({id, msg_id});
                  reply(std::move(r));
                });
          }
          create_run(self, w, std::move(payload), std::clamp(call.depth, 0, 100), done);
        });
      },
      [self, measure](runs_atom, std::int64_t id, std::optional<domain::run_status> status,
                      int page, int per_page, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, status, page, per_page, reply] {
          auto& st = self->state;
          if (!st.workflows.count(id)) return reply_missing_workflow(self, id, reply);
          st.env.pool->run<std::string>(
              [tid = st.env.tenant_id, id, status, page, per_page](persistence::pg_conn& c) {
                return persistence::runs_page_json(c, tid, id, status, page, per_page);
              },
              [reply](domain::outcome<std::string> r) { reply(std::move(r)); });
        });
      },
      [self, measure](getrun_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        auto& st = self->state;
        auto pool = st.env.pool;
        pool->run<std::optional<std::string>>(
            [tid = st.env.tenant_id, id](persistence::pg_conn& c) {
              return persistence::run_json(c, tid, id);
            },
            [pool, tid = st.env.tenant_id, id,
             reply](domain::outcome<std::optional<std::string>> r) {
              if (!r) return reply(r.error());
              if (*r) return reply(std::move(**r));
              reply_not_held(
                  *pool, tid,
                  [id](persistence::pg_conn& c) { return persistence::tenant_of_run(c, id); },
                  failure::of(errc::not_found, "workflow run not found"), reply);
            });
      },
      // Subscriptions.
      [self, measure](sub_atom, list_atom, int page, int per_page, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, page, per_page, reply] {
          reply(domain::render_newest_first(
              self->state.subs, [](const domain::webhook_subscription&) { return true; },
              [](const domain::webhook_subscription& s) { return domain::subscription_to_json(s); },
              page, per_page));
        });
      },
      [self, measure](sub_atom, get_atom, std::int64_t id, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          auto& subs = self->state.subs;
          auto it = subs.find(id);
          if (it == subs.end()) return reply_missing_subscription(self, id, reply);
          reply(json::serialize(domain::subscription_to_json(it->second)));
        });
      },
      [self, measure](sub_atom, create_atom, domain::webhook_subscription& s, bool generated,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, s = std::move(s), generated, reply]() mutable {
          s.id = 0;
          s.tenant_id = self->state.env.tenant_id;
          s.created_at = s.updated_at = domain::now_micros();
          std::optional<std::string> shown;
          if (generated) shown = s.secret;
          write_in_turn(self, reply, [self, s = std::move(s), shown](callback<std::string> reply) {
            save_subscription(self, s, shown, reply);
          });
        });
      },
      [self, measure](sub_atom, update_atom, std::int64_t id, subscription_patch& p,
                      callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, p = std::move(p), reply] {
          write_in_turn(self, reply, [self, id, p](callback<std::string> reply) {
            update_subscription_now(self, id, p, reply);
          });
        });
      },
      [self, measure](sub_atom, delete_atom, std::int64_t id, callback<domain::done>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, reply] {
          write_in_turn(self, reply, [self, id](callback<domain::done> reply) {
            if (!self->state.subs.count(id)) return reply_missing_subscription(self, id, reply);
            db<domain::done>(
                self,
                [tid = self->state.env.tenant_id, id](persistence::pg_conn& c) {
                  persistence::delete_subscription(c, tid, id);
                  return domain::done{};
                },
                [self, id, reply](domain::outcome<domain::done> r) {
                  if (r) {
                    self->state.subs.erase(id);
                    tell_listeners(self);
                  }
                  reply(std::move(r));
                });
          });
        });
      },
      [self, measure](deliv_atom, std::int64_t id, std::optional<std::string>& status, int page,
                      int per_page, callback<std::string>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, id, status, page, per_page, reply] {
          auto& st = self->state;
          if (!st.subs.count(id)) return reply_missing_subscription(self, id, reply);
          st.env.pool->run<std::string>(
              [tid = st.env.tenant_id, id, status, page, per_page](persistence::pg_conn& c) {
                return persistence::deliveries_page_json(c, tid, id, status, page, per_page);
              },
              [reply](domain::outcome<std::string> r) { reply(std::move(r)); });
        });
      },
      [self, measure](redeliv_atom, std::int64_t sub, std::int64_t delivery,
                      callback<domain::done>& reply) {
        auto _ = measure();
        when_loaded(self, fail_with(reply), [self, sub, delivery, reply] {
          auto& st = self->state;
          auto it = st.subs.find(sub);
          if (it == st.subs.end()) return reply_missing_subscription(self, sub, reply);
          if (st.delivering.count(delivery))
            return reply(failure::of(errc::conflict, "the delivery is being attempted now"));
          db<persistence::redelivery>(
              self,
              [tid = st.env.tenant_id, sub, delivery,
               active = it->second.is_active](persistence::pg_conn& c) {
                return persistence::redeliver(c, tid, sub, delivery, active);
              },
              [self, reply](domain::outcome<persistence::redelivery> r) {
                if (!r) return reply(r.error());
                if (*r == persistence::redelivery::not_found)
                  return reply(
                      failure::of(errc::not_found, "no such delivery of this subscription"));
                if (*r == persistence::redelivery::inactive)
                  return reply(failure::of(errc::conflict, "the subscription is inactive"));
                reply(domain::done{});
                poke_deliveries(self);
              });
        });
      },
      [self](stop_atom) {
        auto& st = self->state;
        st.stopping = true;
        settle(self);
      },
  };
}

} // namespace workflows_impl

using workflows_impl::delete_atom;
using workflows_impl::deliv_atom;
using workflows_impl::getrun_atom;
using workflows_impl::hook_atom;
using workflows_impl::info_atom;
using workflows_impl::merged_atom;
using workflows_impl::redeliv_atom;
using workflows_impl::run_atom;
using workflows_impl::runs_atom;
using workflows_impl::sub_atom;
using workflows_impl::wf_actor;
using workflows_impl::workflows_behavior;
namespace json = boost::json;

caf::actor spawn_workflows(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(workflows_behavior, env);
}

// ---- sweeper -------------------------------------------------------------------------------

namespace {

bool child_alive(runtime::impl& rt, std::int64_t tid, child_kind k) {
  std::shared_lock lock(rt.mutex);
  auto it = rt.tenants.find(tid);
  if (it == rt.tenants.end()) return false;
  return it->second.stats->alive[static_cast<std::size_t>(k)];
}

struct due_work {
  std::vector<std::int64_t> automation, messages, ai, reminders, answers, overdue_tasks;
};
// Messages waiting for an AI agent this long are taken up by waking the tenant's agent actor
// (the live one has them in hand).
constexpr double ai_pending_grace_seconds = 10;
// Patients' answers to reminders not settled this long after they came (their schedule actor
// retries for 20 s first) are answered by waking the actor, live or not.
constexpr double answer_grace_seconds = 30;

void sweep(runtime::impl& rt) {
  auto& a = *rt.automation;
  if (a.sweeping.exchange(true)) return; // the previous sweep is still waiting for Postgres
  rt.pool.run<due_work>(
      [](persistence::pg_conn& c) {
        return due_work{persistence::tenants_with_due_work(c),
                        persistence::tenants_with_queued_messages(c),
                        persistence::tenants_with_pending_ai(c, ai_pending_grace_seconds),
                        persistence::tenants_with_due_reminders(c),
                        persistence::tenants_with_pending_answers(c, answer_grace_seconds),
                        persistence::tenants_with_overdue_tasks(c)};
      },
      [&rt](domain::outcome<due_work> r) {
        if (r) {
          for (auto tid : r->automation)
            if (!child_alive(rt, tid, child_kind::workflows))
              rt.route(tid, child_kind::workflows, caf::make_message(wake_atom::value));
          for (auto tid : r->messages)
            if (!child_alive(rt, tid, child_kind::channels))
              rt.route(tid, child_kind::channels, caf::make_message(wake_atom::value));
          for (auto tid : r->ai)
            if (!child_alive(rt, tid, child_kind::agents))
              rt.route(tid, child_kind::agents, caf::make_message(wake_atom::value));
          // A live schedule actor finds its due reminders itself (actors/schedule_actor.cpp).
          for (auto tid : r->reminders)
            if (!child_alive(rt, tid, child_kind::schedule))
              rt.route(tid, child_kind::schedule, caf::make_message(wake_atom::value));
          for (auto tid : r->answers)
            rt.route(tid, child_kind::schedule, caf::make_message(wake_atom::value));
          // A live tasks actor marks its overdue tasks on its own timer (actors/tasks_actor.cpp).
          for (auto tid : r->overdue_tasks)
            if (!child_alive(rt, tid, child_kind::tasks))
              rt.route(tid, child_kind::tasks, caf::make_message(wake_atom::value));
        }
        rt.automation->sweeping = false;
      });
}

} // namespace

void start_automation(runtime& rt, automation_options opts) {
  auto& impl = rt.internals();
  auto a = new runtime_automation;
  a->opts = std::move(opts);
  impl.automation = {a, [](runtime_automation* p) { delete p; }};
  a->sweeper = std::thread([&impl, a] {
    name_this_thread("crm.sweeper");
    std::unique_lock lock(a->mutex);
    auto pruned = std::chrono::steady_clock::now() - std::chrono::hours(2);
    while (!a->stop) {
      lock.unlock();
      run_guarded("the automation sweep", [&] { sweep(impl); });
      // Dispatched events are kept a week as the record of what happened, then pruned.
      if (std::chrono::steady_clock::now() - pruned > std::chrono::hours(1)) {
        pruned = std::chrono::steady_clock::now();
        impl.pool.run<std::int64_t>(
            [](persistence::pg_conn& c) { return persistence::prune_outbox(c, 7 * 86400.0); },
            [](domain::outcome<std::int64_t>) {});
      }
      lock.lock();
      a->cv.wait_for(lock, std::chrono::duration<double>(a->opts.poll_interval),
                     [a] { return a->stop; });
    }
  });
}

const automation_options* automation_options_of(runtime::impl& rt) {
  return rt.automation ? &rt.automation->opts : nullptr;
}

void stop_automation(runtime::impl& rt) {
  auto a = rt.automation.get();
  if (!a) return;
  {
    std::lock_guard lock(a->mutex);
    a->stop = true;
  }
  a->cv.notify_all();
  if (a->sweeper.joinable()) a->sweeper.join();
  // A sweep still waiting on the pool routes nothing once the runtime is shut down.
}

// ---- API -----------------------------------------------------------------------------------

namespace {
void send(runtime& rt, std::int64_t tenant, caf::message m) {
  rt.internals().route(tenant, child_kind::workflows, std::move(m));
}
} // namespace

void list_workflows(runtime& rt, std::int64_t tenant, workflow_filter f,
                    callback<std::string> reply) {
  send(rt, tenant, caf::make_message(list_atom::value, std::move(f), std::move(reply)));
}
void get_workflow(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  send(rt, tenant, caf::make_message(get_atom::value, id, std::move(reply)));
}
void create_workflow(runtime& rt, std::int64_t tenant, domain::workflow w,
                     callback<std::string> reply) {
  send(rt, tenant, caf::make_message(create_atom::value, std::move(w), std::move(reply)));
}
void update_workflow(runtime& rt, std::int64_t tenant, std::int64_t id, workflow_patch p,
                     callback<std::string> reply) {
  send(rt, tenant, caf::make_message(update_atom::value, id, std::move(p), std::move(reply)));
}
void delete_workflow(runtime& rt, std::int64_t tenant, std::int64_t id,
                     callback<domain::done> reply) {
  send(rt, tenant, caf::make_message(delete_atom::value, id, std::move(reply)));
}
void webhook_info(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  send(rt, tenant, caf::make_message(info_atom::value, id, std::move(reply)));
}
void run_workflow(runtime& rt, std::int64_t tenant, std::int64_t id, json::value payload,
                  callback<std::int64_t> reply) {
  send(rt, tenant, caf::make_message(run_atom::value, id, std::move(payload), std::move(reply)));
}
void list_runs(runtime& rt, std::int64_t tenant, std::int64_t workflow_id,
               std::optional<domain::run_status> status, int page, int per_page,
               callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(runs_atom::value, workflow_id, status, page, per_page, std::move(reply)));
}
void move_contact_runs(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t into) {
  send(rt, tenant, caf::make_message(merged_atom::value, from, into));
}
void get_run(runtime& rt, std::int64_t tenant, std::int64_t run_id, callback<std::string> reply) {
  send(rt, tenant, caf::make_message(getrun_atom::value, run_id, std::move(reply)));
}
void receive_webhook(runtime& rt, std::int64_t tenant, std::int64_t workflow_id, webhook_call call,
                     callback<std::int64_t> reply) {
  send(rt, tenant,
       caf::make_message(hook_atom::value, workflow_id, std::move(call), std::move(reply)));
}
void list_subscriptions(runtime& rt, std::int64_t tenant, int page, int per_page,
                        callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(sub_atom::value, list_atom::value, page, per_page, std::move(reply)));
}
void get_subscription(runtime& rt, std::int64_t tenant, std::int64_t id,
                      callback<std::string> reply) {
  send(rt, tenant, caf::make_message(sub_atom::value, get_atom::value, id, std::move(reply)));
}
void create_subscription(runtime& rt, std::int64_t tenant, domain::webhook_subscription s,
                         bool generated_secret, callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(sub_atom::value, create_atom::value, std::move(s), generated_secret,
                         std::move(reply)));
}
void update_subscription(runtime& rt, std::int64_t tenant, std::int64_t id, subscription_patch p,
                         callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(sub_atom::value, update_atom::value, id, std::move(p), std::move(reply)));
}
void delete_subscription(runtime& rt, std::int64_t tenant, std::int64_t id,
                         callback<domain::done> reply) {
  send(rt, tenant, caf::make_message(sub_atom::value, delete_atom::value, id, std::move(reply)));
}
void list_deliveries(runtime& rt, std::int64_t tenant, std::int64_t subscription_id,
                     std::optional<std::string> status, int page, int per_page,
                     callback<std::string> reply) {
  send(rt, tenant,
       caf::make_message(deliv_atom::value, subscription_id, std::move(status), page, per_page,
                         std::move(reply)));
}
void redeliver(runtime& rt, std::int64_t tenant, std::int64_t subscription_id,
               std::int64_t delivery_id, callback<domain::done> reply) {
  send(rt, tenant,
       caf::make_message(redeliv_atom::value, subscription_id, delivery_id, std::move(reply)));
}

} // namespace crm::actors
