// The tenant supervisor: one per active tenant. It spawns the tenant's child actors on first
// use, forwards each routed message to its child, restarts a child that crashed (its state
// reloads from Postgres on the next request) and passivates the tenant when idle.
//
// Passivation keeps one writer per tenant: the supervisor first stops its children (each
// finishes its mailbox and its commits). A message that still arrives goes to its child if that
// child is not down yet (it may be the answer a sibling waits for before it can stop), else it
// is held; only when the last child is down does the supervisor leave the registry and hand the
// held messages back to it, so the next supervisor loads state that includes every committed
// write.
#include "actors/system.hpp"
#include "domain/clock.hpp"

#include "persistence/log.hpp"

namespace crm::actors {

struct supervisor_state {
  tenant_env env;
  std::array<caf::actor, child_count> children;
  std::chrono::steady_clock::time_point last_activity = std::chrono::steady_clock::now();
  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
  bool retiring = false;                          // passivating: children stopping
  std::vector<std::pair<int, caf::message>> held; // routed while retiring
  static inline const char* name = "tenant_supervisor";
};

namespace {

using spawn_fn = caf::actor (*)(caf::event_based_actor*, const tenant_env&);
#define CRM_CHILD_SPAWNER(name) &spawn_##name,
constexpr std::array<spawn_fn, child_count> spawners = {CRM_TENANT_CHILDREN(CRM_CHILD_SPAWNER)};
#undef CRM_CHILD_SPAWNER

caf::actor& child(caf::stateful_actor<supervisor_state>* self, child_kind k) {
  auto i = static_cast<std::size_t>(k);
  auto& c = self->state.children[i];
  if (!c) {
    c = spawners[i](self, self->state.env);
    self->state.env.stats->alive[i] = true;
  }
  return c;
}

// How often an idle supervisor looks at its clock: an eighth of the idle timeout (a tenant
// passivates between 1 and 1.125 timeouts after its last message), from 50 ms to 60 s. Each
// look is a timer and a wake-up: every live tenant's, so with the timeout of 300 s 10,000 idle
// tenants cost 270 looks a second; at the 5 s the interval was capped to before, 2,000, and
// 12 % of a core with nobody asking anything (benchmarks/console's unwatched windows).
std::chrono::milliseconds tick_interval(double idle_seconds) {
  auto ms = static_cast<std::int64_t>(idle_seconds * 1000 / 8);
  return std::chrono::milliseconds(std::clamp<std::int64_t>(ms, 50, 60'000));
}

void stop_children(caf::stateful_actor<supervisor_state>* self) {
  // A stop message queues behind everything already forwarded, so children answer it all.
  for (auto& c : self->state.children)
    if (c) self->send(c, stop_atom::value);
}

bool children_down(const supervisor_state& st) {
  for (auto& c : st.children)
    if (c) return false;
  return true;
}

// The children are down: leave the registry, then let the messages that arrived meanwhile go
// to the next supervisor. Every send to this one happened before the registry let go of it,
// so they are all in the mailbox ahead of the final message.
void retire(caf::stateful_actor<supervisor_state>* self) {
  auto& st = self->state;
  st.env.rt->passivate(st.env.tenant_id, caf::actor_cast<caf::actor>(self));
  self->send(self, final_atom::value);
}

// Idle, or its lease moved away: the children finish their mailboxes and stop, then the
// supervisor leaves the registry.
void passivate_now(caf::stateful_actor<supervisor_state>* self) {
  auto& st = self->state;
  st.retiring = true;
  if (children_down(st)) return retire(self);
  stop_children(self);
}

} // namespace

namespace {

caf::behavior tenant_supervisor(caf::stateful_actor<supervisor_state>* self, tenant_env env) {
  self->state.env = env;
  self->state.meter = &meter("tenant_supervisor");
  self->state.meter->instances++;
  self->attach_functor([m = self->state.meter, stats = env.stats](const caf::error&) {
    m->instances--;
    m->mailbox.fetch_sub(stats->supervisor_mailbox.exchange(0));
  });
  // Children are linked so that they die with a crashed supervisor; a child's own failure
  // arrives as a down message below and must not take the supervisor with it.
  self->set_exit_handler([](caf::exit_msg&) {});
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (std::size_t i = 0; i < child_count; ++i) {
      auto& c = st.children[i];
      if (!c || c.address() != dm.source) continue;
      c = nullptr;
      st.env.stats->alive[i] = false;
      st.env.stats->mailbox[i] = 0;
      if (dm.reason && !st.retiring) {
        meter(child_name(static_cast<child_kind>(i))).restarts++;
        st.env.stats->restarts[i]++;
        note_incident({domain::now_micros(), st.env.tenant_id,
                       std::string(child_name(static_cast<child_kind>(i))),
                       self->system().render(dm.reason)});
        log_error("tenant {}: {} actor failed ({}); it restarts from Postgres on next use",
                  st.env.tenant_id, child_name(static_cast<child_kind>(i)),
                  self->system().render(dm.reason));
      }
    }
    if (st.retiring && children_down(st)) retire(self);
  });
  auto interval = tick_interval(env.rt->opts.tenant_idle_timeout);
  self->delayed_send(self, interval, tick_atom::value);
  return {
      [self](route_atom, int kind, caf::message& m) {
        metered _(*self->state.meter, self, self->state.published_mailbox,
                  &self->state.env.stats->supervisor_mailbox);
        if (kind < 0 || kind >= static_cast<int>(child_count)) return;
        if (self->state.retiring) {
          // A child still up gets it: it may be a sibling's answer that child waits for
          // before it can stop (a workflow step updating a contact). Messages for children
          // already down wait for the next supervisor.
          if (auto& c = self->state.children[static_cast<std::size_t>(kind)]) {
            self->send(c, std::move(m));
            return;
          }
          self->state.held.emplace_back(kind, std::move(m));
          return;
        }
        self->state.last_activity = std::chrono::steady_clock::now();
        self->send(child(self, static_cast<child_kind>(kind)), std::move(m));
      },
      [self, interval](tick_atom) {
        auto& st = self->state;
        if (st.retiring) return; // evicted meanwhile
        // Reads served from the contacts view count as activity too.
        auto read = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(
            st.env.stats->last_view_read.load(std::memory_order_relaxed)));
        auto idle = std::chrono::steady_clock::now() - std::max(st.last_activity, read);
        auto limit = std::chrono::duration<double>(st.env.rt->opts.tenant_idle_timeout);
        if (idle >= limit) return passivate_now(self);
        self->delayed_send(self, interval, tick_atom::value);
      },
      [self](evict_atom) {
        if (!self->state.retiring) passivate_now(self);
      },
      [self](fail_atom, int kind) {
        if (kind < 0 || kind >= static_cast<int>(child_count)) return;
        if (auto& c = self->state.children[static_cast<std::size_t>(kind)])
          self->send_exit(c, caf::make_error(caf::sec::runtime_error, "failed by operator"));
      },
      [self](final_atom) {
        auto& st = self->state;
        for (auto& [kind, m] : st.held)
          st.env.rt->route(st.env.tenant_id, static_cast<child_kind>(kind), std::move(m));
        st.held.clear();
        self->quit();
      },
      [self](stop_atom) {
        stop_children(self);
        self->quit();
      },
  };
}

} // namespace

caf::actor spawn_tenant_supervisor(caf::actor_system& sys, const tenant_env& env) {
  return sys.spawn(tenant_supervisor, env);
}

} // namespace crm::actors
