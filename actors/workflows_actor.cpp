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
#include "actors/workflows.hpp"

#include "actors/agents.hpp"
#include "actors/async_io.hpp"
#include "actors/channels.hpp"
#include "actors/system.hpp"
#include "actors/writer.hpp"
#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/json_check.hpp"
#include "domain/json_nul.hpp"
#include "domain/json_parse.hpp"
#include "domain/page_json.hpp"
#include "domain/validation.hpp"
#include "net/http_client.hpp"
#include "persistence/automation_repo.hpp"
#include "persistence/channel_repo.hpp"
#include "persistence/log.hpp"
#include "persistence/schedule_repo.hpp"

#include <boost/json.hpp>

#include <charconv>
#include <deque>
#include <map>
#include <random>
#include <set>

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::domain::workflow> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::webhook_subscription> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::workflow_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::workflow_filter> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::subscription_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::webhook_call> : std::true_type {};
template <>
struct allowed_unsafe_message_type<boost::json::value> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<crm::domain::run_status>> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<std::string>> : std::true_type {};
} // namespace caf

namespace crm::actors {

struct runtime_automation {
  automation_options opts;
  std::atomic<bool> sweeping{false};
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  std::thread sweeper;
};

namespace {

namespace json = boost::json;
using domain::errc;
using domain::failure;

using delete_atom = caf::atom_constant<caf::atom("delete")>;
using info_atom = caf::atom_constant<caf::atom("info")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using runs_atom = caf::atom_constant<caf::atom("runs")>;
using getrun_atom = caf::atom_constant<caf::atom("getrun")>;
using hook_atom = caf::atom_constant<caf::atom("hook")>;
using sub_atom = caf::atom_constant<caf::atom("sub")>;
using deliv_atom = caf::atom_constant<caf::atom("deliv")>;
using redeliv_atom = caf::atom_constant<caf::atom("redeliv")>;

constexpr std::size_t max_running = 64;      // runs with a step in flight
constexpr std::size_t max_delivering = 64;   // deliveries with an attempt in flight
constexpr std::size_t dispatch_limit = 1000; // outbox rows per transaction
constexpr auto tick_every = std::chrono::milliseconds(250);
constexpr auto dispatch_gap = std::chrono::milliseconds(20);
constexpr auto idle_dispatch_gap = std::chrono::milliseconds(1000);

struct open_run {
  domain::workflow_run run;
  bool busy = false;      // a save is in flight
  bool in_step = false;   // an action is in flight
  bool resave = false;    // the last save failed: it is retried on the next tick
  bool cancelled = false; // its workflow was deleted
};

struct workflows_state {
  tenant_env env;
  const automation_options* opts = nullptr;
  bool loaded = false;
  bool loading = false;
  bool stopping = false;
  waiting_list waiting;

  std::map<std::int64_t, domain::workflow> workflows;
  std::map<std::int64_t, domain::webhook_subscription> subs;
  // Runs' progress waiting to be stored, and whether a save transaction is out (save_then).
  std::vector<domain::workflow_run> saves;
  bool saving = false;

  std::map<std::int64_t, open_run> runs;
  std::deque<std::int64_t> ready; // queued runs waiting for a slot
  std::size_t running = 0;
  std::set<std::int64_t> firing; // schedule workflows whose run is being stored

  // The definitions' writes and the outbox dispatches, one at a time (actors/writer.hpp): a
  // batch of events is matched against the definitions as the changes before it left them.
  one_at_a_time writes;
  bool dispatch_wanted = false;
  bool dispatch_timer = false; // a delayed dispatch is scheduled
  bool dispatch_retry = false; // the last dispatch failed: again on the next tick
  std::chrono::steady_clock::time_point last_dispatch{};

  std::set<std::int64_t> delivering;
  // Attempts answered and waiting to be recorded: written together, one transaction at a time
  // (group commit), so a commit is shared by every delivery that finished meanwhile.
  std::vector<domain::delivery_attempt> attempts_unrecorded;
  bool recording = false;
  bool fetching = false;
  std::int64_t next_delivery_at = 0; // 0: none known
  bool delivery_poked = false;       // new or redelivered deliveries while a fetch was running

