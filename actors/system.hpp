// Internal to actors/: CAF types shared by the runtime, the supervisor and the child actors.
// Includes CAF, so it must never be included from a header outside actors/.
#pragma once
#include "actors/callback.hpp"
#include "actors/contacts_view.hpp"
#include "actors/meters.hpp"
#include "actors/runtime.hpp"
#include "domain/custom_field.hpp"
#include "domain/failure.hpp"
#include "persistence/pg_pool.hpp"

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/behavior.hpp>
#include <caf/error.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

namespace caf {
// Local-only message payloads: replies carry callbacks, and nothing crosses a node boundary yet.
template <class T>
struct allowed_unsafe_message_type<crm::actors::callback<T>> : std::true_type {};
template <class T>
struct allowed_unsafe_message_type<crm::domain::outcome<T>> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::function<void()>> : std::true_type {};
// Custom-field definitions travel between the fields actor and the record actors.
template <>
struct allowed_unsafe_message_type<crm::domain::custom_field> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::field_definitions> : std::true_type {};
} // namespace caf

namespace crm::persistence {
class group_committer;
}

namespace crm::actors {

using route_atom = caf::atom_constant<caf::atom("route")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using fail_atom = caf::atom_constant<caf::atom("fail")>;
using final_atom = caf::atom_constant<caf::atom("final")>;
// Custom-field definitions pushed to record actors, and a hard delete carried out by them.
using defs_atom = caf::atom_constant<caf::atom("defs")>;
using purge_atom = caf::atom_constant<caf::atom("purge")>;
using resume_atom = caf::atom_constant<caf::atom("resume")>;
using get_atom = caf::atom_constant<caf::atom("get")>;
using list_atom = caf::atom_constant<caf::atom("list")>;
using create_atom = caf::atom_constant<caf::atom("create")>;
using update_atom = caf::atom_constant<caf::atom("update")>;
// New events in the outbox (sent by record actors after COMMIT), and due automation work
// found by the sweeper for a tenant.
using outbox_atom = caf::atom_constant<caf::atom("outbox")>;
using wake_atom = caf::atom_constant<caf::atom("wake")>;
// Whether the tenant has event listeners (workflow actor → contacts actor).
using listeners_atom = caf::atom_constant<caf::atom("listeners")>;
// A user created, deactivated or reactivated (users actor → contacts actor): id, active.
using user_active_atom = caf::atom_constant<caf::atom("user_act")>;
// A tenant supervisor told to passivate now (its lease moved away).
using evict_atom = caf::atom_constant<caf::atom("evict")>;

// A closure that a pool thread sends back to run inside the actor that started the work.
using continuation = std::function<void()>;

// The children of a tenant supervisor, one per per-tenant aggregate. Registering a new
// aggregate is one entry here: it gives the child its kind (child_kind::NAME), its name in
// /actors, /metrics and POST /actors/{tenant}/NAME/fail, and its place in the supervisor's
// spawn table, which calls `spawn_NAME` (defined in actors/NAME_actor.cpp). docs/aggregates.md
// shows the steps.
#define CRM_TENANT_CHILDREN(X)                                                                     \
  X(users)                                                                                         \
  X(contacts)                                                                                      \
  X(fields)                                                                                        \
  X(workflows) X(channels) X(deals) X(agents) X(notes) X(schedule) X(inbox) X(tasks) X(views)

#define CRM_CHILD_KIND(name) name,
enum class child_kind : std::uint8_t { CRM_TENANT_CHILDREN(CRM_CHILD_KIND) count_ };
#undef CRM_CHILD_KIND
constexpr std::size_t child_count = static_cast<std::size_t>(child_kind::count_);
const char* child_name(child_kind k);

// Mailbox depths published by a tenant's actors for GET /actors.
struct tenant_stats {
  std::atomic<std::int64_t> supervisor_mailbox{0};
  std::array<std::atomic<std::int64_t>, child_count> mailbox{};
  std::array<std::atomic<bool>, child_count> alive{};
  // Per child, over the tenant's life on this node (GET /console/data): messages handled, the
  // time spent handling them, and failures its supervisor recovered from.
  std::array<std::atomic<std::uint64_t>, child_count> messages{};
  std::array<std::atomic<std::uint64_t>, child_count> busy_nanos{};
  std::array<std::atomic<std::uint64_t>, child_count> restarts{};
  // Per child, how long its messages took: counts below each of `busy_bounds_us` and above
  // the last (percentiles for the console, over any window between two reads).
  static constexpr std::array<std::uint32_t, 9> busy_bounds_us{10,   30,    100,   300,   1000,
                                                               3000, 10000, 30000, 100000};
  using busy_histogram = std::array<std::atomic<std::uint32_t>, busy_bounds_us.size() + 1>;
  std::array<busy_histogram, child_count> busy_times{};
  // The tenant's contacts as the I/O threads read them; its contacts actor (each incarnation)
  // writes them. Made with the tenant's entry, never replaced.
  const std::shared_ptr<contacts_view> contacts = std::make_shared<contacts_view>();
  // When a read last went through `contacts` (steady clock, ns): activity for passivation.
  std::atomic<std::int64_t> last_view_read{0};
};

struct runtime_automation;
struct automation_options;
struct link_state; // actors/cluster_link.cpp
// Stops the sweeper (before the tenants stop).
void stop_automation(runtime::impl& rt);
// The options given to start_automation (null before it).
const automation_options* automation_options_of(runtime::impl& rt);

struct tenant_env {
  std::int64_t tenant_id = 0;
  persistence::pg_pool* pool = nullptr;
  persistence::group_committer* committer = nullptr; // record batches, across tenants
  std::shared_ptr<tenant_stats> stats;
  runtime::impl* rt = nullptr;
};

struct runtime::impl {
  impl(runtime_options o, persistence::pg_pool& p);

