// The schedule actor of one tenant, on the record kernel (actors/record_actor.hpp): calendars,
// closures, services and appointments in one store (domain::schedule_store), because a booking
// is checked against all four at once. Every change is planned from memory in arrival order,
// so two bookings of one slot never both pass the plan; the exclusion constraint of migration
// 021 refuses what another process might still write. Changes of appointments are audited in
// their own transaction as touches of the patient's record.
#include "actors/schedule.hpp"

#include "actors/contacts.hpp"
#include "actors/schedule_internal.hpp"
#include "domain/clock.hpp"
#include "domain/crypto.hpp"
#include "domain/ical.hpp"
#include "domain/page_json.hpp"
#include "domain/secret_keys.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/schedule_repo.hpp"
#include "persistence/sealed_columns.hpp"
#include "persistence/secret_owners.hpp"

#include <boost/json.hpp>

namespace crm::actors {
namespace {

// Message payloads with optional parts (CAF 0.17 carries them as opaque values).
struct availability_query {
  std::int64_t service = 0;
  std::int64_t from = 0;
  std::int64_t to = 0;
  std::optional<std::int64_t> calendar;
};
struct reschedule_request {
  std::int64_t start = 0;
  std::optional<std::int64_t> calendar;
};
struct cancel_request {
  std::optional<std::string> reason;
  domain::appointment_source by = domain::appointment_source::staff;
};
struct offer_query {
  std::vector<std::int64_t> services;
  std::int64_t from = 0;
  std::int64_t to = 0;
  std::size_t n = 0;
};
struct status_request {
  std::optional<domain::appointment_status> status;
  std::optional<std::string> notes;
};
} // namespace
} // namespace crm::actors

namespace caf {
CRM_LOCAL_MESSAGE(crm::domain::calendar)
CRM_LOCAL_MESSAGE(crm::domain::calendar_patch)
CRM_LOCAL_MESSAGE(crm::domain::closure)
CRM_LOCAL_MESSAGE(crm::domain::service)
CRM_LOCAL_MESSAGE(crm::domain::service_patch)
CRM_LOCAL_MESSAGE(crm::domain::booking)
CRM_LOCAL_MESSAGE(crm::domain::appointment_query)
CRM_LOCAL_MESSAGE(crm::actors::availability_query)
CRM_LOCAL_MESSAGE(crm::actors::reschedule_request)
CRM_LOCAL_MESSAGE(crm::actors::cancel_request)
CRM_LOCAL_MESSAGE(crm::actors::offer_query)
CRM_LOCAL_MESSAGE(std::vector<crm::domain::ai::offered_slot>)
CRM_LOCAL_MESSAGE(std::optional<crm::domain::ai::patient_appointment>)
CRM_LOCAL_MESSAGE(crm::actors::status_request)
} // namespace caf

