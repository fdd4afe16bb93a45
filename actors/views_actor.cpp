// The views actor of one tenant, on the record kernel (actors/record_actor.hpp): the saved views
// and their rules are the domain's (domain::view_store).
#include "actors/views.hpp"

#include "actors/record_actor.hpp"
#include "domain/clock.hpp"
#include "domain/page_json.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/view_repo.hpp"

#include <boost/json.hpp>

namespace caf {
CRM_LOCAL_MESSAGE(crm::domain::saved_view)
CRM_LOCAL_MESSAGE(crm::domain::view_patch)
CRM_LOCAL_MESSAGE(crm::domain::requester)
} // namespace caf

namespace crm::actors {
namespace {

using domain::requester;
using domain::saved_view;

using delete_atom = caf::atom_constant<caf::atom("delete")>;

using views_aggregate = aggregate<child_kind::views, domain::view_store, &persistence::load_views,
                                  &persistence::tenant_of_view>;
using views_actor = record_actor<views_aggregate>;
using store = views_aggregate::store;

std::string stored(views_actor* self, saved_view saved) {
  self->state.store.put(saved);
  return boost::json::serialize(domain::view_to_json(saved));
}

caf::behavior views_behavior(views_actor* self, tenant_env env) {
  return record_behavior(
      self, env,
      [](views_actor* self, list_atom, requester& by, int page, int per_page,
         callback<std::string>& reply) {
        read(self, 0, reply, [=](const store& s) {
          auto p = s.list(by, page, per_page);
          boost::json::array items;
          for (auto& v : p.items) items.push_back(domain::view_to_json(v));
          return domain::render_page(std::move(items), p.total, page, per_page);
        });
      },
      [](views_actor* self, get_atom, std::int64_t id, requester& by, callback<saved_view>& reply) {
        read(self, id, reply, [=](const store& s) { return s.get(id, by); });
      },
      [](views_actor* self, create_atom, saved_view& v, bool shared, requester& by,
         callback<std::string>& reply) {
        auto tenant = self->state.env.tenant_id;
        change(
            self, 0, reply,
            [v = std::move(v), shared, by, tenant](const store& s) {
              return s.plan_create(v, shared, tenant, by, domain::now_micros());
            },
            persistence::insert_view, stored);
      },
      [](views_actor* self, update_atom, std::int64_t id, domain::view_patch& p, requester& by,
         callback<std::string>& reply) {
        change(
            self, id, reply,
            [id, p = std::move(p), by](const store& s) {
              return s.plan_update(id, p, by, domain::now_micros());
            },
            persistence::update_view, stored);
      },
      [](views_actor* self, delete_atom, std::int64_t id, requester& by,
         callback<domain::done>& reply) {
        change(
            self, id, reply, [id, by](const store& s) { return s.plan_delete(id, by); },
            persistence::delete_view,
            [](views_actor* self, saved_view gone) {
              self->state.store.erase(gone.id);
              return domain::done{};
            });
      });
}

} // namespace

caf::actor spawn_views(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(views_behavior, env);
}

void list_views(runtime& rt, std::int64_t tenant, requester by, int page, int per_page,
                callback<std::string> reply) {
  tell<child_kind::views>(rt, tenant, list_atom::value, by, page, per_page, std::move(reply));
}

void get_view(runtime& rt, std::int64_t tenant, std::int64_t id, requester by,
              callback<saved_view> reply) {
  tell<child_kind::views>(rt, tenant, get_atom::value, id, by, std::move(reply));
}

void create_view(runtime& rt, std::int64_t tenant, saved_view v, bool shared, requester by,
                 callback<std::string> reply) {
  tell<child_kind::views>(rt, tenant, create_atom::value, std::move(v), shared, by,
                          std::move(reply));
}

void update_view(runtime& rt, std::int64_t tenant, std::int64_t id, domain::view_patch p,
                 requester by, callback<std::string> reply) {
  tell<child_kind::views>(rt, tenant, update_atom::value, id, std::move(p), by, std::move(reply));
}

void delete_view(runtime& rt, std::int64_t tenant, std::int64_t id, requester by,
                 callback<domain::done> reply) {
  tell<child_kind::views>(rt, tenant, delete_atom::value, id, by, std::move(reply));
}

} // namespace crm::actors
