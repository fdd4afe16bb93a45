// The users actor of one tenant, on the record kernel (actors/record_actor.hpp): the users and
// the rules that span them (the last active admin) are the domain's (domain::user_directory);
// writes run one at a time, so those rules hold without locks.
#include "actors/users.hpp"

#include "actors/record_actor.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/user_repo.hpp"

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::domain::user> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::user_patch> : std::true_type {};
} // namespace caf

namespace crm::actors {
namespace {

using domain::user;

struct users_aggregate {
  static constexpr child_kind kind = child_kind::users;
  using store = domain::user_directory;
  static store load(persistence::pg_conn& c, std::int64_t tenant) {
    store s;
    for (auto& u : persistence::users_of_tenant(c, tenant)) s.users.emplace(u.id, std::move(u));
    return s;
  }
  static std::optional<std::int64_t> owner_of(persistence::pg_conn& c, std::int64_t id) {
    return persistence::tenant_of_user(c, id);
  }
};

using users_actor = record_actor<users_aggregate>;

// Memory, then the contacts actor told who may own a contact (before the client hears of it).
void stored(users_actor* self, const user& u) {
  self->state.store.put(u);
  self->state.env.rt->route(self->state.env.tenant_id, child_kind::contacts,
                            caf::make_message(user_active_atom::value, u.id, u.is_active));
}

caf::behavior users_behavior(users_actor* self, tenant_env env) {
  using store = users_aggregate::store;
  return record_behavior(
      self, env,
      [](users_actor* self, get_atom, std::int64_t id, callback<user>& reply) {
        read(self, id, reply, [id](const store& s) { return s.get(id); });
      },
      [](users_actor* self, list_atom, int page, int per_page,
         callback<domain::page<user>>& reply) {
        read(self, 0, reply, [=](const store& s) { return s.list(page, per_page); });
      },
      [](users_actor* self, create_atom, user& u, callback<user>& reply) {
        u.tenant_id = self->state.env.tenant_id;
        change(
            self, 0, reply, [u = std::move(u)](const store&) { return domain::outcome<user>(u); },
            [](persistence::pg_conn& c, const user& u) { return persistence::insert_user(c, u); },
            [](users_actor* self, user saved) {
              stored(self, saved);
              return saved;
            });
      },
      [](users_actor* self, update_atom, std::int64_t id, user_patch& patch,
         callback<user_change>& reply) {
        change(
            self, id, reply,
            [id, patch = std::move(patch)](const store& s) { return s.plan_update(id, patch); },
            [](persistence::pg_conn& c, const domain::user_update& u) {
              return persistence::update_user(c, u.next, u.revoke);
            },
            [](users_actor* self, persistence::user_update_result r) {
              stored(self, r.stored);
              return user_change{r.stored, std::move(r.revoked_sessions)};
            });
      });
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