  int pending_io = 0; // pool jobs, HTTP requests and contact actions in flight
  bool tick_armed = false;
  std::optional<bool> told_listeners; // what the contacts actor was last told
  // Standard Webhooks message ids of inbound calls: (workflow, id) -> (when, run id).
  std::map<std::pair<std::int64_t, std::string>, std::pair<std::int64_t, std::int64_t>> webhook_ids;
  std::mt19937_64 rng{std::random_device{}()};

  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
  static inline const char* name = "workflows";
};

using wf_actor = caf::stateful_actor<workflows_state>;

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

// ---- runs ---------------------------------------------------------------------------------

void advance(wf_actor* self, std::int64_t id);

void flush_saves(wf_actor* self);

// After the run's progress was stored (or not): the run goes on, waits or leaves.
void saved(wf_actor* self, std::int64_t id, const domain::outcome<domain::done>& r) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  auto& x = it->second;
  x.busy = false;
  if (!r) {
    // The step's outcome is not stored: the same save is retried on the next tick, and
    // the run does not move on before it succeeds.
    log_warn("tenant {}: run {} progress not saved ({}); retrying", st.env.tenant_id, id,
             r.error().detail);
    st.running--;
    x.resave = true;
    return;
  }
  // Stopping (passivation, shutdown): the run is stored as it is and resumes from there
  // when the sweeper wakes the tenant again.
  if (!x.cancelled && domain::finished(x.run.status)) count_finished(x.run.status);
  if (x.cancelled || domain::finished(x.run.status) ||
      x.run.status == domain::run_status::waiting || st.stopping) {
    st.running--;
    if (x.cancelled || domain::finished(x.run.status)) st.runs.erase(it);
    start_ready(self);
    return;
  }
  advance(self, id);
}

// Stores the run's progress, then goes on (saved). The saves of runs whose steps end while one
// is being written are written together in the next transaction (benchmarks/RESULTS.md).
void save_then(wf_actor* self, std::int64_t id) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  it->second.busy = true;
  st.saves.push_back(it->second.run);
  flush_saves(self);
}

void flush_saves(wf_actor* self) {
  auto& st = self->state;
  if (st.saving || st.saves.empty()) return;
  st.saving = true;
  auto runs = std::move(st.saves);
  st.saves.clear();
  std::vector<std::int64_t> ids;
  for (auto& run : runs) ids.push_back(run.id);
  db<domain::done>(
      self,
      [runs = std::move(runs)](persistence::pg_conn& c) {
        persistence::save_runs(c, runs);
        return domain::done{};
      },
      [self, ids = std::move(ids)](domain::outcome<domain::done> r) {
        self->state.saving = false;
        for (auto id : ids) saved(self, id, r);
        flush_saves(self);
      });
}

void finish_step(wf_actor* self, std::int64_t id, json::object step, bool ok, json::value result,
                 std::string error, std::int64_t resume_at = 0) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  it->second.in_step = false;
  auto& r = it->second.run;
  auto now = domain::now_micros();
  step["status"] = ok ? "succeeded" : "failed";
  step["result"] = std::move(result);
  step["error"] = ok ? json::value(nullptr) : json::value(error);
  step["finished_at"] = domain::format_rfc3339(now);
  r.steps.push_back(std::move(step));
  r.updated_at = now;
  if (!ok) {
    r.status = domain::run_status::failed;
    r.error = "step " + std::to_string(r.next_step) + " failed: " + error;
    r.finished_at = now;
  } else {
    r.next_step++;
    if (resume_at) {
      r.status = domain::run_status::waiting;
      r.resume_at = resume_at;
    } else if (r.next_step >= static_cast<int>(r.actions.size())) {
      r.status = domain::run_status::succeeded;
      r.finished_at = now;
    }
  }
  save_then(self, id);
}