  // Sends `m` to child `k` of tenant `tid`, spawning the supervisor when needed. The send
  // happens under the registry lock, so it never reaches a supervisor that has passivated.
  void route(std::int64_t tid, child_kind k, caf::message m);
  // In a cluster, the messages of a tenant whose lease is being acquired, then routed (held
  // here) or dropped (placed elsewhere: their callbacks answer 503).
  void acquired(std::int64_t tid, bool here);
  // Called by an idle supervisor: removes it unless it was replaced. True if removed.
  bool passivate(std::int64_t tid, const caf::actor& who);
  // The contacts of a live tenant for reads on the calling thread (actors/contacts_view.hpp),
  // or null when the tenant is not live. A read through it counts as activity of the tenant.
  std::shared_ptr<const contacts_view> contacts_view_of(std::int64_t tid) const;

  struct entry {
    caf::actor supervisor;
    std::shared_ptr<tenant_stats> stats;
  };

  runtime_options opts;
  persistence::pg_pool& pool;
  std::shared_ptr<persistence::group_committer> committer;
  runtime* owner = nullptr; // the public face, for the per-area API functions
  // Options and sweeper of the automation area (workflows_actor.cpp); null until started.
  std::unique_ptr<runtime_automation, void (*)(runtime_automation*)> automation{nullptr, nullptr};
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> system;
  mutable std::shared_mutex mutex;
  std::unordered_map<std::int64_t, entry> tenants;
  std::atomic<std::uint64_t> passivations{0}; // supervisors that left the registry
  std::unordered_map<std::int64_t, std::vector<std::pair<child_kind, caf::message>>> acquiring;
  // Waiting for a tenant's supervisor to leave the registry (runtime::when_stopped).
  std::unordered_multimap<std::int64_t, std::function<void()>> stopped_waiters;
  bool shut_down = false;

  // In a cluster (actors/cluster_link.cpp): this node's published gateway, the forwarder to
  // other nodes' gateways, and their counters.
  caf::actor gateway;
  caf::actor forwarder;
  std::shared_ptr<link_state> link;
  std::atomic<std::uint64_t> forwards_ok{0}, forwards_failed{0}, forward_nanos{0},
      forwards_served{0}, forwards_resent{0}, forwards_repeated{0};

