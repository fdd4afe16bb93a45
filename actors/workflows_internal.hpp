// The workflows actor's parts (docs/automation.md), shared by its files: the actor with its
// definitions, requests and the sweeper (workflows_actor.cpp), the runs and their steps
// (workflows_runs.cpp), and the outbox dispatch, webhook deliveries and timers
// (workflows_delivery.cpp). Internal to actors/ (CAF).
#pragma once
#include "actors/workflows.hpp"

#include "actors/agents.hpp"
#include "actors/async_io.hpp"
#include "actors/channels.hpp"
#include "actors/system.hpp"
#include "actors/tasks.hpp"
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
#include "persistence/task_repo.hpp"

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

namespace crm::actors::workflows_impl {

namespace json = boost::json;
using domain::errc;
using domain::failure;

using delete_atom = caf::atom_constant<caf::atom("delete")>;
using info_atom = caf::atom_constant<caf::atom("info")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using runs_atom = caf::atom_constant<caf::atom("runs")>;
using getrun_atom = caf::atom_constant<caf::atom("getrun")>;
using merged_atom = caf::atom_constant<caf::atom("merged")>;
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

// ---- shared by the actor's files ---------------------------------------------------------------

// workflows_actor.cpp: the tick, settling and loading
bool needs_tick(const workflows_state& st);
void arm_tick(wf_actor* self);
void settle(wf_actor* self);
std::string to_text(const failure& f);
void count_finished(domain::run_status s);
void add_open_run(wf_actor* self, domain::workflow_run r);
void load(wf_actor* self);

// workflows_runs.cpp: runs, their steps and actions
void saved(wf_actor* self, std::int64_t id, const domain::outcome<domain::done>& r);
void save_then(wf_actor* self, std::int64_t id);
void flush_saves(wf_actor* self);
void finish_step(wf_actor* self, std::int64_t id, json::object step, bool ok, json::value result,
                 std::string error, std::int64_t resume_at = 0);
void retry_step(wf_actor* self, std::int64_t id);
json::value utf8_prefix(const std::string& s, std::size_t n);
std::string envelope(std::string_view type, std::int64_t at, std::string_view data);
void sign(std::vector<std::pair<std::string, std::string>>& headers, const std::string& secret,
          const std::string& msg_id, const std::string& body);
void advance(wf_actor* self, std::int64_t id);
void run_contact_action(wf_actor* self, std::int64_t id, json::object step,
                        domain::action_type type, const json::object& params);
std::optional<std::int64_t> id_value(const json::value* v);
void run_deal_action(wf_actor* self, std::int64_t id, json::object step, domain::action_type type,
                     const json::object& params);
void run_http_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params);
std::optional<std::int64_t> as_id(const json::value* v);
void run_send_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params);
void run_ai_reply_action(wf_actor* self, std::int64_t id, json::object step,
                         const json::object& params);
void run_task_action(wf_actor* self, std::int64_t id, json::object step,
                     const json::object& params);
void start_ready(wf_actor* self);
void create_run(wf_actor* self, const domain::workflow& w, json::value payload, int depth,
                callback<std::int64_t> reply,
                std::optional<std::int64_t> schedule_next = std::nullopt);

// workflows_delivery.cpp: the outbox dispatch, webhook deliveries, timers
bool has_consumers(const workflows_state& st);
void tell_listeners(wf_actor* self);
void request_dispatch(wf_actor* self);
void dispatch(wf_actor* self);
void poke_deliveries(wf_actor* self);
void pump_deliveries(wf_actor* self);
void record_attempts(wf_actor* self);
void attempt(wf_actor* self, domain::webhook_delivery d);
void fire_schedules(wf_actor* self);
void resume_waiting(wf_actor* self);
void on_tick(wf_actor* self);

// workflows_actor.cpp: definitions, subscriptions and requests
std::string public_url(const workflows_state& st);
void save_workflow(wf_actor* self, domain::workflow w, bool write_schedule,
                   callback<std::string> reply);
std::int64_t plan(const domain::workflow& w);
void do_update(wf_actor* self, const domain::workflow& cur, const workflow_patch& p,
               callback<std::string> reply);
void update_subscription_now(wf_actor* self, std::int64_t id, const subscription_patch& p,
                             callback<std::string> reply);
void save_subscription(wf_actor* self, domain::webhook_subscription s,
                       std::optional<std::string> shown_secret, callback<std::string> reply);
std::optional<std::int64_t> replayed_run(workflows_state& st, std::int64_t workflow_id,
                                         const std::string& msg_id);
void remember_webhook_id(workflows_state& st, std::int64_t workflow_id, std::string msg_id,
                         std::int64_t run_id);
caf::behavior workflows_behavior(wf_actor* self, tenant_env env);

} // namespace crm::actors::workflows_impl