// A sibling actor answered 503 (it was stopping or crashed): not the action's fault. The step
// is tried again in a second, or, when this actor is stopping too, after the restart (the run
// is stored as it was before the step).
void retry_step(wf_actor* self, std::int64_t id) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  auto& x = it->second;
  x.in_step = false;
  st.running--;
  if (x.cancelled) {
    st.runs.erase(it);
  } else if (!st.stopping) {
    x.run.status = domain::run_status::waiting;
    x.run.resume_at = domain::now_micros() + 1'000'000;
  }
  start_ready(self);
}

// At most `n` bytes of `s`, cut at a character boundary; null when `s` is not UTF-8 text (or
// holds U+0000, which jsonb cannot store).
json::value utf8_prefix(const std::string& s, std::size_t n) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < s.size();) {
    auto len = domain::utf8_sequence(s, i);
    if (len == 0 || s[i] == '\0') return nullptr;
    if (i + len > n) break;
    i += len;
    end = i;
  }
  return json::value(s.substr(0, end));
}

std::string envelope(std::string_view type, std::int64_t at, std::string_view data) {
  std::string out = "{\"type\":";
  out += json::serialize(json::value(type));
  out += ",\"timestamp\":\"";
  out += domain::format_rfc3339(at);
  out += "\",\"data\":";
  out += data;
  out += '}';
  return out;
}

// Headers of Standard Webhooks for one signed request.
void sign(std::vector<std::pair<std::string, std::string>>& headers, const std::string& secret,
          const std::string& msg_id, const std::string& body) {
  auto ts = domain::now_seconds();
  headers.emplace_back("webhook-id", msg_id);
  headers.emplace_back("webhook-timestamp", std::to_string(ts));
  headers.emplace_back("webhook-signature", domain::webhook_signature(secret, msg_id, ts, body));
}

void run_contact_action(wf_actor* self, std::int64_t id, json::object step,
                        domain::action_type type, const json::object& params);
void run_http_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params);
void run_send_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params);
void run_ai_reply_action(wf_actor* self, std::int64_t id, json::object step,
                         const json::object& params);
void run_deal_action(wf_actor* self, std::int64_t id, json::object step, domain::action_type type,
                     const json::object& params);

