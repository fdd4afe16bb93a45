// The inbox actor of one tenant, on the record kernel (actors/record_actor.hpp): the teams and
// who is available are the domain's (domain::inbox_store); each change commits in its own
// transaction, then the channels actor learns the routes (actors/channels.hpp set_routes).
#include "actors/inbox.hpp"

#include "actors/channels.hpp"
#include "actors/record_actor.hpp"
#include "domain/clock.hpp"
#include "domain/page_json.hpp"
#include "persistence/inbox_repo.hpp"
#include "persistence/pg_pool.hpp"

#include <boost/json.hpp>

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::domain::team> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::team_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::canned_response> : std::true_type {};
template <>
struct allowed_unsafe_message_type<crm::domain::canned_patch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::optional<std::int64_t>> : std::true_type {};
} // namespace caf

namespace crm::actors {
namespace {

using domain::team;

using delete_atom = caf::atom_constant<caf::atom("delete")>;
using avail_atom = caf::atom_constant<caf::atom("avail")>;
using user_atom = caf::atom_constant<caf::atom("user")>;
using canned_atom = caf::atom_constant<caf::atom("canned")>;
using text_atom = caf::atom_constant<caf::atom("text")>;
using chan_atom = caf::atom_constant<caf::atom("chan")>;

// Teams and canned responses: a not_found names which of the two was missing.
struct inbox_aggregate {
  static constexpr child_kind kind = child_kind::inbox;
  using store = domain::inbox_store;
  static store load(persistence::pg_conn& c, std::int64_t tenant) {
    return persistence::load_inbox(c, tenant);
  }
  static std::optional<std::int64_t> owner_of(persistence::pg_conn& c, std::int64_t id,
                                              std::string_view what) {
    return what.starts_with("canned") ? persistence::tenant_of_canned(c, id)
                                      : persistence::tenant_of_team(c, id);
  }
};

using inbox_actor = record_actor<inbox_aggregate>;
using store = inbox_aggregate::store;

std::string render(const team& t) {
  return boost::json::serialize(domain::team_to_json(t));
}

std::string availability_json(std::int64_t user, bool available) {
  return boost::json::serialize(boost::json::object{{"user_id", user}, {"available", available}});
}

// The channels actor routes new conversations as the store now says.
void publish(inbox_actor* self) {
  auto& s = self->state.store;
  set_routes(*self->state.env.rt->owner, self->state.env.tenant_id, s.routes(), s.unavailable);
}

std::string stored(inbox_actor* self, team saved) {
  self->state.store.put(saved);
  publish(self);
  return render(saved);
}

std::string stored_canned(inbox_actor* self, domain::canned_response saved) {
  self->state.store.put_canned(saved);
  return boost::json::serialize(domain::canned_to_json(saved));
}

struct availability {
  std::int64_t user = 0;
  bool available = true;
};

caf::behavior inbox_behavior(inbox_actor* self, tenant_env env) {
  return record_behavior(
      self, env,
      [](inbox_actor* self, list_atom, int page, int per_page, callback<std::string>& reply) {
        read(self, 0, reply, [=](const store& s) {
          auto p = s.list(page, per_page);
          boost::json::array items;
          for (auto& t : p.items) items.push_back(domain::team_to_json(t));
          return domain::render_page(std::move(items), p.total, page, per_page);
        });
      },
      [](inbox_actor* self, get_atom, std::int64_t id, callback<std::string>& reply) {
        read(self, id, reply, [=](const store& s) -> domain::outcome<std::string> {
          auto t = s.get(id);
          if (!t) return t.error();
          return render(*t);
        });
      },
      [](inbox_actor* self, create_atom, team& t, callback<std::string>& reply) {
        change(
            self, 0, reply,
            [t = std::move(t), tenant = self->state.env.tenant_id](const store& s) {
              return s.plan_create(t, tenant, domain::now_micros());
            },
            [](persistence::pg_conn& c, const team& t) { return persistence::insert_team(c, t); },
            stored);
      },
      [](inbox_actor* self, update_atom, std::int64_t id, domain::team_patch& p,
         callback<std::string>& reply) {
        change(
            self, id, reply,
            [id, p = std::move(p)](const store& s) {
              return s.plan_update(id, p, domain::now_micros());
            },
            [](persistence::pg_conn& c, const team& t) { return persistence::update_team(c, t); },
            stored);
      },
      [](inbox_actor* self, delete_atom, std::int64_t id, callback<domain::done>& reply) {
        change(
            self, id, reply, [id](const store& s) { return s.plan_delete(id); },
            [](persistence::pg_conn& c, const team& t) { return persistence::delete_team(c, t); },
            [](inbox_actor* self, team gone) {
              self->state.store.erase(gone.id);
              publish(self);
              return domain::done{};
            });
      },
      [](inbox_actor* self, avail_atom, std::int64_t user, callback<std::string>& reply) {
        read(self, 0, reply, [user](const store& s) -> domain::outcome<std::string> {
          return availability_json(user, s.available(user));
        });
      },
      [](inbox_actor* self, avail_atom, std::int64_t user, bool available,
         callback<std::string>& reply) {
        change(
            self, 0, reply,
            [user, available](const store&) {
              return domain::outcome<availability>(availability{user, available});
            },
            [tenant = self->state.env.tenant_id](persistence::pg_conn& c, const availability& a) {
              persistence::set_availability(c, tenant, a.user, a.available);
              return a;
            },
            [](inbox_actor* self, availability a) {
              self->state.store.set_available(a.user, a.available);
              publish(self);
              return availability_json(a.user, a.available);
            });
      },
      [](inbox_actor* self, canned_atom, list_atom, std::string& query, int page, int per_page,
         callback<std::string>& reply) {
        read(self, 0, reply, [=](const store& s) {
          auto p = s.list_canned(query, page, per_page);
          boost::json::array items;
          for (auto& r : p.items) items.push_back(domain::canned_to_json(r));
          return domain::render_page(std::move(items), p.total, page, per_page);
        });
      },
      [](inbox_actor* self, canned_atom, get_atom, std::int64_t id, callback<std::string>& reply) {
        read(self, id, reply, [=](const store& s) -> domain::outcome<std::string> {
          auto r = s.get_canned(id);
          if (!r) return r.error();
          return boost::json::serialize(domain::canned_to_json(*r));
        });
      },
      [](inbox_actor* self, canned_atom, text_atom, std::int64_t id, callback<std::string>& reply) {
        read(self, id, reply, [=](const store& s) -> domain::outcome<std::string> {
          auto r = s.get_canned(id);
          if (!r) return r.error();
          return r->text;
        });
      },
      [](inbox_actor* self, canned_atom, create_atom, domain::canned_response& r,
         callback<std::string>& reply) {
        change(
            self, 0, reply,
            [r = std::move(r), tenant = self->state.env.tenant_id](const store& s) {
              return s.plan_create_canned(r, tenant, domain::now_micros());
            },
            [](persistence::pg_conn& c, const domain::canned_response& r) {
              return persistence::insert_canned(c, r);
            },
            stored_canned);
      },
      [](inbox_actor* self, canned_atom, update_atom, std::int64_t id, domain::canned_patch& p,
         callback<std::string>& reply) {
        change(
            self, id, reply,
            [id, p = std::move(p)](const store& s) {
              return s.plan_update_canned(id, p, domain::now_micros());
            },
            [](persistence::pg_conn& c, const domain::canned_response& r) {
              return persistence::update_canned(c, r);
            },
            stored_canned);
      },
      [](inbox_actor* self, canned_atom, delete_atom, std::int64_t id,
         callback<domain::done>& reply) {
        change(
            self, id, reply, [id](const store& s) { return s.get_canned(id); },
            [](persistence::pg_conn& c, const domain::canned_response& r) {
              return persistence::delete_canned(c, r);
            },
            [](inbox_actor* self, domain::canned_response gone) {
              self->state.store.erase_canned(gone.id);
              return domain::done{};
            });
      },
      [](inbox_actor* self, chan_atom, std::int64_t channel, std::optional<std::int64_t>& team_id,
         callback<domain::done>& reply) {
        change(
            self, team_id.value_or(0), reply,
            [channel, team_id](const store& s) {
              return s.plan_channel_team(channel, team_id, domain::now_micros());
            },
            [tenant = self->state.env.tenant_id](persistence::pg_conn& c,
                                                 const std::vector<team>& ts) {
              return persistence::update_teams(c, ts, tenant);
            },
            [](inbox_actor* self, std::vector<team> saved) {
              for (auto& t : saved) self->state.store.put(t);
              publish(self);
              return domain::done{};
            });
      },
      [](inbox_actor* self, user_atom, std::int64_t user, callback<domain::done>& reply) {
        change(
            self, 0, reply, [user](const store&) { return domain::outcome<std::int64_t>(user); },
            [tenant = self->state.env.tenant_id](persistence::pg_conn& c, std::int64_t u) {
              return availability{u, persistence::available_now(c, tenant, u)};
            },
            [](inbox_actor* self, availability a) {
              self->state.store.set_available(a.user, a.available);
              publish(self);
              return domain::done{};
            });
      });
}

} // namespace

caf::actor spawn_inbox(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(inbox_behavior, env);
}

void list_teams(runtime& rt, std::int64_t tenant, int page, int per_page,
                callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, list_atom::value, page, per_page, std::move(reply));
}
void get_team(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, get_atom::value, id, std::move(reply));
}
void create_team(runtime& rt, std::int64_t tenant, team t, callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, create_atom::value, std::move(t), std::move(reply));
}
void update_team(runtime& rt, std::int64_t tenant, std::int64_t id, domain::team_patch p,
                 callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, update_atom::value, id, std::move(p), std::move(reply));
}
void delete_team(runtime& rt, std::int64_t tenant, std::int64_t id, callback<domain::done> reply) {
  tell<child_kind::inbox>(rt, tenant, delete_atom::value, id, std::move(reply));
}
void list_canned(runtime& rt, std::int64_t tenant, std::string query, int page, int per_page,
                 callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, canned_atom::value, list_atom::value, std::move(query), page,
                          per_page, std::move(reply));
}
void get_canned(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, canned_atom::value, get_atom::value, id, std::move(reply));
}
void canned_text(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, canned_atom::value, text_atom::value, id, std::move(reply));
}
void create_canned(runtime& rt, std::int64_t tenant, domain::canned_response r,
                   callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, canned_atom::value, create_atom::value, std::move(r),
                          std::move(reply));
}
void update_canned(runtime& rt, std::int64_t tenant, std::int64_t id, domain::canned_patch p,
                   callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, canned_atom::value, update_atom::value, id, std::move(p),
                          std::move(reply));
}
void delete_canned(runtime& rt, std::int64_t tenant, std::int64_t id,
                   callback<domain::done> reply) {
  tell<child_kind::inbox>(rt, tenant, canned_atom::value, delete_atom::value, id, std::move(reply));
}
void set_channel_team(runtime& rt, std::int64_t tenant, std::int64_t channel,
                      std::optional<std::int64_t> team_id, callback<domain::done> reply) {
  tell<child_kind::inbox>(rt, tenant, chan_atom::value, channel, team_id, std::move(reply));
}
void user_changed(runtime& rt, std::int64_t tenant, std::int64_t user,
                  callback<domain::done> reply) {
  tell<child_kind::inbox>(rt, tenant, user_atom::value, user, std::move(reply));
}
void get_availability(runtime& rt, std::int64_t tenant, std::int64_t user,
                      callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, avail_atom::value, user, std::move(reply));
}
void set_availability(runtime& rt, std::int64_t tenant, std::int64_t user, bool available,
                      callback<std::string> reply) {
  tell<child_kind::inbox>(rt, tenant, avail_atom::value, user, available, std::move(reply));
}

} // namespace crm::actors
