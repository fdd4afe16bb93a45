// The fields actor of one tenant: loads the definitions on first use, answers reads from memory,
// and applies one change at a time (validate → commit → push to record actors → reply). A hard
// delete is carried out by the contacts actor, which owns the values; until it answers, this
// actor holds every other request, so nobody sees the definition without its values or the
// values without their definition.
#include "actors/fields.hpp"

#include "actors/system.hpp"
#include "domain/clock.hpp"
#include "persistence/field_repo.hpp"
#include "persistence/pg_pool.hpp"

#include <algorithm>
#include <deque>

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::actors::field_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::field_entity> : std::true_type {};
} // namespace caf

namespace crm::actors {
namespace {

using domain::errc;
using domain::failure;

using delete_atom = caf::atom_constant<caf::atom("delete")>;

struct fields_state {
  tenant_env env;
  bool loaded = false;
  bool loading = false;
  bool busy = false; // a change is committing
  bool stopping = false;
  domain::field_definitions defs;
  std::deque<std::pair<continuation, std::function<void(const failure&)>>> waiting;
  std::int64_t published_mailbox = 0;
  actor_meter* meter = nullptr;
  static inline const char* name = "fields";
};

using fields_actor = caf::stateful_actor<fields_state>;

void drain(fields_actor* self, const failure* error = nullptr);

void load(fields_actor* self) {
  auto& st = self->state;
  if (st.loading) return;
  st.loading = true;
  auto me = caf::actor_cast<caf::actor>(self);
  st.env.pool->run<domain::field_definitions>(
      [tid = st.env.tenant_id](persistence::pg_conn& c) {
        return persistence::load_fields(c, tid);
      },
      [me, self](domain::outcome<domain::field_definitions> r) mutable {
        caf::anon_send(me, resume_atom::value, continuation{[self, r = std::move(r)]() mutable {
                         auto& st = self->state;
                         st.loading = false;
                         if (!r) return drain(self, &r.error());
                         st.defs = std::move(*r);
                         st.loaded = true;
                         drain(self);
                       }});
      });
}

// Every request waits for the definitions, and for the change in flight: reads too, so that a
// read never sees a state the record actors have not reached.
void when_ready(fields_actor* self, std::function<void(const failure&)> fail, continuation k) {
  auto& st = self->state;
  if (st.loaded && !st.busy && st.waiting.empty()) {
    k();
    return;
  }
  st.waiting.emplace_back(std::move(k), std::move(fail));
  if (!st.loaded) load(self);
}

void drain(fields_actor* self, const failure* error) {
  auto& st = self->state;
  while (!st.waiting.empty()) {
    if (st.loaded && !st.busy) {
      auto k = std::move(st.waiting.front().first);
      st.waiting.pop_front();
      k();
    } else if (error) {
      auto f = std::move(st.waiting.front().second);
      st.waiting.pop_front();
      f(*error);
    } else {
      break;
    }
  }
  if (st.stopping && !st.busy && st.waiting.empty()) self->quit();
}

template <class T>
std::function<void(const failure&)> fail_with(callback<T> reply) {
  return [reply](const failure& f) { reply(f); };
}

// Sends the definitions to every record actor of the tenant (the contacts actor, which owns
// contacts and companies, and the deals actor). Sent before the reply, through the supervisor
// that also forwards the client's next request, so that request finds them in force.
void push(fields_actor* self) {
  auto& st = self->state;
  for (auto k : {child_kind::contacts, child_kind::deals})
    st.env.rt->route(st.env.tenant_id, k, caf::make_message(defs_atom::value, st.defs));
}

const domain::custom_field* find(const fields_state& st, std::int64_t id) {
  for (auto& f : st.defs.fields)
    if (f.id == id) return &f;
  return nullptr;
}

// An id this tenant does not hold: 403 when another tenant does, else 404.
template <class T>
void reply_missing(fields_actor* self, std::int64_t id, callback<T> reply) {
  reply_not_held(
      self->state.env,
      [id](persistence::pg_conn& c) { return persistence::tenant_of_field(c, id); },
      failure::of(errc::not_found, "custom field not found"), std::move(reply));
}

// Finds field `id` of `entity` for a continuation, or answers for it.
template <class T>
const domain::custom_field* lookup(fields_actor* self, domain::field_entity entity, std::int64_t id,
                                   const callback<T>& reply) {
  auto f = find(self->state, id);
  if (!f) {
    reply_missing(self, id, reply);
    return nullptr;
  }
  if (f->entity != entity) {
    reply(failure::of(errc::not_found, "custom field not found for this entity"));
    return nullptr;
  }
  return f;
}

// Commits `f` (insert when id is 0), then pushes and replies.
void save(fields_actor* self, domain::custom_field f, callback<domain::custom_field> reply) {
  auto& st = self->state;
  st.busy = true;
  auto me = caf::actor_cast<caf::actor>(self);
  st.env.pool->run<persistence::field_saved>(
      [f](persistence::pg_conn& c) { return persistence::save_field(c, f); },
      [me, self, reply](domain::outcome<persistence::field_saved> r) mutable {
        caf::anon_send(me, resume_atom::value, continuation{[self, reply, r = std::move(r)] {
                         auto& st = self->state;
                         st.busy = false;
                         if (r) {
                           auto& saved = r->field;
                           auto it = std::find_if(
                               st.defs.fields.begin(), st.defs.fields.end(),
                               [&](const domain::custom_field& d) { return d.id == saved.id; });
                           if (it == st.defs.fields.end())
                             st.defs.fields.push_back(saved);
                           else
                             *it = saved;
                           st.defs.version = std::max(st.defs.version, r->version);
                           if (!r->sealed_data_key.empty())
                             st.defs.sealed_data_key = r->sealed_data_key;
                           push(self);
                           reply(saved);
                         } else {
                           reply(r.error());
                         }
                         drain(self);
                       }});
      });
}

void do_update(fields_actor* self, const domain::custom_field& cur, field_patch p,
               callback<domain::custom_field> reply) {
  auto next = cur;
  auto issues = std::move(p.issues);
  auto type = p.type.value_or(cur.type);
  if (p.options && !domain::has_options(type))
    issues.push_back({{"body", "options"},
                      "options are only allowed for select and multiselect",
                      "value_error"});
  if (!issues.empty()) return reply(failure::invalid(std::move(issues)));
  if (p.name && *p.name != cur.name)
    return reply(failure::of(errc::conflict, "a custom field's name cannot change"));
  // Values stored sealed (or not) stay as they are: a field changes sensitivity by being
  // replaced (docs/compliance.md "Sensitive fields").
  if (p.sensitive && *p.sensitive != cur.sensitive)
    return reply(failure::of(errc::conflict, "a field's sensitivity cannot change; create a new "
                                             "field instead"));
  if (type != cur.type && !domain::widening(cur.type, type))
    return reply(failure::of(errc::conflict, "this type change could invalidate stored values; "
                                             "create a new field instead"));
  next.type = type;
  if (p.options) {
    for (auto& o : cur.options)
      if (std::find(p.options->begin(), p.options->end(), o) == p.options->end())
        return reply(
            failure::of(errc::conflict, "options cannot be removed: stored values may use them"));
    next.options = *p.options;
  }
  if (p.label) next.label = *p.label;
  if (p.required) next.required = *p.required;
  if (p.is_active) next.is_active = *p.is_active;
  next.updated_at = std::max(domain::now_micros(), cur.updated_at + 1);
  save(self, std::move(next), reply);
}

void do_hard_delete(fields_actor* self, domain::custom_field f, callback<domain::done> reply) {
  auto& st = self->state;
  st.busy = true;
  auto me = caf::actor_cast<caf::actor>(self);
  // The values live with the actor that owns the entity's records.
  auto owner = f.entity == domain::field_entity::deal ? child_kind::deals : child_kind::contacts;
  st.env.rt->route(
      st.env.tenant_id, owner,
      caf::make_message(
          purge_atom::value, f,
          callback<std::int64_t>([me, self, f, reply](domain::outcome<std::int64_t> r) mutable {
            caf::anon_send(me, resume_atom::value, continuation{[self, f, reply, r] {
                             auto& st = self->state;
                             st.busy = false;
                             if (r) {
                               std::erase_if(st.defs.fields, [&](const domain::custom_field& d) {
                                 return d.id == f.id;
                               });
                               st.defs.version = std::max(st.defs.version, *r);
                               push(self);
                               reply(domain::done{});
                             } else {
                               reply(r.error());
                             }
                             drain(self);
                           }});
          })));
}

caf::behavior fields_behavior(fields_actor* self, tenant_env env) {
  self->state.env = env;
  auto measure = instrument(self, child_kind::fields);
  return {
      [self, measure](resume_atom, continuation& k) {
        auto _ = measure();
        k();
      },
      [self, measure](list_atom, domain::field_entity entity, bool include_inactive,
                      callback<std::vector<domain::custom_field>>& reply) {
        auto _ = measure();
        when_ready(self, fail_with(reply), [self, entity, include_inactive, reply] {
          std::vector<domain::custom_field> out;
          for (auto& f : self->state.defs.fields)
            if (f.entity == entity && (include_inactive || f.is_active)) out.push_back(f);
          std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
          reply(std::move(out));
        });
      },
      [self, measure](get_atom, domain::field_entity entity, std::int64_t id,
                      callback<domain::custom_field>& reply) {
        auto _ = measure();
        when_ready(self, fail_with(reply), [self, entity, id, reply] {
          if (auto f = lookup(self, entity, id, reply)) reply(*f);
        });
      },
      [self, measure](create_atom, domain::custom_field& f, callback<domain::custom_field>& reply) {
        auto _ = measure();
        when_ready(self, fail_with(reply), [self, f = std::move(f), reply]() mutable {
          auto& st = self->state;
          if (st.defs.find(f.entity, f.name))
            return reply(failure::of(errc::conflict,
                                     "a custom field with this name exists for this entity"));
          f.id = 0;
          f.tenant_id = st.env.tenant_id;
          f.created_at = f.updated_at = domain::now_micros();
          save(self, std::move(f), reply);
        });
      },
      [self, measure](update_atom, domain::field_entity entity, std::int64_t id, field_patch& p,
                      callback<domain::custom_field>& reply) {
        auto _ = measure();
        when_ready(self, fail_with(reply), [self, entity, id, p = std::move(p), reply]() mutable {
          // A body that fails validation is 422 whatever the id (validation comes first).
          if (!p.issues.empty() && !find(self->state, id))
            return reply(failure::invalid(std::move(p.issues)));
          if (auto f = lookup(self, entity, id, reply)) do_update(self, *f, std::move(p), reply);
        });
      },
      [self, measure](delete_atom, domain::field_entity entity, std::int64_t id, bool hard,
                      callback<domain::done>& reply) {
        auto _ = measure();
        when_ready(self, fail_with(reply), [self, entity, id, hard, reply] {
          auto f = lookup(self, entity, id, reply);
          if (!f) return;
          if (hard) return do_hard_delete(self, *f, reply);
          auto next = *f;
          next.is_active = false;
          next.updated_at = std::max(domain::now_micros(), f->updated_at + 1);
          save(self, std::move(next),
               callback<domain::custom_field>([reply](domain::outcome<domain::custom_field> r) {
                 if (!r) return reply(r.error());
                 reply(domain::done{});
               }));
        });
      },
      [self](stop_atom) {
        auto& st = self->state;
        st.stopping = true;
        if (!st.busy && st.waiting.empty()) self->quit();
      },
  };
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