void advance(wf_actor* self, std::int64_t id) {
  auto& st = self->state;
  auto it = st.runs.find(id);
  if (it == st.runs.end()) return;
  auto& x = it->second;
  auto& r = x.run;
  auto now = domain::now_micros();
  auto wf = st.workflows.find(r.workflow_id);
  if (x.cancelled || wf == st.workflows.end()) {
    st.running--;
    st.runs.erase(it);
    start_ready(self);
    return;
  }
  if (r.status != domain::run_status::running) {
    r.status = domain::run_status::running;
    r.resume_at = 0;
    if (!r.started_at) r.started_at = now;
  }
  if (r.depth >= domain::max_chain_depth) {
    r.status = domain::run_status::failed;
    r.error =
        "workflow chain depth limit (" + std::to_string(domain::max_chain_depth) + ") reached";
    r.finished_at = r.updated_at = now;
    return save_then(self, id);
  }
  if (r.next_step >= static_cast<int>(r.actions.size())) {
    r.status = domain::run_status::succeeded;
    r.finished_at = r.updated_at = now;
    return save_then(self, id);
  }
  auto& a = r.actions[static_cast<std::size_t>(r.next_step)];
  auto* ao = a.if_object();
  // Stored actions were validated when the workflow was saved; an unknown type can only come
  // from a newer version's rows, and fails the step rather than the actor.
  auto known = domain::action_type::add_tag;
  bool has_type = false;
  if (ao)
    if (auto t = ao->if_contains("type"); t && t->is_string())
      if (auto parsed = domain::parse_action_type(std::string_view(t->as_string()))) {
        known = *parsed;
        has_type = true;
      }
  json::object params;
  if (ao && ao->contains("params") && ao->at("params").is_object()) {
    domain::template_context ctx{&r.payload, r.id, wf->second.id, wf->second.name};
    auto rendered = domain::render_templates(ao->at("params"), ctx);
    if (rendered.is_object()) params = rendered.as_object();
  }
  json::object step;
  step["index"] = r.next_step;
  step["type"] = has_type ? json::value(domain::to_string(known)) : json::value(nullptr);
  step["status"] = "running";
  step["params"] = params;
  if (known == domain::action_type::http_request)
    domain::redact_header_values(step["params"].as_object());
  step["result"] = nullptr;
  step["error"] = nullptr;
  step["started_at"] = domain::format_rfc3339(now);
  step["finished_at"] = nullptr;
  x.in_step = true;
  if (!has_type) return finish_step(self, id, std::move(step), false, nullptr, "unknown action");
  if (!domain::action_available(known))
    return finish_step(self, id, std::move(step), false, nullptr,
                       "action '" + std::string(domain::to_string(known)) +
                           "' is not available yet");
  // What the action changes is audited as this workflow's doing (docs/compliance.md): every
  // callback the action makes from here keeps it.
  auto acting = std::make_shared<domain::audit_context>();
  acting->actor = domain::audit_actor::workflow;
  acting->actor_ref = "workflow:" + std::to_string(wf->second.id) + " run:" + std::to_string(r.id);
  domain::audit_scope scope(std::move(acting));
  switch (known) {
  case domain::action_type::delay: {
    auto secs = domain::delay_seconds(params);
    auto resume = now + secs * 1'000'000;
    json::object result{{"resume_at", domain::format_rfc3339(resume)}};
    return finish_step(self, id, std::move(step), true, std::move(result), {}, resume);
  }
  case domain::action_type::http_request: return run_http_action(self, id, std::move(step), params);
  case domain::action_type::send_message: return run_send_action(self, id, std::move(step), params);
  case domain::action_type::ai_reply: return run_ai_reply_action(self, id, std::move(step), params);
  case domain::action_type::create_deal:
  case domain::action_type::move_deal:
    return run_deal_action(self, id, std::move(step), known, params);
  default: return run_contact_action(self, id, std::move(step), known, params);
  }
}

