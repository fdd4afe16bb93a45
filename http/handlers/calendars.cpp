// Calendars, their closures, and services (contract §10, docs/appointments.md). Managers and
// admins write; every role reads. Bodies are checked here field by field (every failing field
// reported); what depends on the tenant's other records (a calendar a service names, a user, a
// reminder's channel) is checked by the schedule actor and its transaction.
#include "http/api.hpp"
#include "http/placement.hpp"

#include "actors/schedule.hpp"
#include "domain/clock.hpp"
#include "domain/deal.hpp"
#include "domain/schedule.hpp"
#include "domain/validation.hpp"
#include "domain/whatsapp.hpp"
#include "http/json.hpp"
#include "http/openapi_schema.hpp"
#include "http/request_input.hpp"
#include "http/secret_gate.hpp"

#include <boost/json.hpp>

#include <algorithm>

namespace crm::http {
namespace {

namespace rules = domain::schedule_rules;
using domain::failure;
using domain::issue;

constexpr text_rule name_rule{.min = 1, .max = rules::name_max, .trim = true};
constexpr text_rule zone_rule{.min = 1, .max = rules::time_zone_max};
constexpr text_rule reason_rule{.min = 0, .max = rules::reason_max};
constexpr text_rule reminder_text_rule{.min = 1, .max = rules::reminder_text_max};
constexpr text_rule price_rule{.min = 1, .max = 20};

std::vector<domain::loc_part> at(std::string_view key) {
  return {std::string("body"), std::string(key)};
}

// An integer field within [min, max].
std::optional<int> bounded(body_reader& body, std::string_view key, bool required, int min,
                           int max) {
  auto v = body.integer(key, required);
  if (!v) return std::nullopt;
  if (*v < min) {
    body.add(at(key), "Input should be greater than or equal to " + std::to_string(min),
             "greater_than_equal");
    return std::nullopt;
  }
  if (*v > max) {
    body.add(at(key), "Input should be less than or equal to " + std::to_string(max),
             "less_than_equal");
    return std::nullopt;
  }
  return static_cast<int>(*v);
}

// ---- calendars -----------------------------------------------------------------------------

domain::calendar_patch read_calendar(body_reader& body, bool create) {
  domain::calendar_patch p;
  p.name = body.text("name", create, name_rule);
  if (auto k = body.one_of("kind", false, domain::calendar_kinds))
    p.kind = domain::parse_calendar_kind(*k);
  if (body.has("user_id")) {
    if (body.is_null("user_id"))
      p.user_id = std::optional<std::int64_t>();
    else if (auto u = body.id("user_id", true))
      p.user_id = std::optional<std::int64_t>(*u);
  }
  if (auto z = body.text("time_zone", create, zone_rule)) {
    if (domain::is_time_zone(*z))
      p.time_zone = *z;
    else
      body.add(at("time_zone"), "unknown time zone: an IANA name such as \"America/Sao_Paulo\"",
               "value_error");
  }
  if (auto* v = body.raw("working_hours")) {
    if (auto w = domain::read_working_hours(*v, at("working_hours"), body.issues())) p.hours = *w;
  } else if (create) {
    body.add(at("working_hours"), "Field required", "missing");
  }
  p.slot_step = bounded(body, "slot_step_minutes", false, rules::step_min, rules::step_max);
  p.is_active = body.boolean("is_active", false);
  p.feed_shows_names = body.boolean("feed_shows_names", false);
  return p;
}

void list_calendars(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_calendars(s.rt, ex->who.tenant_id, *page, *per_page, json_reply(ex));
}

void get_calendar(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_calendar(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void create_calendar(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto p = read_calendar(body, true);
  if (!body.finish()) return ex->fail(body.failure());
  domain::calendar c;
  c.name = *p.name;
  c.kind = p.kind.value_or(domain::calendar_kind::practitioner);
  c.user_id = p.user_id.value_or(std::nullopt);
  c.time_zone = *p.time_zone;
  c.hours = *p.hours;
  c.slot_step = p.slot_step.value_or(rules::step_default);
  c.is_active = p.is_active.value_or(true);
  c.feed_shows_names = p.feed_shows_names.value_or(false);
  actors::create_calendar(s.rt, ex->who.tenant_id, std::move(c),
                          created_reply(ex, "/api/v1/calendars/"));
}

void update_calendar(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto p = read_calendar(body, false);
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_calendar(s.rt, ex->who.tenant_id, *id, std::move(p), json_reply(ex));
}

// Each calendar's tenant and feed token (its keyed hash), checked before any tenant wakes: an
// unknown calendar or a wrong token costs a look-up in memory, or at most one Postgres read per
// calendar a second (http/secret_gate.hpp, as for channel webhooks). A token that matched is
// trusted for a minute, then read again: a token rotated on another node, or a deleted
// calendar, stops waking the tenant within that (calendar apps poll old URLs for years).
secret_gate& feed_gate() {
  static secret_gate gate("calendar_feed", &actors::feed_owner, std::chrono::seconds(60));
  return gate;
}

void delete_calendar(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_calendar(s.rt, ex->who.tenant_id, *id,
                          forgetting(feed_gate(), *id, no_content_reply(ex)));
}

// ---- the calendar feed -----------------------------------------------------------------------

void rotate_feed_token(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  // The old token stops here at once.
  actors::rotate_feed_token(s.rt, ex->who.tenant_id, *id,
                            forgetting(feed_gate(), *id, json_reply(ex)));
}

// GET /calendars/{id}/feed.ics?token=: no bearer token (a calendar app fetches it); a missing or
// wrong token, an unknown calendar and one without a feed all answer the same 401.
void calendar_feed(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  if (!id) return ex->fail(failure::invalid(std::move(issues)));
  auto token = ex->req.query_value("token");
  if (!token || token->empty()) return ex->fail(domain::feed_refused());
  // The token is checked by the gate before the tenant is woken (and again by its schedule
  // actor, against the token it holds now).
  auto shared = std::make_shared<std::string>(*token);
  auto accepts = [&s, shared](const persistence::secret_owner& o) {
    return actors::feed_token_accepted(s.rt, o, *shared);
  };
  feed_gate().admit(s.pool, *id, std::move(accepts),
                    [&s, ex, id = *id, shared](domain::outcome<secret_gate::admission> r) {
                      if (!r) return ex->fail(r.error());
                      if (r->v != secret_gate::verdict::admitted)
                        return ex->fail(domain::feed_refused());
                      auto tenant = r->tenant;
                      within_tenant(s, ex, tenant, [&s, ex, id, tenant, shared] {
                        // The read is audited under the calendar's tenant (http/audit.cpp).
                        ex->who.tenant_id = tenant;
                        actors::calendar_feed(
                            s.rt, tenant, id, *shared,
                            actors::callback<domain::calendar_feed_text>(
                                [ex](domain::outcome<domain::calendar_feed_text> f) {
                                  if (!f) return ex->fail(f.error());
                                  ex->audit_records = std::move(f->patients);
                                  response res;
                                  res.body = std::move(f->text);
                                  res.content_type = "text/calendar; charset=utf-8";
                                  res.headers.emplace_back("Cache-Control", "private, max-age=300");
                                  ex->respond(std::move(res));
                                }));
                      });
                    });
}

// ---- closures ------------------------------------------------------------------------------

void list_closures(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto id = path_id(ex->param("id"), "id", issues);
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_closures(s.rt, ex->who.tenant_id, *id, *page, *per_page, json_reply(ex));
}

void add_closure(services& s, const exchange_ptr& ex) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  domain::closure c;
  auto start = body.timestamp("start", true);
  auto end = body.timestamp("end", true);
  if (auto r = body.text("reason", false, reason_rule)) c.reason = *r;
  if (start && end && *end <= *start)
    body.add(at("end"), "a closure must end after it starts", "value_error");
  if (!body.finish()) return ex->fail(body.failure());
  c.calendar_id = *id;
  c.start = *start;
  c.end = *end;
  actors::add_closure(s.rt, ex->who.tenant_id, std::move(c),
                      created_reply(ex, "/api/v1/calendars/" + std::to_string(*id) + "/closures/"));
}

void remove_closure(services& s, const exchange_ptr& ex) {
  auto calendar = id_param(ex);
  if (!calendar) return;
  auto id = id_param(ex, "closure_id");
  if (!id) return;
  actors::remove_closure(s.rt, ex->who.tenant_id, *calendar, *id, no_content_reply(ex));
}

// ---- services ------------------------------------------------------------------------------

std::optional<std::vector<std::int64_t>> read_calendar_ids(body_reader& body) {
  auto* v = body.raw("calendar_ids");
  if (!v) return std::nullopt;
  auto* list = v->if_array();
  if (!list) {
    body.add(at("calendar_ids"), "Input should be a valid list", "list_type");
    return std::nullopt;
  }
  if (list->size() > rules::calendars_per_service_max) {
    body.add(at("calendar_ids"),
             "at most " + std::to_string(rules::calendars_per_service_max) + " calendars",
             "too_long");
    return std::nullopt;
  }
  std::vector<std::int64_t> out;
  bool ok = true;
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto& x = (*list)[i];
    if (!x.is_int64() || x.get_int64() < 1) {
      body.add({std::string("body"), std::string("calendar_ids"), static_cast<std::int64_t>(i)},
               "Input should be a calendar id", "int_parsing");
      ok = false;
    } else if (std::find(out.begin(), out.end(), x.get_int64()) == out.end()) {
      out.push_back(x.get_int64());
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::vector<domain::reminder_rule>> read_reminders(body_reader& body) {
  auto* v = body.raw("reminders");
  if (!v) return std::nullopt;
  auto* list = v->if_array();
  if (!list) {
    body.add(at("reminders"), "Input should be a valid list", "list_type");
    return std::nullopt;
  }
  if (list->size() > rules::reminders_max) {
    body.add(at("reminders"), "at most " + std::to_string(rules::reminders_max) + " reminders",
             "too_long");
    return std::nullopt;
  }
  std::vector<domain::reminder_rule> out;
  auto before = body.issues().size();
  for (std::size_t i = 0; i < list->size(); ++i) {
    std::vector<domain::loc_part> loc{std::string("body"), std::string("reminders"),
                                      static_cast<std::int64_t>(i)};
    auto bad = [&](std::string key, std::string msg, std::string type) {
      auto l = loc;
      if (!key.empty()) l.push_back(std::move(key));
      body.add(std::move(l), std::move(msg), std::move(type));
    };
    auto* o = (*list)[i].if_object();
    if (!o) {
      bad("", "a reminder is {\"before_minutes\", \"channel_id\", \"text\"}", "dict_type");
      continue;
    }
    domain::reminder_rule r;
    for (auto& kv : *o)
      if (kv.key() != "before_minutes" && kv.key() != "channel_id" && kv.key() != "text" &&
          kv.key() != "template")
        bad(std::string(kv.key()), "Extra inputs are not permitted", "extra_forbidden");
    auto* b = o->if_contains("before_minutes");
    if (!b)
      bad("before_minutes", "Field required", "missing");
    else if (!b->is_int64() || b->get_int64() < rules::before_min ||
             b->get_int64() > rules::before_max)
      bad("before_minutes",
          "minutes from " + std::to_string(rules::before_min) + " to " +
              std::to_string(rules::before_max),
          "value_error");
    else
      r.before_minutes = static_cast<int>(b->get_int64());
    auto* c = o->if_contains("channel_id");
    if (!c)
      bad("channel_id", "Field required", "missing");
    else if (!c->is_int64() || c->get_int64() < 1)
      bad("channel_id", "Input should be a channel id", "int_parsing");
    else
      r.channel_id = c->get_int64();
    auto* t = o->if_contains("text");
    if (!t)
      bad("text", "Field required", "missing");
    else if (!t->is_string())
      bad("text", "Input should be a valid string", "string_type");
    else {
      std::string_view text(t->get_string().data(), t->get_string().size());
      auto chars = domain::utf8_length(text);
      if (chars < reminder_text_rule.min || chars > reminder_text_rule.max)
        bad("text", "1 to " + std::to_string(rules::reminder_text_max) + " characters",
            "string_too_long");
      else
        r.text = std::string(text);
    }
    // A WhatsApp template, its parameters with the text's placeholders.
    if (auto* t = o->if_contains("template"); t && !t->is_null()) {
      auto l = loc;
      l.emplace_back(std::string("template"));
      if (auto tm = domain::whatsapp::parse_template(*t, std::move(l), body.issues()))
        r.template_json = domain::whatsapp::template_to_json(*tm);
    }
    out.push_back(std::move(r));
  }
  if (body.issues().size() != before) return std::nullopt;
  return out;
}

// `full`: a create or a PUT (name and duration required; what is absent takes its default).
domain::service_patch read_service(body_reader& body, bool full) {
  domain::service_patch p;
  p.name = body.text("name", full, name_rule);
  p.duration = bounded(body, "duration_minutes", full, rules::duration_min, rules::duration_max);
  p.buffer = bounded(body, "buffer_minutes", false, rules::buffer_min, rules::buffer_max);
  p.calendar_ids = read_calendar_ids(body);
  if (auto price = body.nullable_text("price", price_rule)) {
    if (!*price) {
      p.price_cents = std::optional<std::int64_t>();
    } else if (auto cents = domain::parse_amount(**price)) {
      p.price_cents = std::optional<std::int64_t>(*cents);
    } else {
      body.add(at("price"),
               "price must be a decimal string of up to 13 digits and 2 decimals, such as "
               "\"150.00\"",
               "value_error");
    }
  }
  if (auto currency = body.nullable_text("currency", {.min = 3, .max = 3})) {
    if (!*currency)
      p.currency = std::optional<std::string>();
    else if (domain::is_currency(**currency))
      p.currency = *currency;
    else
      body.add(at("currency"), "currency must be an ISO 4217 code in upper case, such as \"BRL\"",
               "value_error");
  }
  p.reminders = read_reminders(body);
  p.is_active = body.boolean("is_active", false);
  if (full) {
    // What a full body leaves out is its default.
    if (!p.buffer) p.buffer = 0;
    if (!p.calendar_ids) p.calendar_ids = std::vector<std::int64_t>();
    if (!p.price_cents) p.price_cents = std::optional<std::int64_t>();
    if (!p.currency) p.currency = std::optional<std::string>();
    if (!p.reminders) p.reminders = std::vector<domain::reminder_rule>();
    if (!p.is_active) p.is_active = true;
  }
  return p;
}

void list_services(services& s, const exchange_ptr& ex) {
  std::vector<issue> issues;
  auto page = query_int(ex->req, "page", 1, 1, paging_rules::page_max, issues);
  auto per_page = query_int(ex->req, "per_page", paging_rules::per_page_default, 1,
                            paging_rules::per_page_max, issues);
  if (!issues.empty()) return ex->fail(failure::invalid(std::move(issues)));
  actors::list_services(s.rt, ex->who.tenant_id, *page, *per_page, json_reply(ex));
}

void get_service(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::get_service(s.rt, ex->who.tenant_id, *id, json_reply(ex));
}

void create_service(services& s, const exchange_ptr& ex) {
  body_reader body(ex->req.body);
  auto p = read_service(body, true);
  if (!body.finish()) return ex->fail(body.failure());
  domain::service v;
  v.name = *p.name;
  v.duration = *p.duration;
  v.buffer = *p.buffer;
  v.calendar_ids = *p.calendar_ids;
  v.price_cents = *p.price_cents;
  v.currency = *p.currency;
  v.reminders = *p.reminders;
  v.is_active = *p.is_active;
  if (v.price_cents && !v.currency) {
    body.add(at("currency"), "a price needs its currency", "value_error");
    return ex->fail(body.failure());
  }
  actors::create_service(s.rt, ex->who.tenant_id, std::move(v),
                         created_reply(ex, "/api/v1/services/"));
}

void update_service(services& s, const exchange_ptr& ex, bool full) {
  std::vector<issue> path_issues;
  auto id = path_id(ex->param("id"), "id", path_issues);
  body_reader body(ex->req.body);
  for (auto& i : path_issues) body.issues().push_back(i);
  auto p = read_service(body, full);
  if (!body.finish()) return ex->fail(body.failure());
  actors::update_service(s.rt, ex->who.tenant_id, *id, std::move(p), json_reply(ex));
}

void delete_service(services& s, const exchange_ptr& ex) {
  auto id = id_param(ex);
  if (!id) return;
  actors::delete_service(s.rt, ex->who.tenant_id, *id, no_content_reply(ex));
}

// ---- the OpenAPI document ------------------------------------------------------------------

constexpr const char* calendar_example = R"({
  "name": "Dr. Ana Souza",
  "kind": "practitioner",
  "time_zone": "America/Sao_Paulo",
  "working_hours": {"mon": [["08:00", "12:00"], ["13:00", "17:00"]],
                    "wed": [["08:00", "12:00"]]},
  "slot_step_minutes": 15
})";

constexpr const char* service_example = R"({
  "name": "Check-up",
  "duration_minutes": 30,
  "buffer_minutes": 10,
  "calendar_ids": [1],
  "price": "250.00",
  "currency": "BRL",
  "reminders": [{"before_minutes": 1440, "channel_id": 1,
                 "text": "Hi {{contact.first_name}}, see you {{appointment.start_local}}. Reply 1 to confirm or 2 to cancel."}]
})";

schema::object_t working_hours_schema() {
  using namespace schema;
  auto span = array_of(text_matching("^([01][0-9]|2[0-3]):[0-5][0-9]$|^24:00$"));
  span["minItems"] = 2;
  span["maxItems"] = 2;
  auto day = array_of(span);
  day["maxItems"] = static_cast<std::int64_t>(rules::spans_per_day_max);
  boost::json::object props;
  for (auto d : domain::weekday_keys) props[d] = day;
  object_t s;
  s["type"] = "object";
  s["properties"] = std::move(props);
  s["additionalProperties"] = false;
  s["description"] = "spans [start, end) of each open day in the local time of the time_zone "
                     "beside it; days absent are closed";
  return s;
}

void define_schedule_schemas(router& r) {
  using namespace schema;
  auto step = integer(rules::step_min, rules::step_max);
  auto zone = text(zone_rule);
  zone["description"] = "an IANA time zone name, such as America/Sao_Paulo";
  // Also a channel's business_hours (docs/channels.md "Business hours").
  define(r, "WorkingHours", working_hours_schema());
  auto user = nullable(id());
  auto calendar_props = [&](bool create) {
    return object({{"name", text(name_rule), create},
                   {"kind", one_of(domain::calendar_kinds), false},
                   {"user_id", user, false},
                   {"time_zone", zone, create},
                   {"working_hours", ref("WorkingHours"), create},
                   {"slot_step_minutes", step, false},
                   {"is_active", boolean(), false},
                   {"feed_shows_names", boolean(), false}});
  };
  define(r, "CalendarCreate", calendar_props(true));
  define(r, "CalendarUpdate", calendar_props(false));
  define(r, "Calendar",
         object({{"id", id()},
                 {"name", text({})},
                 {"kind", one_of(domain::calendar_kinds)},
                 {"user_id", user},
                 {"time_zone", text({})},
                 {"working_hours", ref("WorkingHours")},
                 {"slot_step_minutes", step},
                 {"is_active", boolean()},
                 {"feed_shows_names", boolean()},
                 {"has_feed_token", boolean()},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "CalendarPage", page_of("Calendar"));
  define(r, "CalendarFeedToken", object({{"feed_token", text({})}}));
  define(
      r, "ClosureCreate",
      object({{"start", timestamp()}, {"end", timestamp()}, {"reason", text(reason_rule), false}}));
  define(r, "Closure",
         object({{"id", id()},
                 {"calendar_id", id()},
                 {"start", timestamp()},
                 {"end", timestamp()},
                 {"reason", text({})},
                 {"created_at", timestamp()}}));
  define(r, "ClosurePage", page_of("Closure"));

  auto tpl = object(
      {{"name", text_matching("^[a-z0-9_]{1,512}$")},
       {"language", text_matching("^[A-Za-z_]{2,15}$")},
       {"parameters", array_of(text({.min = 1, .max = domain::whatsapp::template_parameter_max})),
        false}});
  tpl["description"] = "a WhatsApp channel's approved template sent instead of the text (the "
                       "24-hour window is closed by then), its parameters with the text's "
                       "placeholders";
  auto reminder = object({{"before_minutes", integer(rules::before_min, rules::before_max)},
                          {"channel_id", id()},
                          {"text", text(reminder_text_rule)},
                          {"template", nullable(tpl), false}});
  auto reminders = array_of(reminder);
  reminders["maxItems"] = static_cast<std::int64_t>(rules::reminders_max);
  auto calendars = array_of(id());
  calendars["maxItems"] = static_cast<std::int64_t>(rules::calendars_per_service_max);
  auto price = nullable(text_matching("^[0-9]{1,13}(\\.[0-9]{1,2})?$"));
  auto currency = nullable(text_matching("^[A-Z]{3}$"));
  auto service_props = [&](bool required) {
    return object(
        {{"name", text(name_rule), required},
         {"duration_minutes", integer(rules::duration_min, rules::duration_max), required},
         {"buffer_minutes", integer(rules::buffer_min, rules::buffer_max), false},
         {"calendar_ids", calendars, false},
         {"price", price, false},
         {"currency", currency, false},
         {"reminders", reminders, false},
         {"is_active", boolean(), false}});
  };
  define(r, "ServiceCreate", service_props(true));
  define(r, "ServiceUpdate", service_props(false));
  define(r, "Service",
         object({{"id", id()},
                 {"name", text({})},
                 {"duration_minutes", integer(rules::duration_min, rules::duration_max)},
                 {"buffer_minutes", integer(rules::buffer_min, rules::buffer_max)},
                 {"calendar_ids", array_of(id())},
                 {"price", nullable(text({}))},
                 {"currency", nullable(text({}))},
                 {"reminders", array_of(reminder)},
                 {"is_active", boolean()},
                 {"created_at", timestamp()},
                 {"updated_at", timestamp()}}));
  define(r, "ServicePage", page_of("Service"));
}

} // namespace

void add_calendar_routes(router& r, services& s) {
  using domain::permission;
  constexpr auto manage = permission::manage_automation;
  constexpr auto read = permission::read_records;
  define_schedule_schemas(r);
  r.add({verb::get, "/api/v1/calendars", access::bearer, read, bind(s, list_calendars),
         "The tenant's calendars (practitioners, rooms, equipment)", "appointments"},
        route_doc("", "CalendarPage").with_query(schema::paging()));
  r.add({verb::post, "/api/v1/calendars", access::bearer, manage, bind(s, create_calendar),
         "Create a calendar with its time zone and working hours", "appointments", 201},
        route_doc("CalendarCreate", "Calendar").with_example(calendar_example));
  r.add({verb::get, "/api/v1/calendars/{id}", access::bearer, read, bind(s, get_calendar),
         "One calendar", "appointments"},
        {"", "Calendar"});
  r.add({verb::patch, "/api/v1/calendars/{id}", access::bearer, manage, bind(s, update_calendar),
         "Change a calendar", "appointments"},
        {"CalendarUpdate", "Calendar"});
  r.add({verb::del, "/api/v1/calendars/{id}", access::bearer, manage, bind(s, delete_calendar),
         "Delete a calendar no appointment names (409 otherwise: deactivate it)", "appointments",
         204},
        route_doc().fails_with({409}));
  r.add({verb::post, "/api/v1/calendars/{id}/feed-token", access::bearer, manage,
         bind(s, rotate_feed_token),
         "A new token for the calendar's feed.ics (shown once; the previous one stops working)",
         "appointments"},
        route_doc("", "CalendarFeedToken").without_body());
  r.add({verb::get,
         "/api/v1/calendars/{id}/feed.ics",
         access::open,
         {},
         bind(s, calendar_feed),
         "The calendar as an RFC 5545 feed for calendar apps (query token: its feed token; "
         "patients' names only when feed_shows_names)",
         "appointments"},
        route_doc()
            .with_query({{"token", R"({"type":"string","minLength":1})",
                          "the calendar's feed token (POST /calendars/{id}/feed-token)"}})
            .with_media("", "text/calendar")
            .fails_with({401}));
  r.add({verb::get, "/api/v1/calendars/{id}/closures", access::bearer, read, bind(s, list_closures),
         "A calendar's closures (holidays, leave), by start", "appointments"},
        route_doc("", "ClosurePage").with_query(schema::paging()));
  r.add({verb::post, "/api/v1/calendars/{id}/closures", access::bearer, manage,
         bind(s, add_closure), "Close a calendar for a time (no slot is offered or booked in it)",
         "appointments", 201},
        {"ClosureCreate", "Closure"});
  r.add({verb::del, "/api/v1/calendars/{id}/closures/{closure_id}", access::bearer, manage,
         bind(s, remove_closure), "Remove a closure", "appointments", 204});
  r.add({verb::get, "/api/v1/services", access::bearer, read, bind(s, list_services),
         "The services that can be booked", "appointments"},
        route_doc("", "ServicePage").with_query(schema::paging()));
  r.add({verb::post, "/api/v1/services", access::bearer, manage, bind(s, create_service),
         "Create a service: its duration, buffer, calendars, price and reminders", "appointments",
         201},
        route_doc("ServiceCreate", "Service").with_example(service_example));
  r.add({verb::get, "/api/v1/services/{id}", access::bearer, read, bind(s, get_service),
         "One service", "appointments"},
        {"", "Service"});
  r.add({verb::put, "/api/v1/services/{id}", access::bearer, manage,
         [&s](const exchange_ptr& ex) { update_service(s, ex, true); },
         "Replace a service (what the body leaves out takes its default)", "appointments"},
        {"ServiceCreate", "Service"});
  r.add({verb::patch, "/api/v1/services/{id}", access::bearer, manage,
         [&s](const exchange_ptr& ex) { update_service(s, ex, false); }, "Change a service",
         "appointments"},
        {"ServiceUpdate", "Service"});
  r.add({verb::del, "/api/v1/services/{id}", access::bearer, manage, bind(s, delete_service),
         "Delete a service no appointment names (409 otherwise: deactivate it)", "appointments",
         204},
        route_doc().fails_with({409}));
}

} // namespace crm::http