  // Freed tenant state goes back to the OS: glibc keeps freed memory in its arenas, so after a
  // passivation the housekeeping thread asks it to return free pages (malloc_trim).
  std::atomic<bool> trim_wanted{false};
  std::mutex housekeeping_mutex;
  std::condition_variable housekeeping_cv;
  bool housekeeping_stop = false;
  std::thread housekeeping;
};

// Measures one handled message: count, time, and (sampled) the actor's mailbox depth.
class metered {
public:
  // `slot`: where the mailbox depth is shown; `messages` and `busy_nanos`: a tenant's child's
  // own counters (none for the supervisor).
  metered(actor_meter& m, caf::scheduled_actor* self, std::int64_t& published,
          std::atomic<std::int64_t>* slot, std::atomic<std::uint64_t>* messages = nullptr,
          std::atomic<std::uint64_t>* busy_nanos = nullptr,
          tenant_stats::busy_histogram* busy_times = nullptr);
  ~metered();

private:
  actor_meter& m_;
  caf::scheduled_actor* self_;
  std::int64_t& published_;
  std::atomic<std::int64_t>* slot_;
  std::atomic<std::uint64_t>* messages_;
  std::atomic<std::uint64_t>* busy_nanos_;
  tenant_stats::busy_histogram* busy_times_;
  std::chrono::steady_clock::time_point start_;
};

caf::actor spawn_tenant_supervisor(caf::actor_system& sys, const tenant_env& env);

// Answers for a record id tenant `tenant` does not hold (architecture rule 8): 403 when
// `owner_of` finds it in another tenant, else `missing` (404), also when the row is this
// tenant's own (a delete not yet committed, or a row the actor no longer holds). The lookup
// runs on a pool thread.
template <class T, class Lookup>
void reply_not_held(persistence::pg_pool& pool, std::int64_t tenant, Lookup owner_of,
                    domain::failure missing, callback<T> reply) {
  pool.run<std::optional<std::int64_t>>(
      std::move(owner_of), [tenant, reply, missing = std::move(missing)](
                               domain::outcome<std::optional<std::int64_t>> r) {
        if (!r)
          reply(r.error());
        else if (*r && **r != tenant)
          reply(domain::failure::of(domain::errc::insufficient_permissions,
                                    "the record belongs to another tenant"));
        else
          reply(missing);
      });
}

// The same, for the tenant of a child actor's `env`.
template <class T, class Lookup>
void reply_not_held(const tenant_env& env, Lookup owner_of, domain::failure missing,
                    callback<T> reply) {
  reply_not_held(*env.pool, env.tenant_id, std::move(owner_of), std::move(missing),
                 std::move(reply));
}

// Sets up the metrics of a child actor of kind `k`: its type's meter, its instance count, and
// the mailbox slot /actors shows. Returns the factory of the per-message `metered` guard. The
// exit functor keeps its own reference to the stats: it may run after the state is gone.
template <class State>
auto instrument(caf::stateful_actor<State>* self, child_kind k) {
  auto& st = self->state;
  st.meter = &meter(child_name(k));
  st.meter->instances++;
  auto index = static_cast<std::size_t>(k);
  self->attach_functor([m = st.meter, stats = st.env.stats, index](const caf::error&) {
    m->instances--;
    m->mailbox.fetch_sub(stats->mailbox[index].exchange(0));
  });
  auto stats = st.env.stats.get();
  return [self, stats, index] {
    return metered(*self->state.meter, self, self->state.published_mailbox, &stats->mailbox[index],
                   &stats->messages[index], &stats->busy_nanos[index], &stats->busy_times[index]);
  };
}

// Child spawn functions (one per file pair), declared from the registry above.
#define CRM_CHILD_SPAWN(name)                                                                      \
  caf::actor spawn_##name(caf::event_based_actor* parent, const tenant_env& env);
CRM_TENANT_CHILDREN(CRM_CHILD_SPAWN)
#undef CRM_CHILD_SPAWN

// Sends the message made of `xs` to child `K` of `tenant` (spawning the supervisor and the
// child as needed): the body of every per-area API function.
template <child_kind K, class... Ts>
void tell(runtime& rt, std::int64_t tenant, Ts&&... xs) {
  rt.internals().route(tenant, K, caf::make_message(std::forward<Ts>(xs)...));
}

} // namespace crm::actors