void run_contact_action(wf_actor* self, std::int64_t id, json::object step,
                        domain::action_type type, const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  auto contact = domain::action_contact_id(params, r.payload);
  if (!contact)
    return finish_step(self, id, std::move(step), false, nullptr,
                       "no contact: the trigger payload has no contact_id; set params.contact_id");
  auto depth = r.depth + 1;
  auto tenant = st.env.tenant_id;
  auto& rt = *st.env.rt->owner;
  auto cid = *contact;
  // The continuation of every contact action: the step's outcome, back in this actor.
  auto finish = [self, id, step, cid](const failure* f, json::object result) mutable {
    if (f && f->code == errc::service_unavailable) return retry_step(self, id);
    if (f) return finish_step(self, id, std::move(step), false, nullptr, to_text(*f));
    result["contact_id"] = cid;
    finish_step(self, id, std::move(step), true, std::move(result), {});
  };
  switch (type) {
  case domain::action_type::update_contact:
  case domain::action_type::set_status: {
    contact_fields f;
    if (type == domain::action_type::set_status) {
      auto s = params.if_contains("status");
      auto status = s && s->is_string()
                        ? domain::parse_contact_status(std::string_view(s->as_string()))
                        : std::nullopt;
      if (!status)
        return finish_step(self, id, std::move(step), false, nullptr,
                           "status must be one of active, inactive, qualified, unqualified");
      f.status = *status;
    } else {
      std::vector<domain::issue> issues;
      auto fields = params.if_contains("fields");
      if (!fields || !fields->is_object() || !st.opts || !st.opts->read_contact_patch)
        return finish_step(self, id, std::move(step), false, nullptr,
                           "params.fields must be an object");
      f = st.opts->read_contact_patch(fields->as_object(), issues);
      if (!issues.empty())
        return finish_step(self, id, std::move(step), false, nullptr,
                           to_text(failure::invalid(std::move(issues))));
    }
    f.chain_depth = depth;
    auto k = in_actor<domain::outcome<domain::contact>>(
        self, [finish](domain::outcome<domain::contact> c) mutable {
          if (!c) return finish(&c.error(), {});
          finish(nullptr, {{"status", domain::to_string(c->status)}});
        });
    return update_contact(rt, tenant, cid, std::move(f), callback<domain::contact>(std::move(k)));
  }
  case domain::action_type::add_tag: {
    std::vector<std::string> tags;
    if (auto t = params.if_contains("tag"); t && t->is_string())
      tags.emplace_back(t->as_string().c_str());
    if (auto ts = params.if_contains("tags"); ts && ts->is_array())
      for (auto& t : ts->as_array())
        if (t.is_string()) tags.emplace_back(t.as_string().c_str());
    if (tags.empty())
      return finish_step(self, id, std::move(step), false, nullptr, "no tag to add");
    json::array added;
    for (auto& t : tags) added.emplace_back(t);
    auto k = in_actor<domain::outcome<contact_view>>(
        self, [finish, added](domain::outcome<contact_view> v) mutable {
          if (!v) return finish(&v.error(), {});
          finish(nullptr, {{"tags", added}});
        });
    return add_tags(rt, tenant, cid, std::move(tags), callback<contact_view>(std::move(k)), depth);
  }
  case domain::action_type::remove_tag: {
    auto t = params.if_contains("tag");
    if (!t || !t->is_string())
      return finish_step(self, id, std::move(step), false, nullptr, "no tag to remove");
    std::string tag(t->as_string().c_str());
    auto k = in_actor<domain::outcome<domain::done>>(
        self, [finish, tag](domain::outcome<domain::done> v) mutable {
          // Removing a tag the contact does not have leaves it as wanted: not a failure.
          if (!v && v.error().detail == "the contact has no such tag")
            return finish(nullptr, {{"tag", tag}, {"removed", false}});
          if (!v) return finish(&v.error(), {});
          finish(nullptr, {{"tag", tag}, {"removed", true}});
        });
    return remove_tag(rt, tenant, cid, tag, callback<domain::done>(std::move(k)), depth);
  }
  default: finish_step(self, id, std::move(step), false, nullptr, "not a contact action");
  }
}

// An id parameter after templates: an integer, or a string of digits.
std::optional<std::int64_t> id_value(const json::value* v) {
  if (!v) return std::nullopt;
  if (auto i = v->if_int64()) return *i;
  if (auto u = v->if_uint64()) return static_cast<std::int64_t>(*u);
  if (auto str = v->if_string()) {
    std::int64_t n = 0;
    auto b = str->data(), e = str->data() + str->size();
    auto [ptr, ec] = std::from_chars(b, e, n);
    if (ec == std::errc() && ptr == e && b != e) return n;
  }
  return std::nullopt;
}