namespace crm::actors {
using namespace schedule_detail;
namespace {

namespace json = boost::json;
using domain::appointment;
using domain::calendar;
using domain::closure;
using domain::service;

using cal_list_atom = caf::atom_constant<caf::atom("cal_list")>;
using cal_get_atom = caf::atom_constant<caf::atom("cal_get")>;
using cal_new_atom = caf::atom_constant<caf::atom("cal_new")>;
using cal_set_atom = caf::atom_constant<caf::atom("cal_set")>;
using cal_del_atom = caf::atom_constant<caf::atom("cal_del")>;
using clo_list_atom = caf::atom_constant<caf::atom("clo_list")>;
using clo_new_atom = caf::atom_constant<caf::atom("clo_new")>;
using clo_del_atom = caf::atom_constant<caf::atom("clo_del")>;
using svc_list_atom = caf::atom_constant<caf::atom("svc_list")>;
using svc_get_atom = caf::atom_constant<caf::atom("svc_get")>;
using svc_new_atom = caf::atom_constant<caf::atom("svc_new")>;
using svc_set_atom = caf::atom_constant<caf::atom("svc_set")>;
using svc_del_atom = caf::atom_constant<caf::atom("svc_del")>;
using avail_atom = caf::atom_constant<caf::atom("avail")>;
using offer_atom = caf::atom_constant<caf::atom("offer")>;
using next_atom = caf::atom_constant<caf::atom("apt_next")>;
using apt_list_atom = caf::atom_constant<caf::atom("apt_list")>;
using apt_get_atom = caf::atom_constant<caf::atom("apt_get")>;
using apt_view_atom = caf::atom_constant<caf::atom("apt_view")>;
using apt_views_atom = caf::atom_constant<caf::atom("apt_views")>;
using apt_book_atom = caf::atom_constant<caf::atom("apt_book")>;
using apt_move_atom = caf::atom_constant<caf::atom("apt_move")>;
using apt_stop_atom = caf::atom_constant<caf::atom("apt_cancel")>;
using apt_set_atom = caf::atom_constant<caf::atom("apt_set")>;
using gone_atom = caf::atom_constant<caf::atom("gone")>;
using feed_token_atom = caf::atom_constant<caf::atom("cal_token")>;
using feed_atom = caf::atom_constant<caf::atom("cal_feed")>;

// How often a live schedule actor looks for reminders that have come due (a passivated
// tenant's are found by the sweeper, which wakes its actor).
constexpr auto reminder_tick = std::chrono::seconds(1);
// The bytes of a feed token (base64url: 43 characters).
constexpr std::size_t feed_token_bytes = 32;

template <class T, class ToJson>
domain::outcome<std::string> rendered(domain::outcome<T> r, ToJson to_json) {
  if (!r) return r.error();
  return json::serialize(to_json(*r));
}

template <class T, class ToJson>
std::string page_json(const domain::page<T>& p, ToJson to_json) {
  json::array items;
  for (auto& x : p.items) items.push_back(to_json(x));
  return domain::render_page(std::move(items), p.total, p.number, p.per_page);
}

// Committed: into memory, then the answer.
template <class T, class ToJson>
auto stored(ToJson to_json) {
  return [to_json](schedule_actor* self, T saved) {
    self->state.store.put(saved);
    return json::serialize(to_json(saved));
  };
}

} // namespace

namespace schedule_detail {
std::string applied(schedule_actor* self, committed c) {
  auto& st = self->state;
  st.store.put(c.saved);
  if (c.emitted)
    st.env.rt->route(st.env.tenant_id, child_kind::workflows,
                     caf::make_message(outbox_atom::value));
  return json::serialize(domain::appointment_to_json(c.saved));
}
} // namespace schedule_detail

namespace {

// ---- bookings (docs/appointments.md "Bookings in batches") -----------------------------------

// Commits what is staged in one transaction (up to max_batches_in_flight at a time; what is
// staged meanwhile goes in the next), then puts each saved booking in memory and answers it.
void flush_bookings(schedule_actor* self) {
  auto& b = self->state.extra;
  if (b.in_flight >= max_batches_in_flight || b.staged.empty()) return;
  ++b.in_flight;
  auto batch = std::make_shared<std::vector<staged_booking>>(std::move(b.staged));
  b.staged.clear();
  std::vector<persistence::appointment_insert> rows;
  rows.reserve(batch->size());
  for (auto& x : *batch) {
    auto a = x.planned;
    a.id = 0;
    rows.push_back({std::move(a),
                    x.audit,
                    {self->state.store.event_listeners ? "appointment.booked" : nullptr, {}}});
  }
  db<std::vector<domain::outcome<appointment>>>(
      self,
      [rows = std::move(rows)](persistence::pg_conn& c) {
        return persistence::insert_appointments(c, rows);
      },
      [self, batch](domain::outcome<std::vector<domain::outcome<appointment>>> r) {
        auto& st = self->state;
        --st.extra.in_flight;
        bool emitted = false;
        for (std::size_t i = 0; i < batch->size(); ++i) {
          auto& x = (*batch)[i];
          st.store.release(x.planned.id);
          if (!r) {
            x.reply(r.error());
            continue;
          }
          auto& one = (*r)[i];
          if (!one) {
            x.reply(one.error());
            continue;
          }
          st.store.put(*one);
          emitted = true;
          x.reply(json::serialize(domain::appointment_to_json(*one)));
        }
        if (emitted)
          st.env.rt->route(st.env.tenant_id, child_kind::workflows,
                           caf::make_message(outbox_atom::value));
        flush_bookings(self);
      });
}

// A booking in its write turn: planned from memory (the holds of staged bookings included),
// holding its slot at once, and staged; the turn ends there, so the next write is planned while
// this one's transaction runs. The caller is answered after COMMIT.
void stage_booking(schedule_actor* self, domain::booking b, callback<std::string> reply) {
  auto tenant = self->state.env.tenant_id;
  std::vector<std::string> fields{"contact_id", "service_id", "calendar_id", "start"};
  if (!b.notes.empty()) fields.emplace_back("notes");
  // The write's turn: a load that fails (or a turn dropped) answers the caller.
  callback<domain::done> turn([reply](domain::outcome<domain::done> r) {
    if (!r) reply(r.error());
  });
  write<schedule_aggregate, domain::done>(
      self, turn,
      [self, b = std::move(b), reply, tenant, fields](callback<domain::done> turn) mutable {
        auto& st = self->state;
        auto planned = st.store.plan_book(b, tenant, domain::now_micros());
        if (!planned) {
          reply(planned.error());
          return turn(domain::done{});
        }
        planned->id = --st.extra.last_hold;
        st.store.hold(*planned);
        auto rows = audit(reply.who(), tenant, *planned, "book_appointment", fields, 201);
        st.extra.staged.push_back({std::move(*planned), reply, std::move(rows)});
        turn(domain::done{});
        flush_bookings(self);
      });
}

// ---- the calendar feed (docs/appointments.md "Calendar feed") ------------------------------

// Whether `token` is the feed token `hash` was made of (by the tenant's keys): the one check,
// for the HTTP layer's gate and for the actor's own.
bool is_feed_token(const domain::secret_keys& keys, std::int64_t tenant, std::string_view token,
                   std::string_view hash) {
  return keys.verify(persistence::sealed::calendar_feed_token, tenant, token, hash) !=
         domain::secret_keys::match::no;
}

bool feed_token_matches(schedule_actor* self, const calendar& c, const std::string& token) {
  return is_feed_token(self->state.env.pool->keys(), self->state.env.tenant_id, token,
                       c.feed_token_hash);
}

// The feed, with the patients' names when the calendar shows them: `reply` gets the text and
// the patients it names (for the audit trail).
void render_feed(schedule_actor* self, std::int64_t id, const std::string& token,
                 callback<domain::calendar_feed_text> reply) {
  auto& s = self->state.store;
  auto c = s.feed_calendar(id);
  if (!c) return reply(c.error());
  if (!feed_token_matches(self, *c, token)) return reply(domain::feed_refused());
  auto now = domain::now_micros();
  domain::appointment_query q;
  q.calendar_id = id;
  q.from = now - domain::feed_past_days * 86'400'000'000LL;
  q.to = now + domain::feed_future_days * 86'400'000'000LL;
  auto items = s.views(q);
  std::erase_if(items,
                [](const domain::appointment_view& v) { return !domain::holds_slot(v.a.status); });
  if (!c->feed_shows_names) {
    return reply(domain::calendar_feed_text{domain::calendar_feed(*c, items, {}, now), {}});
  }
  std::vector<std::int64_t> contacts;
  for (auto& v : items) contacts.push_back(v.a.contact_id);
  std::sort(contacts.begin(), contacts.end());
  contacts.erase(std::unique(contacts.begin(), contacts.end()), contacts.end());
  auto k = in_actor<domain::outcome<std::vector<domain::contact>>>(
      self, [cal = *c, items = std::move(items), now,
             reply](domain::outcome<std::vector<domain::contact>> r) {
        if (!r) return reply(r.error());
        std::map<std::int64_t, std::string> names;
        std::vector<std::int64_t> shown;
        for (auto& x : *r) {
          auto name = x.first_name;
          if (x.last_name && !x.last_name->empty())
            name += (name.empty() ? "" : " ") + *x.last_name;
          names[x.id] = name;
          shown.push_back(x.id);
        }
        reply(domain::calendar_feed_text{domain::calendar_feed(cal, items, names, now),
                                         std::move(shown)});
      });
  fetch_contacts(*self->state.env.rt->owner, self->state.env.tenant_id, std::move(contacts),
                 callback<std::vector<domain::contact>>(std::move(k)));
}

caf::behavior schedule_behavior(schedule_actor* self, tenant_env env) {
  auto now = [] { return domain::now_micros(); };
  // Reminders are looked for from the start, and every reminder_tick after; answers left
  // unsettled are answered at once.
  self->send(self, remind_atom::value);
  self->send(self, wake_atom::value);
  return record_behavior(
      self, env,
      // Calendars.
      [](schedule_actor* self, cal_list_atom, int page, int per_page,
         callback<std::string>& reply) {
        read(self, 0, reply, [=](const store& s) -> domain::outcome<std::string> {
          return page_json(s.list_calendars(page, per_page), domain::calendar_to_json);
        });
      },
      [](schedule_actor* self, cal_get_atom, std::int64_t id, callback<std::string>& reply) {
        read(self, id, reply, [=](const store& s) {
          return rendered(s.get_calendar(id), domain::calendar_to_json);
        });
      },
      [now](schedule_actor* self, cal_new_atom, calendar& c, callback<std::string>& reply) {
        auto tenant = self->state.env.tenant_id;
        change(
            self, 0, reply,
            [c = std::move(c), tenant, now](const store& s) {
              return domain::outcome<calendar>(s.plan_create_calendar(c, tenant, now()));
            },
            persistence::insert_calendar, stored<calendar>(domain::calendar_to_json));
      },
      [now](schedule_actor* self, cal_set_atom, std::int64_t id, domain::calendar_patch& p,
            callback<std::string>& reply) {
        change(
            self, id, reply,
            [id, p = std::move(p), now](const store& s) {
              return s.plan_update_calendar(id, p, now());
            },
            persistence::update_calendar, stored<calendar>(domain::calendar_to_json));
      },
      [](schedule_actor* self, cal_del_atom, std::int64_t id, callback<domain::done>& reply) {
        change(
            self, id, reply, [id](const store& s) { return s.plan_delete_calendar(id); },
            persistence::delete_calendar,
            [](schedule_actor* self, calendar gone) {
              self->state.store.erase_calendar(gone.id);
              return domain::done{};
            });
      },
      // Closures.
      [](schedule_actor* self, clo_list_atom, std::int64_t calendar_id, int page, int per_page,
         callback<std::string>& reply) {
        read(self, calendar_id, reply, [=](const store& s) -> domain::outcome<std::string> {
          auto p = s.list_closures(calendar_id, page, per_page);
          if (!p) return p.error();
          return page_json(*p, domain::closure_to_json);
        });
      },
      [now](schedule_actor* self, clo_new_atom, closure& c, callback<std::string>& reply) {
        auto tenant = self->state.env.tenant_id;
        auto calendar_id = c.calendar_id;
        change(
            self, calendar_id, reply,
            [c = std::move(c), tenant, now](const store& s) {
              return s.plan_add_closure(c, tenant, now());
            },
            persistence::insert_closure, stored<closure>(domain::closure_to_json));
      },
      [](schedule_actor* self, clo_del_atom, std::int64_t calendar_id, std::int64_t id,
         callback<domain::done>& reply) {
        change(
            self, id, reply,
            [calendar_id, id](const store& s) { return s.plan_remove_closure(calendar_id, id); },
            persistence::delete_closure,
            [](schedule_actor* self, closure gone) {
              self->state.store.erase_closure(gone.id);
              return domain::done{};
            });
      },
      // Services.
      [](schedule_actor* self, svc_list_atom, int page, int per_page,
         callback<std::string>& reply) {
        read(self, 0, reply, [=](const store& s) -> domain::outcome<std::string> {
          return page_json(s.list_services(page, per_page), domain::service_to_json);
        });
      },
      [](schedule_actor* self, svc_get_atom, std::int64_t id, callback<std::string>& reply) {
        read(self, id, reply,
             [=](const store& s) { return rendered(s.get_service(id), domain::service_to_json); });
      },
      [now](schedule_actor* self, svc_new_atom, service& v, callback<std::string>& reply) {
        auto tenant = self->state.env.tenant_id;
        change(
            self, 0, reply,
            [v = std::move(v), tenant, now](const store& s) {
              return s.plan_create_service(v, tenant, now());
            },
            persistence::insert_service, stored<service>(domain::service_to_json));
      },
      [now](schedule_actor* self, svc_set_atom, std::int64_t id, domain::service_patch& p,
            callback<std::string>& reply) {
        change(
            self, id, reply,
            [id, p = std::move(p), now](const store& s) {
              return s.plan_update_service(id, p, now());
            },
            persistence::update_service, stored<service>(domain::service_to_json));
      },
      [](schedule_actor* self, svc_del_atom, std::int64_t id, callback<domain::done>& reply) {
        change(
            self, id, reply, [id](const store& s) { return s.plan_delete_service(id); },
            persistence::delete_service,
            [](schedule_actor* self, service gone) {
              self->state.store.erase_service(gone.id);
              return domain::done{};
            });
      },
      // Availability: from memory, after the bookings that arrived before it.
      [now](schedule_actor* self, avail_atom, availability_query& q, callback<std::string>& reply) {
        read_in_turn(self, 0, reply, [q, now](const store& s) -> domain::outcome<std::string> {
          auto slots = s.availability(q.service, q.from, q.to, q.calendar, now());
          if (!slots) return slots.error();
          std::string out = "{\"slots\":[";
          bool first = true;
          for (auto& x : *slots) {
            if (!first) out += ',';
            first = false;
            out += "{\"calendar_id\":" + std::to_string(x.calendar_id) + ",\"start\":\"" +
                   domain::format_rfc3339(x.start) + "\",\"end\":\"" +
                   domain::format_rfc3339(x.end) + "\"}";
          }
          return out + "]}";
        });
      },
      // The assistant's offer: the first free slots of the first service that has any.
      [now](schedule_actor* self, offer_atom, offer_query& q,
            callback<std::vector<domain::ai::offered_slot>>& reply) {
        read_in_turn(
            self, 0, reply,
            [q, now](const store& s) -> domain::outcome<std::vector<domain::ai::offered_slot>> {
              std::vector<domain::ai::offered_slot> out;
              for (const std::int64_t id : q.services) {
                const auto svc = s.services.find(id);
                if (svc == s.services.end() || !svc->second.is_active) continue;
                auto slots = s.availability(id, q.from, q.to, std::nullopt, now());
                if (!slots) continue;
                for (const domain::slot& x : *slots) {
                  if (out.size() == q.n) break;
                  if (!out.empty() && out.back().start == x.start) continue; // one a time
                  const auto cal = s.calendars.find(x.calendar_id);
                  const std::string zone = cal == s.calendars.end() ? "UTC" : cal->second.time_zone;
                  out.push_back({id, x.calendar_id, x.start, svc->second.name,
                                 domain::local_time_text(x.start, zone)});
                }
                if (!out.empty()) break;
              }
              return out;
            });
      },
      // The patient's next appointment, for the assistant.
      [now](schedule_actor* self, next_atom, std::int64_t contact,
            callback<std::optional<domain::ai::patient_appointment>>& reply) {
        read_in_turn(
            self, 0, reply,
            [contact, now](
                const store& s) -> domain::outcome<std::optional<domain::ai::patient_appointment>> {
              const auto a = s.next_live(contact, now());
              if (!a) return std::optional<domain::ai::patient_appointment>();
              const auto svc = s.services.find(a->service_id);
              const auto cal = s.calendars.find(a->calendar_id);
              const std::string zone = cal == s.calendars.end() ? "UTC" : cal->second.time_zone;
              return std::optional<domain::ai::patient_appointment>(domain::ai::patient_appointment{
                  a->id,
                  {a->service_id, a->calendar_id, a->start,
                   svc == s.services.end() ? std::string() : svc->second.name,
                   domain::local_time_text(a->start, zone)}});
            });
      },
      // Appointments.
      [](schedule_actor* self, apt_list_atom, domain::appointment_query& q, int page, int per_page,
         callback<std::string>& reply) {
        read(self, 0, reply, [q, page, per_page](const store& s) -> domain::outcome<std::string> {
          return page_json(s.list_appointments(q, page, per_page), domain::appointment_to_json);
        });
      },
      [](schedule_actor* self, apt_get_atom, std::int64_t id, callback<std::string>& reply) {
        read(self, id, reply, [=](const store& s) {
          return rendered(s.get_appointment(id), domain::appointment_to_json);
        });
      },
      [](schedule_actor* self, apt_view_atom, std::int64_t id,
         callback<domain::appointment_view>& reply) {
        read(self, id, reply, [id](const store& s) { return s.view(id); });
      },
      [](schedule_actor* self, apt_views_atom, domain::appointment_query& q,
         callback<std::vector<domain::appointment_view>>& reply) {
        read(self, 0, reply, [q](const store& s) {
          return domain::outcome<std::vector<domain::appointment_view>>(s.views(q));
        });
      },
      [](schedule_actor* self, apt_book_atom, domain::booking& b, callback<std::string>& reply) {
        stage_booking(self, std::move(b), std::move(reply));
      },
      [now](schedule_actor* self, apt_move_atom, std::int64_t id, reschedule_request& r,
            callback<std::string>& reply) {
        std::vector<std::string> fields{"start"};
        if (r.calendar) fields.emplace_back("calendar_id");
        change(
            self, id, reply,
            [id, r, now](const store& s) -> domain::outcome<staged> {
              auto before = s.get_appointment(id);
              if (!before) return before.error();
              return with_event(
                  s, s.plan_reschedule(id, r.start, r.calendar, now()), "appointment.rescheduled",
                  ",\"previous_start\":\"" + domain::format_rfc3339(before->start) +
                      "\",\"previous_calendar_id\":" + std::to_string(before->calendar_id));
            },
            save_appointment(reply, "reschedule_appointment", std::move(fields), 200), applied);
      },
      [now](schedule_actor* self, apt_stop_atom, std::int64_t id, cancel_request& r,
            callback<std::string>& reply) {
        std::vector<std::string> fields;
        if (r.reason) fields.emplace_back("reason");
        change(
            self, id, reply,
            [id, r = std::move(r), now](const store& s) {
              return with_event(s, s.plan_cancel(id, r.reason, r.by, now()),
                                "appointment.cancelled");
            },
            save_appointment(reply, "cancel_appointment", std::move(fields), 200), applied);
      },
      [now](schedule_actor* self, apt_set_atom, std::int64_t id, status_request& r,
            callback<std::string>& reply) {
        std::vector<std::string> fields;
        if (r.status) fields.emplace_back("status");
        if (r.notes) fields.emplace_back("notes");
        change(
            self, id, reply,
            [id, r = std::move(r), now](const store& s) {
              return with_event(s, s.plan_status(id, r.status, r.notes, now()),
                                domain::status_event(r.status));
            },
            save_appointment(reply, "update_appointment", std::move(fields), 200), applied);
      },
      // Whether anyone listens to appointment events (the workflows actor, when that changes):
      // applied in order with the writes waiting for a load, so a load never overrides it.
      [](schedule_actor* self, listeners_atom, bool any) {
        when_loaded(
            self, [](const domain::failure&) {},
            [self, any] { self->state.store.event_listeners = any; });
      },
      [](schedule_actor* self, gone_atom, std::int64_t contact) {
        forget(self, [contact](store& s) { s.forget_contact(contact); });
      },
      [](schedule_actor* self, gone_atom, std::int64_t from, std::int64_t into) {
        forget(self, [from, into](store& s) { s.move_contact(from, into); });
      },
      // The calendar feed and its token.
      [now](schedule_actor* self, feed_token_atom, std::int64_t id, callback<std::string>& reply) {
        auto token = domain::random_token(feed_token_bytes);
        auto hash = self->state.env.pool->keys().hash(persistence::sealed::calendar_feed_token,
                                                      self->state.env.tenant_id, token);
        change(
            self, id, reply,
            [id, hash, now](const store& s) { return s.plan_feed_token(id, hash, now()); },
            persistence::update_calendar,
            [token](schedule_actor* self, calendar saved) {
              self->state.store.put(saved);
              json::object o;
              o["feed_token"] = token;
              return json::serialize(o);
            });
      },
      [](schedule_actor* self, feed_atom, std::int64_t id, std::string& token,
         callback<domain::calendar_feed_text>& reply) {
        when_loaded(self, fail_with(reply),
                    [self, id, token, reply] { render_feed(self, id, token, reply); });
      },
      // Reminders, and the patients' answers to them.
      [](schedule_actor* self, remind_atom) {
        if (self->state.stopping) return;
        when_loaded(
            self, [](const domain::failure&) {}, [self] { send_due_reminders(self); });
        self->delayed_send(self, reminder_tick, remind_atom::value);
      },
      [](schedule_actor* self, wake_atom) {
        // On spawn, and woken by the sweeper (spawning began the reminder ticks).
        when_loaded(
            self, [](const domain::failure&) {}, [self] { answer_left_answers(self); });
      },
      [](schedule_actor* self, answer_atom, domain::patient_answer& m) {
        answer_reminder_in_turn(self, std::move(m));
      },
      [](schedule_actor* self, answer_atom, domain::patient_answer& m, int attempt) {
        answer_reminder_in_turn(self, std::move(m), attempt);
      });
}

} // namespace

caf::actor spawn_schedule(caf::event_based_actor* parent, const tenant_env& env) {
  return parent->spawn<caf::monitored + caf::linked>(schedule_behavior, env);
}

void list_calendars(runtime& rt, std::int64_t tenant, int page, int per_page,
                    callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, cal_list_atom::value, page, per_page, std::move(reply));
}

