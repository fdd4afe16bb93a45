// The tasks actor of one tenant, on the record kernel (actors/record_actor.hpp): the tasks and
// their rules are the domain's (domain::task_store); each change is audited in its own
// transaction (persistence/task_repo.hpp). It also fires task.overdue: a timer set for the
// earliest due time of the open tasks not yet marked, and the sweeper's wake for a tenant
// whose actors are stopped.
#include "actors/tasks.hpp"

#include "actors/record_actor.hpp"
#include "domain/clock.hpp"
#include "domain/page_json.hpp"
#include "persistence/log.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/task_repo.hpp"

#include <boost/json.hpp>

#include <chrono>

namespace caf {
CRM_LOCAL_MESSAGE(crm::domain::task)
CRM_LOCAL_MESSAGE(crm::domain::task_patch)
CRM_LOCAL_MESSAGE(crm::domain::requester)
CRM_LOCAL_MESSAGE(crm::domain::task_query)
} // namespace caf

namespace crm::actors {
namespace {

using domain::requester;
using domain::task;

using delete_atom = caf::atom_constant<caf::atom("delete")>;
using gone_atom = caf::atom_constant<caf::atom("gone")>;
using deal_gone_atom = caf::atom_constant<caf::atom("deal_gone")>;
using overdue_atom = caf::atom_constant<caf::atom("overdue")>;

// task.overdue: tasks marked in one transaction at most this many at a time; after a failure
// (Postgres away), the next try this much later.
constexpr std::size_t overdue_batch = 500;
constexpr auto overdue_retry = std::chrono::seconds(5);
// The timer never waits longer than this (a clock step, a due time months away).
constexpr std::int64_t longest_wait_us = 3600LL * 1'000'000;

// The overdue timer: the due time it is set for (0: a retry after a failure), and whether a
// marking is under way.
struct overdue_timer {
  std::optional<std::int64_t> armed_for;
  bool firing = false;
};

struct tasks_aggregate {
  static constexpr child_kind kind = child_kind::tasks;
  using store = domain::task_store;
  using extra = overdue_timer;
  static store load(persistence::pg_conn& c, std::int64_t tenant) {
    return persistence::load_tasks(c, tenant);
  }
  static std::optional<std::int64_t> owner_of(persistence::pg_conn& c, std::int64_t id) {
    return persistence::tenant_of_task(c, id);
  }
};

using tasks_actor = record_actor<tasks_aggregate>;
using store = tasks_aggregate::store;

// The audit row of a change: a touch of the patient's record when the task is about one (the
// repository names the contact, or the task, once the row is stored).
std::vector<domain::audit_record> audit(const domain::audit_context* who, std::int64_t tenant,
                                        const char* action, std::vector<std::string> fields,
                                        int status) {
  auto row = domain::make_audit(who, tenant, "task", 0, action);
  row.fields = std::move(fields);
  row.status = status;
  return {std::move(row)};
}

void arm(tasks_actor* self);

// A committed task: memory, the timer, then the answer.
std::string stored(tasks_actor* self, task saved) {
  self->state.store.put(saved);
  arm(self);
  return boost::json::serialize(domain::task_to_json(saved, domain::now_micros()));
}

void fire(tasks_actor* self);

// Sets the timer for the earliest due time, unless one is set for that time or earlier.
void arm(tasks_actor* self) {
  auto& st = self->state;
  auto& timer = st.extra;
  if (st.stopping || timer.firing) return;
  auto next = st.store.next_due();
  if (!next || (timer.armed_for && *timer.armed_for <= *next)) return;
  timer.armed_for = *next;
  auto wait = std::clamp<std::int64_t>(*next - domain::now_micros() + 1000, 0, longest_wait_us);
  self->delayed_send(self, std::chrono::microseconds(wait), overdue_atom::value, *next);
}

void retry_later(tasks_actor* self) {
  if (self->state.stopping) return;
  self->state.extra.armed_for = 0;
  self->delayed_send(self, overdue_retry, overdue_atom::value, std::int64_t{0});
}

// Marks the tasks due by now, in the writer's turn: each fires task.overdue once (the mark and
// the event share the transaction). Then the next batch, or the timer; after a failure, a
// retry.
void fire(tasks_actor* self) {
  auto& st = self->state;
  if (st.stopping || st.extra.firing) return;
  auto now = domain::now_micros();
  auto due = st.store.due_overdue(now, overdue_batch);
  if (due.empty()) return arm(self);
  st.extra.firing = true;
  auto settled =
      in_actor<domain::outcome<domain::done>>(self, [self](domain::outcome<domain::done> r) {
        self->state.extra.firing = false;
        if (!r) return retry_later(self);
        fire(self);
      });
  write<tasks_aggregate, domain::done>(
      self, callback<domain::done>(std::move(settled)),
      [self, due, now](callback<domain::done> reply) {
        auto tenant = self->state.env.tenant_id;
        bool emit = self->state.store.event_listeners;
        db<std::vector<task>>(
            self,
            [tenant, due, now, emit](persistence::pg_conn& c) {
              return persistence::mark_tasks_overdue(c, tenant, due, now, emit);
            },
            [self, due, emit, reply](domain::outcome<std::vector<task>> r) {
              auto& st = self->state;
              if (!r) {
                log_warn("tenant {}: task.overdue waits: {}", st.env.tenant_id, r.error().detail);
                return reply(r.error());
              }
              for (auto& t : *r) st.store.put(t);
              // Not marked: changed or gone in Postgres meanwhile (a contact's delete); no
              // longer waited for here.
              for (auto id : due) st.store.stop_waiting(id);
              if (emit && !r->empty())
                st.env.rt->route(st.env.tenant_id, child_kind::workflows,
                                 caf::make_message(outbox_atom::value));
              reply(domain::done{});
            });
      });
}

caf::behavior tasks_behavior(tasks_actor* self, tenant_env env) {
  // Tasks that fell due while no actor was live are marked from the start.
  self->send(self, wake_atom::value);
  return record_behavior(
      self, env,
      [](tasks_actor* self, list_atom, domain::task_query& q, int page, int per_page,
         callback<std::string>& reply) {
        read(self, 0, reply, [=](const store& s) {
          auto now = domain::now_micros();
          auto p = s.list(q, now, page, per_page);
          boost::json::array items;
          for (auto& t : p.items) items.push_back(domain::task_to_json(t, now));
          return domain::render_page(std::move(items), p.total, page, per_page);
        });
      },
      [](tasks_actor* self, get_atom, std::int64_t id, callback<std::string>& reply) {
        read(self, id, reply, [=](const store& s) -> domain::outcome<std::string> {
          auto t = s.get(id);
          if (!t) return t.error();
          return boost::json::serialize(domain::task_to_json(*t, domain::now_micros()));
        });
      },
      [](tasks_actor* self, create_atom, task& t, requester& by, callback<std::string>& reply) {
        auto tenant = self->state.env.tenant_id;
        std::vector<std::string> fields{"title"};
        for (auto [given, name] : {std::pair{!t.description.empty(), "description"},
                                   {t.contact_id.has_value(), "contact_id"},
                                   {t.deal_id.has_value(), "deal_id"},
                                   {t.appointment_id.has_value(), "appointment_id"},
                                   {t.assignee_id.has_value(), "assignee_id"},
                                   {t.due_at.has_value(), "due_at"}})
          if (given) fields.emplace_back(name);
        change(
            self, 0, reply,
            [t = std::move(t), by, tenant](const store& s) {
              return domain::outcome<task>(s.plan_create(t, tenant, by, domain::now_micros()));
            },
            [rows = audit(reply.who(), tenant, "create_task", std::move(fields), 201)](
                persistence::pg_conn& c, const task& t) {
              return persistence::insert_task(c, t, rows);
            },
            stored);
      },
      [](tasks_actor* self, update_atom, std::int64_t id, domain::task_patch& p, requester& by,
         callback<std::string>& reply) {
        std::vector<std::string> fields;
        for (auto [given, name] : {std::pair{p.title.has_value(), "title"},
                                   {p.description.has_value(), "description"},
                                   {p.contact_id.has_value(), "contact_id"},
                                   {p.deal_id.has_value(), "deal_id"},
                                   {p.appointment_id.has_value(), "appointment_id"},
                                   {p.assignee_id.has_value(), "assignee_id"},
                                   {p.due_at.has_value(), "due_at"},
                                   {p.priority.has_value(), "priority"},
                                   {p.status.has_value(), "status"}})
          if (given) fields.emplace_back(name);
        change(
            self, id, reply,
            [id, p = std::move(p), by](const store& s) {
              return s.plan_update(id, p, by, domain::now_micros());
            },
            [rows = audit(reply.who(), self->state.env.tenant_id, "update_task", fields, 200)](
                persistence::pg_conn& c, const task& t) {
              return persistence::update_task(c, t, rows);
            },
            stored);
      },
      [](tasks_actor* self, delete_atom, std::int64_t id, requester& by,
         callback<domain::done>& reply) {
        change(
            self, id, reply, [id, by](const store& s) { return s.plan_delete(id, by); },
            [rows = audit(reply.who(), self->state.env.tenant_id, "delete_task", {}, 204)](
                persistence::pg_conn& c, const task& t) {
              return persistence::delete_task(c, t, rows);
            },
            [](tasks_actor* self, task gone) {
              self->state.store.erase(gone.id);
              return domain::done{};
            });
      },
      [](tasks_actor* self, gone_atom, std::int64_t contact) {
        forget(self, [contact](store& s) { s.forget_contact(contact); });
      },
      [](tasks_actor* self, gone_atom, std::int64_t from, std::int64_t into) {
        forget(self, [from, into](store& s) { s.move_contact(from, into); });
      },
      [](tasks_actor* self, deal_gone_atom, std::int64_t deal) {
        forget(self, [deal](store& s) { s.forget_deal(deal); });
      },
      // Whether anyone listens to task events (the workflows actor, when that changes): applied
      // in order with the writes waiting for a load, so a load never overrides it.
      [](tasks_actor* self, listeners_atom, bool any) {
        when_loaded(
            self, [](const domain::failure&) {},
            [self, any] { self->state.store.event_listeners = any; });
      },
      [](tasks_actor* self, overdue_atom, std::int64_t armed_for) {
        auto& timer = self->state.extra;
        if (timer.armed_for != armed_for) return; // a later setting replaced this one
        timer.armed_for.reset();
        fire(self);
      },
      [](tasks_actor* self, wake_atom) {
        // On spawn, and woken by the sweeper.
        when_loaded(
            self, [self](const domain::failure&) { retry_later(self); }, [self] { fire(self); });
      });
}

} // namespace

caf::actor spawn_tasks(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(tasks_behavior, env);
}

void list_tasks(runtime& rt, std::int64_t tenant, domain::task_query q, int page, int per_page,
                callback<std::string> reply) {
  tell<child_kind::tasks>(rt, tenant, list_atom::value, std::move(q), page, per_page,
                          std::move(reply));
}

void get_task(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  tell<child_kind::tasks>(rt, tenant, get_atom::value, id, std::move(reply));
}

void create_task(runtime& rt, std::int64_t tenant, task t, requester by,
                 callback<std::string> reply) {
  tell<child_kind::tasks>(rt, tenant, create_atom::value, std::move(t), by, std::move(reply));
}

void update_task(runtime& rt, std::int64_t tenant, std::int64_t id, domain::task_patch p,
                 requester by, callback<std::string> reply) {
  tell<child_kind::tasks>(rt, tenant, update_atom::value, id, std::move(p), by, std::move(reply));
}

void delete_task(runtime& rt, std::int64_t tenant, std::int64_t id, requester by,
                 callback<domain::done> reply) {
  tell<child_kind::tasks>(rt, tenant, delete_atom::value, id, by, std::move(reply));
}

void move_contact_tasks(runtime& rt, std::int64_t tenant, std::int64_t from, std::int64_t into) {
  tell<child_kind::tasks>(rt, tenant, gone_atom::value, from, into);
}

void forget_contact_tasks(runtime& rt, std::int64_t tenant, std::int64_t contact) {
  tell<child_kind::tasks>(rt, tenant, gone_atom::value, contact);
}

void forget_deal_tasks(runtime& rt, std::int64_t tenant, std::int64_t deal) {
  tell<child_kind::tasks>(rt, tenant, deal_gone_atom::value, deal);
}

} // namespace crm::actors