// create_deal and move_deal (docs/pipeline.md): through the deals actor, recorded in the
// deal's history with this run's id.
void run_deal_action(wf_actor* self, std::int64_t id, json::object step, domain::action_type type,
                     const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  if (!st.opts || !st.opts->read_deal_fields)
    return finish_step(self, id, std::move(step), false, nullptr, "deal actions are not set up");
  deal_actor_ref who;
  who.workflow_run_id = r.id;
  who.chain_depth = r.depth + 1;
  auto tenant = st.env.tenant_id;
  auto& rt = *st.env.rt->owner;
  // Ids given as template results arrive as strings of digits.
  json::object fields = params;
  for (auto key : {"contact_id", "company_id", "owner_id", "pipeline_id", "stage_id", "position"})
    if (auto v = fields.if_contains(key); v && v->is_string())
      if (auto n = id_value(v)) *v = *n;
  auto failed = [self, id, step](const failure& f) mutable {
    if (f.code == errc::service_unavailable) return retry_step(self, id);
    finish_step(self, id, std::move(step), false, nullptr, to_text(f));
  };
  if (type == domain::action_type::create_deal) {
    if (!fields.contains("contact_id"))
      if (auto c = domain::action_contact_id(params, r.payload)) fields["contact_id"] = *c;
    auto f = st.opts->read_deal_fields(fields, false);
    if (!f.issues.empty())
      return finish_step(self, id, std::move(step), false, nullptr,
                         to_text(failure::invalid(std::move(f.issues))));
    auto k = in_actor<domain::outcome<stored_response>>(
        self, [self, id, step, failed](domain::outcome<stored_response> v) mutable {
          if (!v) return failed(v.error());
          json::object result;
          json::error_code ec;
          auto body = crm::domain::parse_json(v->body, ec);
          if (!ec && body.is_object()) {
            result["deal_id"] = body.as_object()["id"];
            result["stage_id"] = body.as_object()["stage_id"];
          }
          finish_step(self, id, std::move(step), true, std::move(result), {});
        });
    return create_deal(rt, tenant, std::move(f), who, {}, callback<stored_response>(std::move(k)));
  }
  auto deal_id = id_value(fields.if_contains("deal_id"));
  if (!deal_id)
    deal_id =
        id_value(r.payload.is_object() ? r.payload.as_object().if_contains("deal_id") : nullptr);
  if (!deal_id)
    return finish_step(self, id, std::move(step), false, nullptr,
                       "no deal: the trigger payload has no deal_id; set params.deal_id");
  fields.erase("deal_id");
  auto f = st.opts->read_deal_fields(fields, true);
  if (!f.issues.empty())
    return finish_step(self, id, std::move(step), false, nullptr,
                       to_text(failure::invalid(std::move(f.issues))));
  auto k = in_actor<domain::outcome<domain::deal>>(
      self, [self, id, step, failed](domain::outcome<domain::deal> d) mutable {
        if (!d) return failed(d.error());
        json::object result{{"deal_id", d->id},
                            {"stage_id", d->stage_id},
                            {"status", domain::to_string(d->status)}};
        finish_step(self, id, std::move(step), true, std::move(result), {});
      });
  update_deal(rt, tenant, *deal_id, std::move(f), who, callback<domain::deal>(std::move(k)));
}

void run_http_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  if (!st.opts || !st.opts->client)
    return finish_step(self, id, std::move(step), false, nullptr, "outbound HTTP is not set up");
  net::client_request req;
  if (auto m = params.if_contains("method"); m && m->is_string()) req.method = m->as_string();
  if (auto u = params.if_contains("url"); u && u->is_string()) req.url = u->as_string();
  if (!domain::parse_url(req.url))
    return finish_step(self, id, std::move(step), false, nullptr,
                       "url is not an http or https URL: " + req.url);
  if (auto h = params.if_contains("headers"); h && h->is_object())
    for (auto& [k, v] : h->as_object())
      if (v.is_string()) req.headers.emplace_back(std::string(k), std::string(v.as_string()));
  if (auto b = params.if_contains("body")) {
    req.body = json::serialize(*b);
  } else {
    req.body = envelope(r.trigger, r.created_at, json::serialize(r.payload));
  }
  if (req.method == "GET" || req.method == "DELETE") {
    if (!params.contains("body")) req.body.clear();
  }
  // As the reader took it: any JSON number with an integral value (5 or 5.0).
  if (auto t = params.if_contains("timeout_seconds"))
    if (auto n = domain::detail::as_integer(*t)) req.timeout = std::chrono::milliseconds(*n * 1000);
  req.headers.emplace_back("carecrm-chain-depth", std::to_string(r.depth + 1));
  auto& wf = st.workflows.at(r.workflow_id);
  if (wf.webhook_secret)
    sign(req.headers, *wf.webhook_secret,
         "run_" + std::to_string(r.id) + "_" + std::to_string(r.next_step), req.body);
  auto done = in_actor<net::client_response>(self, [self, id,
                                                    step](net::client_response res) mutable {
    json::object result;
    if (!res.ok)
      return finish_step(self, id, std::move(step), false, nullptr, "request failed: " + res.error);
    result["status_code"] = res.status;
    result["body"] = utf8_prefix(res.body, 4096);
    result["duration_ms"] = res.elapsed.count();
    bool ok = res.status >= 200 && res.status < 300;
    finish_step(self, id, std::move(step), ok, ok ? json::value(result) : json::value(nullptr),
                ok ? std::string() : "the server answered " + std::to_string(res.status));
  });
  st.opts->client->send(std::move(req), std::move(done));
}