void get_calendar(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, cal_get_atom::value, id, std::move(reply));
}

void create_calendar(runtime& rt, std::int64_t tenant, calendar c, callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, cal_new_atom::value, std::move(c), std::move(reply));
}

void update_calendar(runtime& rt, std::int64_t tenant, std::int64_t id, domain::calendar_patch p,
                     callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, cal_set_atom::value, id, std::move(p), std::move(reply));
}

void delete_calendar(runtime& rt, std::int64_t tenant, std::int64_t id,
                     callback<domain::done> reply) {
  tell<child_kind::schedule>(rt, tenant, cal_del_atom::value, id, std::move(reply));
}

void list_closures(runtime& rt, std::int64_t tenant, std::int64_t calendar, int page, int per_page,
                   callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, clo_list_atom::value, calendar, page, per_page,
                             std::move(reply));
}

void add_closure(runtime& rt, std::int64_t tenant, closure c, callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, clo_new_atom::value, std::move(c), std::move(reply));
}

void remove_closure(runtime& rt, std::int64_t tenant, std::int64_t calendar, std::int64_t id,
                    callback<domain::done> reply) {
  tell<child_kind::schedule>(rt, tenant, clo_del_atom::value, calendar, id, std::move(reply));
}

void list_services(runtime& rt, std::int64_t tenant, int page, int per_page,
                   callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, svc_list_atom::value, page, per_page, std::move(reply));
}

