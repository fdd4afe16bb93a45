// The fields actor of one tenant, on the record kernel (actors/record_actor.hpp): the
// definitions and their rules are the domain's (domain::field_definitions); this file says what
// each message does. Every request waits for the change in flight, reads too, so that a read
// never sees a state the record actors have not reached. A hard delete is carried out by the
// actor that owns the values; until it answers, the fields actor holds every other request, so
// nobody sees the definition without its values or the values without their definition.
#include "actors/fields.hpp"

#include "actors/record_actor.hpp"
#include "domain/clock.hpp"
#include "persistence/field_repo.hpp"
#include "persistence/pg_pool.hpp"

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::domain::field_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::field_entity> : std::true_type {};
} // namespace caf

namespace crm::actors {
namespace {

using domain::custom_field;
using domain::field_entity;
using domain::outcome;

using delete_atom = caf::atom_constant<caf::atom("delete")>;

using fields_aggregate = aggregate<child_kind::fields, domain::field_definitions,
                                   &persistence::load_fields, &persistence::tenant_of_field>;

using fields_actor = record_actor<fields_aggregate>;

// Sends the definitions to every record actor of the tenant (the contacts actor, which owns
// contacts and companies, and the deals actor). Sent before the reply, through the supervisor
// that also forwards the client's next request, so that request finds them in force.
void push(fields_actor* self) {
  auto& st = self->state;
  for (auto k : {child_kind::contacts, child_kind::deals})
    st.env.rt->route(st.env.tenant_id, k, caf::make_message(defs_atom::value, st.store));
}

// The common write: commit the definition the rules planned, then memory, then the record
// actors, then the client.
template <class T, class Plan, class Answer>
void save_planned(fields_actor* self, std::int64_t id, callback<T> reply, Plan plan,
                  Answer answer) {
  change(
      self, id, reply, std::move(plan),
      [](persistence::pg_conn& c, const custom_field& f) { return persistence::save_field(c, f); },
      [answer](fields_actor* self, persistence::field_saved saved) {
        self->state.store.put(saved.field, saved.version, saved.sealed_data_key);
        push(self);
        return answer(saved.field);
      });
}

// The definition and every value under its name: the values live with the actor that owns
// the entity's records, which answers the version its purge committed.
void hard_delete(fields_actor* self, field_entity entity, std::int64_t id,
                 callback<domain::done> reply) {
  write(self, reply, [self, entity, id](callback<domain::done> reply) {
    auto found = self->state.store.get(entity, id);
    if (!found) return answer(self, id, outcome<domain::done>(found.error()), reply);
    auto owner = entity == field_entity::deal ? child_kind::deals : child_kind::contacts;
    auto purged = in_actor<outcome<std::int64_t>>(self, [self, id, reply](outcome<std::int64_t> r) {
      if (!r) return reply(r.error());
      self->state.store.erase(id, *r);
      push(self);
      reply(domain::done{});
    });
    self->state.env.rt->route(
        self->state.env.tenant_id, owner,
        caf::make_message(purge_atom::value, *found, callback<std::int64_t>(std::move(purged))));
  });
}

caf::behavior fields_behavior(fields_actor* self, tenant_env env) {
  using store = fields_aggregate::store;
  return record_behavior(
      self, env,
      [](fields_actor* self, list_atom, field_entity entity, bool include_inactive,
         callback<std::vector<custom_field>>& reply) {
        read_in_turn(self, 0, reply,
                     [=](const store& s) { return s.of(entity, include_inactive); });
      },
      [](fields_actor* self, get_atom, field_entity entity, std::int64_t id,
         callback<custom_field>& reply) {
        read_in_turn(self, id, reply, [=](const store& s) { return s.get(entity, id); });
      },
      [](fields_actor* self, create_atom, custom_field& f, callback<custom_field>& reply) {
        auto tenant = self->state.env.tenant_id;
        save_planned(
            self, 0, reply,
            [f = std::move(f), tenant](const store& s) {
              return s.plan_create(f, tenant, domain::now_micros());
            },
            [](const custom_field& saved) { return saved; });
      },
      [](fields_actor* self, update_atom, field_entity entity, std::int64_t id,
         domain::field_patch& p, callback<custom_field>& reply) {
        save_planned(
            self, id, reply,
            [entity, id, p = std::move(p)](const store& s) {
              return s.plan_update(entity, id, p, domain::now_micros());
            },
            [](const custom_field& saved) { return saved; });
      },
      [](fields_actor* self, delete_atom, field_entity entity, std::int64_t id, bool hard,
         callback<domain::done>& reply) {
        if (hard) return hard_delete(self, entity, id, reply);
        save_planned(
            self, id, reply,
            [entity, id](const store& s) {
              return s.plan_deactivate(entity, id, domain::now_micros());
            },
            [](const custom_field&) { return domain::done{}; });
      });
}

} // namespace

caf::actor spawn_fields(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(fields_behavior, env);
}

void list_fields(runtime& rt, std::int64_t tenant, domain::field_entity entity,
                 bool include_inactive, callback<std::vector<domain::custom_field>> reply) {
  rt.internals().route(
      tenant, child_kind::fields,
      caf::make_message(list_atom::value, entity, include_inactive, std::move(reply)));
}

void get_field(runtime& rt, std::int64_t tenant, domain::field_entity entity, std::int64_t id,
               callback<domain::custom_field> reply) {
  rt.internals().route(tenant, child_kind::fields,
                       caf::make_message(get_atom::value, entity, id, std::move(reply)));
}

void create_field(runtime& rt, std::int64_t tenant, domain::custom_field f,
                  callback<domain::custom_field> reply) {
  rt.internals().route(tenant, child_kind::fields,
                       caf::make_message(create_atom::value, std::move(f), std::move(reply)));
}

void update_field(runtime& rt, std::int64_t tenant, domain::field_entity entity, std::int64_t id,
                  field_patch patch, callback<domain::custom_field> reply) {
  rt.internals().route(
      tenant, child_kind::fields,
      caf::make_message(update_atom::value, entity, id, std::move(patch), std::move(reply)));
}

void delete_field(runtime& rt, std::int64_t tenant, domain::field_entity entity, std::int64_t id,
                  bool hard, callback<domain::done> reply) {
  rt.internals().route(tenant, child_kind::fields,
                       caf::make_message(delete_atom::value, entity, id, hard, std::move(reply)));
}

} // namespace crm::actors