// An id in an action's params or a trigger payload: a positive integer, or its decimal text
// (what a template renders).
std::optional<std::int64_t> as_id(const json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_int64() && v->as_int64() > 0) return v->as_int64();
  if (v->is_string()) {
    std::int64_t n = 0;
    auto s = std::string_view(v->as_string());
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && p == s.data() + s.size() && n > 0) return n;
  }
  return std::nullopt;
}

// send_message: to the trigger's conversation (message.received), else to the contact's
// most recent one (on params.channel_id when given). Succeeds once the message is queued.
void run_send_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  outbound_request req;
  if (auto t = params.if_contains("text"); t && t->is_string()) req.text = t->as_string();
  if (req.text.empty())
    return finish_step(self, id, std::move(step), false, nullptr, "the message text is empty");
  req.channel_id = as_id(params.if_contains("channel_id"));
  if (auto p = params.if_contains("purpose"); p && p->is_string())
    req.purpose = domain::parse_consent_purpose(std::string_view(p->as_string()))
                      .value_or(domain::consent_purpose::treatment_communication);
  req.contact_id = domain::action_contact_id(params, r.payload);
  if (auto* p = r.payload.if_object(); p && !params.contains("contact_id"))
    if (!req.channel_id || as_id(p->if_contains("channel_id")) == req.channel_id)
      req.conversation_id = as_id(p->if_contains("conversation_id"));
  if (!req.conversation_id && !req.contact_id)
    return finish_step(self, id, std::move(step), false, nullptr,
                       "no conversation: the trigger has no conversation or contact");
  auto k = in_actor<domain::outcome<std::string>>(
      self, [self, id, step](domain::outcome<std::string> m) mutable {
        if (!m && m.error().code == errc::service_unavailable) return retry_step(self, id);
        if (!m) return finish_step(self, id, std::move(step), false, nullptr, to_text(m.error()));
        json::error_code ec;
        auto v = crm::domain::parse_json(*m, ec);
        json::object result;
        if (!ec && v.is_object()) {
          auto& o = v.as_object();
          for (auto key : {"id", "conversation_id", "status"})
            if (auto x = o.if_contains(key))
              result[key == std::string_view("id") ? "message_id" : key] = *x;
        }
        finish_step(self, id, std::move(step), true, std::move(result), {});
      });
  send_message(*st.env.rt->owner, st.env.tenant_id, std::move(req),
               callback<std::string>(std::move(k)));
}