void get_service(runtime& rt, std::int64_t tenant, std::int64_t id, callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, svc_get_atom::value, id, std::move(reply));
}

void create_service(runtime& rt, std::int64_t tenant, service s, callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, svc_new_atom::value, std::move(s), std::move(reply));
}

void update_service(runtime& rt, std::int64_t tenant, std::int64_t id, domain::service_patch p,
                    callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, svc_set_atom::value, id, std::move(p), std::move(reply));
}

void delete_service(runtime& rt, std::int64_t tenant, std::int64_t id,
                    callback<domain::done> reply) {
  tell<child_kind::schedule>(rt, tenant, svc_del_atom::value, id, std::move(reply));
}

void find_availability(runtime& rt, std::int64_t tenant, std::int64_t service, std::int64_t from,
                       std::int64_t to, std::optional<std::int64_t> calendar,
                       callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, avail_atom::value,
                             availability_query{service, from, to, calendar}, std::move(reply));
}

void offer_slots(runtime& rt, std::int64_t tenant, std::vector<std::int64_t> services,
                 std::int64_t from, std::int64_t to, std::size_t n,
                 callback<std::vector<domain::ai::offered_slot>> reply) {
  tell<child_kind::schedule>(rt, tenant, offer_atom::value,
                             offer_query{std::move(services), from, to, n}, std::move(reply));
}

