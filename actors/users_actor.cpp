// The users actor of one tenant: loads the tenant's users from Postgres on first use, answers
// reads from memory, and applies one write at a time (validate → commit → apply → reply), so
// rules that span users (the last active admin) hold without locks.
#include "actors/users.hpp"

#include "actors/system.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/user_repo.hpp"

#include <deque>
#include <map>

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::domain::user> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::actors::user_patch> : std::true_type {};
} // namespace caf

namespace crm::actors {
namespace {

using domain::errc;
using domain::failure;

struct users_state {
  tenant_env env;
  bool loaded = false;
  bool loading = false;
  bool writing = false;
  bool stopping = false;
  failure load_error;                         // why the last load failed
  std::map<std::int64_t, domain::user> users; // ordered by id, the list order
  std::deque<continuation> waiting;           // held while loading or while a write commits
  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
  static inline const char* name = "users";
};

using users_actor = caf::stateful_actor<users_state>;

failure not_found() {
  return failure::of(errc::not_found, "user not found");
}

void drain(users_actor* self);

void load(users_actor* self) {
  auto& st = self->state;
  if (st.loading) return;
  st.loading = true;
  auto me = caf::actor_cast<caf::actor>(self);
  st.env.pool->run<std::vector<domain::user>>(
      [tid = st.env.tenant_id](persistence::pg_conn& c) {
        return persistence::users_of_tenant(c, tid);
      },
      [me, self](domain::outcome<std::vector<domain::user>> r) {
        caf::anon_send(me, resume_atom::value, continuation{[self, r = std::move(r)]() mutable {
                         auto& st = self->state;
                         st.loading = false;
                         if (!r) {
                           // Answer everyone waiting; the next request tries again.
                           st.load_error = r.error();
                           auto waiting = std::move(st.waiting);
                           st.waiting.clear();
                           for (auto& k : waiting) k();
                           return;
                         }
                         for (auto& u : *r) st.users.emplace(u.id, std::move(u));
                         st.loaded = true;
                         drain(self);
                       }});
      });
}

// Runs `k` now if the state allows it, else holds it until it does. Reads need the users
// loaded; writes also need no other write in flight.
void when_ready(users_actor* self, bool write, continuation k) {
  auto& st = self->state;
  if (st.loaded && (!write || !st.writing) && st.waiting.empty()) {
    k();
    return;
  }
  st.waiting.push_back(std::move(k));
  if (!st.loaded) load(self);
}

void drain(users_actor* self) {
  auto& st = self->state;
  while (!st.waiting.empty() && !st.writing) {
    auto k = std::move(st.waiting.front());
    st.waiting.pop_front();
    k();
    if (!st.loaded) return; // a failed load answered them all
  }
  if (st.stopping && !st.writing && st.waiting.empty()) self->quit();
}

// Commits `work` on a pool thread and runs `apply` with its outcome back in the actor.
template <class T, class Work, class Apply>
void commit(users_actor* self, Work work, Apply apply) {
  self->state.writing = true;
  auto me = caf::actor_cast<caf::actor>(self);
  self->state.env.pool->run<T>(
      std::move(work), [me, self, apply = std::move(apply)](domain::outcome<T> r) mutable {
        caf::anon_send(me, resume_atom::value,
                       continuation{[self, apply = std::move(apply), r = std::move(r)]() mutable {
                         self->state.writing = false;
                         apply(std::move(r));
                         drain(self);
                       }});
      });
}

// A user id this tenant does not hold: 403 when another tenant does, else 404.
template <class T>
void reply_missing(users_actor* self, std::int64_t user_id, callback<T> reply) {
  reply_not_held(
      self->state.env,
      [user_id](persistence::pg_conn& c) { return persistence::tenant_of_user(c, user_id); },
      not_found(), std::move(reply));
}

// After a failed load, continuations answer with its failure.
template <class T>
bool unloaded(users_actor* self, const callback<T>& reply) {
  if (self->state.loaded) return false;
  reply(self->state.load_error);
  return true;
}

std::size_t active_admins(const users_state& st) {
  std::size_t n = 0;
  for (auto& [id, u] : st.users)
    if (u.is_active && u.user_role == domain::role::admin) ++n;
  return n;
}

caf::behavior users_behavior(users_actor* self, tenant_env env) {
  self->state.env = env;
  auto measure = instrument(self, child_kind::users);
  return {
      [self, measure](resume_atom, continuation& k) {
        auto _ = measure();
        k();
      },
      [self, measure](get_atom, std::int64_t user_id, callback<domain::user>& reply) {
        auto _ = measure();
        when_ready(self, false, [self, user_id, reply] {
          if (unloaded(self, reply)) return;
          auto& st = self->state;
          if (auto it = st.users.find(user_id); it != st.users.end())
            reply(it->second);
          else
            reply_missing(self, user_id, reply);
        });
      },
      [self, measure](list_atom, int page, int per_page,
                      callback<domain::page<domain::user>>& reply) {
        auto _ = measure();
        when_ready(self, false, [self, page, per_page, reply] {
          if (unloaded(self, reply)) return;
          auto& st = self->state;
          domain::page<domain::user> out;
          out.number = page;
          out.per_page = per_page;
          out.total = static_cast<std::int64_t>(st.users.size());
          auto skip = static_cast<std::int64_t>(page - 1) * per_page;
          auto it = st.users.begin();
          if (skip < out.total)
            std::advance(it, skip);
          else
            it = st.users.end();
          for (; it != st.users.end() && static_cast<int>(out.items.size()) < per_page; ++it)
            out.items.push_back(it->second);
          reply(std::move(out));
        });
      },
      [self, measure](create_atom, domain::user& u, callback<domain::user>& reply) {
        auto _ = measure();
        u.tenant_id = self->state.env.tenant_id;
        when_ready(self, true, [self, u = std::move(u), reply]() mutable {
          if (unloaded(self, reply)) return;
          commit<domain::user>(
              self,
              [u = std::move(u)](persistence::pg_conn& c) {
                return persistence::insert_user(c, u);
              },
              [self, reply](domain::outcome<domain::user> r) {
                if (r) self->state.users[r->id] = *r;
                reply(std::move(r));
              });
        });
      },
      [self, measure](update_atom, std::int64_t user_id, user_patch& patch,
                      callback<user_change>& reply) {
        auto _ = measure();
        when_ready(self, true, [self, user_id, patch = std::move(patch), reply]() mutable {
          if (unloaded(self, reply)) return;
          auto& st = self->state;
          auto it = st.users.find(user_id);
          if (it == st.users.end()) {
            reply_missing(self, user_id, reply);
            return;
          }
          auto next = it->second;
          bool revoke = false;
          if (patch.full_name) next.full_name = *patch.full_name;
          if (patch.role && *patch.role != next.user_role) {
            next.user_role = *patch.role;
            revoke = true;
          }
          if (patch.is_active && *patch.is_active != next.is_active) {
            next.is_active = *patch.is_active;
            revoke = revoke || !next.is_active;
          }
          if (patch.password_hash) {
            next.password_hash = *patch.password_hash;
            revoke = true;
          }
          const auto& cur = it->second;
          bool was_admin = cur.is_active && cur.user_role == domain::role::admin;
          bool stays_admin = next.is_active && next.user_role == domain::role::admin;
          if (was_admin && !stays_admin && active_admins(st) <= 1) {
            reply(failure::of(errc::conflict, "the last active admin of a tenant cannot be "
                                              "demoted or deactivated"));
            return;
          }
          commit<persistence::user_update_result>(
              self,
              [next, revoke](persistence::pg_conn& c) {
                return persistence::update_user(c, next, revoke);
              },
              [self, reply](domain::outcome<persistence::user_update_result> r) {
                if (!r) {
                  reply(r.error());
                  return;
                }
                self->state.users[r->stored.id] = r->stored;
                reply(user_change{r->stored, std::move(r->revoked_sessions)});
              });
        });
      },
      [self](stop_atom) {
        auto& st = self->state;
        st.stopping = true;
        if (!st.writing && st.waiting.empty()) self->quit();
      },
  };
}

} // namespace

caf::actor spawn_users(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(users_behavior, env);
}

void get_user(runtime& rt, std::int64_t tenant, std::int64_t user_id,
              callback<domain::user> reply) {
  rt.internals().route(tenant, child_kind::users,
                       caf::make_message(get_atom::value, user_id, std::move(reply)));
}

void list_users(runtime& rt, std::int64_t tenant, int page, int per_page,
                callback<domain::page<domain::user>> reply) {
  rt.internals().route(tenant, child_kind::users,
                       caf::make_message(list_atom::value, page, per_page, std::move(reply)));
}

void create_user(runtime& rt, std::int64_t tenant, domain::user u, callback<domain::user> reply) {
  rt.internals().route(tenant, child_kind::users,
                       caf::make_message(create_atom::value, std::move(u), std::move(reply)));
}

void update_user(runtime& rt, std::int64_t tenant, std::int64_t user_id, user_patch patch,
                 callback<user_change> reply) {
  rt.internals().route(
      tenant, child_kind::users,
      caf::make_message(update_atom::value, user_id, std::move(patch), std::move(reply)));
}

} // namespace crm::actors