// ai_reply: the agent (params.agent_id, else the auto-replying agent of the trigger's channel)
// answers the trigger's message (message.received) in its conversation, hand-off rules and all.
void run_ai_reply_action(wf_actor* self, std::int64_t id, json::object step,
                         const json::object& params) {
  auto& st = self->state;
  auto& r = st.runs.at(id).run;
  auto* p = r.payload.if_object();
  ai_inbound m;
  if (p) {
    m.conversation_id = as_id(p->if_contains("conversation_id")).value_or(0);
    m.channel_id = as_id(p->if_contains("channel_id")).value_or(0);
    m.contact_id = as_id(p->if_contains("contact_id")).value_or(0);
    m.message_id = as_id(p->if_contains("message_id")).value_or(0);
    if (auto msg = p->if_contains("message"); msg && msg->is_object())
      if (auto t = msg->as_object().if_contains("text"); t && t->is_string())
        m.text = std::string(t->as_string());
  }
  if (!m.conversation_id || !m.message_id || m.text.empty())
    return finish_step(self, id, std::move(step), false, nullptr,
                       "no message to answer: ai_reply needs a message.received trigger");
  m.depth = r.depth + 1;
  std::optional<std::int64_t> agent;
  if (params.contains("agent_id")) {
    agent = as_id(params.if_contains("agent_id"));
    if (!agent)
      return finish_step(self, id, std::move(step), false, nullptr, "agent_id is not a valid id");
  }
  auto k = in_actor<domain::outcome<std::string>>(
      self, [self, id, step](domain::outcome<std::string> out) mutable {
        if (!out && out.error().code == errc::service_unavailable) return retry_step(self, id);
        if (!out)
          return finish_step(self, id, std::move(step), false, nullptr, to_text(out.error()));
        json::error_code ec;
        auto v = crm::domain::parse_json(*out, ec);
        finish_step(self, id, std::move(step), true,
                    !ec && v.is_object() ? v : json::value(json::object()), {});
      });
  run_ai_reply(*st.env.rt->owner, st.env.tenant_id, agent, std::move(m),
               callback<std::string>(std::move(k)));
}

void start_ready(wf_actor* self) {
  auto& st = self->state;
  while (!st.stopping && st.running < max_running && !st.ready.empty()) {
    auto id = st.ready.front();
    st.ready.pop_front();
    auto it = st.runs.find(id);
    if (it == st.runs.end() || it->second.busy) continue;
    st.running++;
    advance(self, id);
  }
}

// Stores a new run (webhook, manual, schedule) and answers its id; starts it when open.
void create_run(wf_actor* self, const domain::workflow& w, json::value payload, int depth,
                callback<std::int64_t> reply,
                std::optional<std::int64_t> schedule_next = std::nullopt) {
  auto& st = self->state;
  domain::workflow_run run;
  run.tenant_id = st.env.tenant_id;
  run.workflow_id = w.id;
  run.trigger = std::string(domain::to_string(w.trigger));
  run.depth = depth;
  run.actions = domain::actions_to_json(w.actions);
  run.created_at = run.updated_at = domain::now_micros();
  run.conditions_met = domain::conditions_hold(w.conditions, payload);
  run.payload = std::move(payload);
  if (!run.conditions_met) {
    run.status = domain::run_status::succeeded;
    run.started_at = run.finished_at = run.created_at;
  } else if (depth >= domain::max_chain_depth) {
    run.status = domain::run_status::failed;
    run.error =
        "workflow chain depth limit (" + std::to_string(domain::max_chain_depth) + ") reached";
    run.finished_at = run.created_at;
  }
  db<domain::workflow_run>(
      self,
      [run, schedule_next](persistence::pg_conn& c) {
        return persistence::insert_run(c, run, schedule_next);
      },
      [self, reply, wid = w.id, schedule_next](domain::outcome<domain::workflow_run> r) {
        auto& st = self->state;
        if (schedule_next) {
          st.firing.erase(wid);
          if (r) {
            // Stored only for a still active workflow (insert_run's UPDATE says the same).
            if (auto it = st.workflows.find(wid); it != st.workflows.end() && it->second.is_active)
              it->second.next_run_at = *schedule_next;
          }
        }
        if (!r) return reply(r.error());
        reply(r->id);
        add_open_run(self, std::move(*r));
        start_ready(self);
      });
}

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
  for (auto k :
       {child_kind::contacts, child_kind::deals, child_kind::channels, child_kind::schedule})
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

} // namespace

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
  std::vector<std::int64_t> automation, messages, ai, reminders, answers;
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
                        persistence::tenants_with_pending_answers(c, answer_grace_seconds)};
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