void next_appointment(runtime& rt, std::int64_t tenant, std::int64_t contact,
                      callback<std::optional<domain::ai::patient_appointment>> reply) {
  tell<child_kind::schedule>(rt, tenant, next_atom::value, contact, std::move(reply));
}

void list_appointments(runtime& rt, std::int64_t tenant, domain::appointment_query q, int page,
                       int per_page, callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, apt_list_atom::value, std::move(q), page, per_page,
                             std::move(reply));
}

void get_appointment(runtime& rt, std::int64_t tenant, std::int64_t id,
                     callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, apt_get_atom::value, id, std::move(reply));
}

void view_appointment(runtime& rt, std::int64_t tenant, std::int64_t id,
                      callback<domain::appointment_view> reply) {
  tell<child_kind::schedule>(rt, tenant, apt_view_atom::value, id, std::move(reply));
}

void view_appointments(runtime& rt, std::int64_t tenant, domain::appointment_query q,
                       callback<std::vector<domain::appointment_view>> reply) {
  tell<child_kind::schedule>(rt, tenant, apt_views_atom::value, std::move(q), std::move(reply));
}

void book_appointment(runtime& rt, std::int64_t tenant, domain::booking b,
                      callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, apt_book_atom::value, std::move(b), std::move(reply));
}

void reschedule_appointment(runtime& rt, std::int64_t tenant, std::int64_t id, std::int64_t start,
                            std::optional<std::int64_t> calendar, callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, apt_move_atom::value, id,
                             reschedule_request{start, calendar}, std::move(reply));
}

void cancel_appointment(runtime& rt, std::int64_t tenant, std::int64_t id,
                        std::optional<std::string> reason, callback<std::string> reply,
                        domain::appointment_source by) {
  tell<child_kind::schedule>(rt, tenant, apt_stop_atom::value, id,
                             cancel_request{std::move(reason), by}, std::move(reply));
}

void change_appointment(runtime& rt, std::int64_t tenant, std::int64_t id,
                        std::optional<domain::appointment_status> status,
                        std::optional<std::string> notes, callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, apt_set_atom::value, id,
                             status_request{status, std::move(notes)}, std::move(reply));
}

void move_contact_appointments(runtime& rt, std::int64_t tenant, std::int64_t from,
                               std::int64_t into) {
  tell<child_kind::schedule>(rt, tenant, gone_atom::value, from, into);
}

void forget_contact_appointments(runtime& rt, std::int64_t tenant, std::int64_t contact) {
  tell<child_kind::schedule>(rt, tenant, gone_atom::value, contact);
}

void rotate_feed_token(runtime& rt, std::int64_t tenant, std::int64_t calendar,
                       callback<std::string> reply) {
  tell<child_kind::schedule>(rt, tenant, feed_token_atom::value, calendar, std::move(reply));
}

void calendar_feed(runtime& rt, std::int64_t tenant, std::int64_t calendar, std::string token,
                   callback<domain::calendar_feed_text> reply) {
  tell<child_kind::schedule>(rt, tenant, feed_atom::value, calendar, std::move(token),
                             std::move(reply));
}

void answer_reminder(runtime& rt, std::int64_t tenant, domain::patient_answer answer) {
  tell<child_kind::schedule>(rt, tenant, answer_atom::value, std::move(answer));
}

std::optional<persistence::secret_owner> feed_owner(persistence::pg_conn& c,
                                                    std::int64_t calendar) {
  return persistence::feed_owner_of_calendar(c, calendar);
}

bool feed_token_accepted(runtime& rt, const persistence::secret_owner& owner,
                         std::string_view token) {
  return owner.secret &&
         is_feed_token(rt.internals().pool.keys(), owner.tenant_id, token, *owner.secret);
}

void wake_schedule(runtime& rt, std::int64_t tenant) {
  tell<child_kind::schedule>(rt, tenant, wake_atom::value);
}

} // namespace crm::actors
