#include "domain/schedule.hpp"

#include "domain/clock.hpp"
#include "domain/deal.hpp"
#include "domain/json_parse.hpp"

#include <date/tz.h>

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <limits>

namespace crm::domain {
namespace {

namespace json = boost::json;
using std::chrono::microseconds;
using std::chrono::minutes;

constexpr std::int64_t minute_us = 60'000'000;

template <class E, std::size_t N>
std::optional<E> parse_enum(const std::array<std::string_view, N>& names, std::string_view s) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

const date::time_zone* zone_of(std::string_view name) {
  if (name.empty() || name.size() > schedule_rules::time_zone_max) return nullptr;
  try {
    return date::locate_zone(std::string(name));
  } catch (const std::exception&) {
    return nullptr;
  }
}

std::int64_t micros_of(date::sys_time<std::chrono::seconds> t) {
  return std::chrono::duration_cast<microseconds>(t.time_since_epoch()).count();
}

date::sys_time<microseconds> sys_of(std::int64_t us) {
  return date::sys_time<microseconds>(microseconds(us));
}

// "HH:MM" → minutes from midnight; "24:00" only when `end`.
std::optional<int> parse_clock(std::string_view s, bool end) {
  if (s.size() != 5 || s[2] != ':') return std::nullopt;
  for (auto i : {0, 1, 3, 4})
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
  int h = (s[0] - '0') * 10 + (s[1] - '0');
  int m = (s[3] - '0') * 10 + (s[4] - '0');
  if (m > 59 || h > 24 || (h == 24 && (m != 0 || !end))) return std::nullopt;
  return h * 60 + m;
}

std::string format_clock(int minutes) {
  char out[6];
  out[0] = static_cast<char>('0' + minutes / 600);
  out[1] = static_cast<char>('0' + minutes / 60 % 10);
  out[2] = ':';
  out[3] = static_cast<char>('0' + minutes % 60 / 10);
  out[4] = static_cast<char>('0' + minutes % 10);
  out[5] = 0;
  return out;
}

std::vector<loc_part> at_key(std::vector<loc_part> at, loc_part k) {
  at.push_back(std::move(k));
  return at;
}

// The local day and minute of an instant, in zone `z`.
struct local_point {
  date::local_days day;
  int minute = 0;  // from midnight
  int weekday = 0; // Monday 0
};

local_point local_of(const date::time_zone* z, std::int64_t us) {
  auto lt = z->to_local(date::floor<std::chrono::seconds>(sys_of(us)));
  auto day = date::floor<date::days>(lt);
  local_point p;
  p.day = day;
  p.minute = static_cast<int>(std::chrono::duration_cast<minutes>(lt - day).count());
  p.weekday = static_cast<int>((date::weekday(day).c_encoding() + 6) % 7);
  return p;
}

// The instant of local minute `m` of `day` at a span's bound: the earlier of two instants for a
// start, the later for an end (a bound in a skipped hour is the transition).
std::int64_t bound_of(const date::time_zone* z, date::local_days day, int m, bool end) {
  auto lt = date::local_seconds(day) + minutes(m);
  return micros_of(z->to_sys(lt, end ? date::choose::latest : date::choose::earliest));
}

// The first minute of a span's grid: the grid is anchored at the local hour at or before the
// span's start and steps by `step` from there.
int grid_anchor(const day_span& s) {
  return s.start / 60 * 60;
}

bool on_grid(const day_span& s, int minute, int step) {
  return (minute - grid_anchor(s)) % step == 0;
}

failure conflict(std::string why) {
  return failure::of(errc::conflict, std::move(why));
}

failure invalid_at(const char* field, std::string msg) {
  return failure::invalid(
      {issue{{std::string("body"), std::string(field)}, std::move(msg), "value_error"}});
}

failure calendar_gone() {
  return failure::of(errc::not_found, "calendar not found");
}
failure service_gone() {
  return failure::of(errc::not_found, "service not found");
}
failure appointment_gone() {
  return failure::of(errc::not_found, "appointment not found");
}

template <class T>
page<T> page_of(std::vector<T> all, int number, int per_page) {
  page<T> p;
  p.total = static_cast<std::int64_t>(all.size());
  p.number = number;
  p.per_page = per_page;
  auto first = static_cast<std::int64_t>(number - 1) * per_page;
  for (auto i = first; i < p.total && i < first + per_page; ++i)
    p.items.push_back(std::move(all[static_cast<std::size_t>(i)]));
  return p;
}

} // namespace

// ---- names ---------------------------------------------------------------------------------

std::string_view to_string(calendar_kind k) {
  return calendar_kinds[static_cast<int>(k)];
}
std::string_view to_string(appointment_status s) {
  return appointment_statuses[static_cast<int>(s)];
}
std::string_view to_string(appointment_source s) {
  return appointment_sources[static_cast<int>(s)];
}
std::optional<calendar_kind> parse_calendar_kind(std::string_view s) {
  return parse_enum<calendar_kind>(calendar_kinds, s);
}
std::optional<appointment_status> parse_appointment_status(std::string_view s) {
  return parse_enum<appointment_status>(appointment_statuses, s);
}
std::optional<appointment_source> parse_appointment_source(std::string_view s) {
  return parse_enum<appointment_source>(appointment_sources, s);
}

bool is_live(appointment_status s) {
  return s == appointment_status::booked || s == appointment_status::confirmed ||
         s == appointment_status::arrived;
}

bool holds_slot(appointment_status s) {
  return is_live(s) || s == appointment_status::completed;
}

const char* status_event(std::optional<appointment_status> to) {
  using st = appointment_status;
  if (!to) return nullptr;
  switch (*to) {
  case st::confirmed: return "appointment.confirmed";
  case st::completed: return "appointment.completed";
  case st::no_show: return "appointment.no_show";
  case st::cancelled: return "appointment.cancelled";
  default: return nullptr;
  }
}

bool is_time_zone(std::string_view name) {
  return zone_of(name) != nullptr;
}

std::optional<std::int64_t> closed_since(const working_week& week, std::string_view zone,
                                         std::int64_t now) {
  auto* z = zone_of(zone);
  if (!z) z = zone_of("UTC");
  const auto today = local_of(z, now).day;
  std::int64_t since = 0;
  for (auto day = today - date::days(8); day <= today; day += date::days(1)) {
    auto wd = static_cast<std::size_t>((date::weekday(day).c_encoding() + 6) % 7);
    for (auto& span : week[wd]) {
      auto opens = bound_of(z, day, span.start, false);
      auto closes = bound_of(z, day, span.end, true);
      if (opens <= now && now < closes) return std::nullopt;
      if (closes <= now) since = std::max(since, closes);
    }
  }
  return since;
}

// ---- working hours -------------------------------------------------------------------------

std::optional<working_week> read_working_hours(const json::value& v, std::vector<loc_part> at,
                                               std::vector<issue>& issues) {
  auto before = issues.size();
  auto bad = [&](std::vector<loc_part> loc, std::string msg, const char* type = "value_error") {
    issues.push_back({std::move(loc), std::move(msg), type});
  };
  if (!v.is_object()) {
    bad(at, "working_hours must be an object of days (\"mon\" ... \"sun\")", "dict_type");
    return std::nullopt;
  }
  working_week w;
  for (auto& kv : v.as_object()) {
    std::string_view key = kv.key();
    auto loc = at_key(at, std::string(key));
    auto day = std::find(weekday_keys.begin(), weekday_keys.end(), key);
    if (day == weekday_keys.end()) {
      bad(loc, "Extra inputs are not permitted (days are mon, tue, wed, thu, fri, sat, sun)",
          "extra_forbidden");
      continue;
    }
    auto& spans = w[static_cast<std::size_t>(day - weekday_keys.begin())];
    if (!kv.value().is_array()) {
      bad(loc, "a day is a list of [\"HH:MM\", \"HH:MM\"] spans", "list_type");
      continue;
    }
    auto& list = kv.value().as_array();
    if (list.size() > schedule_rules::spans_per_day_max) {
      bad(loc, "a day has at most " + std::to_string(schedule_rules::spans_per_day_max) + " spans",
          "too_long");
      continue;
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto sloc = at_key(loc, static_cast<std::int64_t>(i));
      auto* pair = list[i].if_array();
      if (!pair || pair->size() != 2 || !(*pair)[0].is_string() || !(*pair)[1].is_string()) {
        bad(sloc, "a span is [\"HH:MM\", \"HH:MM\"]");
        continue;
      }
      auto& a = (*pair)[0].get_string();
      auto& b = (*pair)[1].get_string();
      auto from = parse_clock({a.data(), a.size()}, false);
      auto to = parse_clock({b.data(), b.size()}, true);
      if (!from || !to) {
        bad(sloc, "times are \"HH:MM\" from \"00:00\" to \"23:59\" (an end may be \"24:00\")");
        continue;
      }
      if (*to <= *from) {
        bad(sloc, "a span must end after it starts");
        continue;
      }
      spans.push_back({*from, *to});
    }
    std::sort(spans.begin(), spans.end(),
              [](const day_span& x, const day_span& y) { return x.start < y.start; });
    for (std::size_t i = 1; i < spans.size(); ++i)
      if (spans[i].start < spans[i - 1].end) {
        bad(loc, "the spans of a day must not overlap");
        break;
      }
  }
  if (issues.size() != before) return std::nullopt;
  return w;
}

json::object working_hours_to_json(const working_week& w) {
  json::object out;
  for (std::size_t d = 0; d < w.size(); ++d) {
    if (w[d].empty()) continue;
    json::array spans;
    for (auto& s : w[d]) spans.push_back(json::array{format_clock(s.start), format_clock(s.end)});
    out[weekday_keys[d]] = std::move(spans);
  }
  return out;
}

std::string working_hours_text(const working_week& w) {
  return json::serialize(working_hours_to_json(w));
}

working_week parse_working_hours_text(std::string_view text) {
  json::error_code ec;
  auto v = parse_json(text, ec);
  std::vector<issue> ignored;
  if (ec) return {};
  auto w = read_working_hours(v, {}, ignored);
  return w ? *w : working_week{};
}

// ---- JSON ----------------------------------------------------------------------------------

json::object calendar_to_json(const calendar& c) {
  json::object o;
  o["id"] = c.id;
  o["name"] = c.name;
  o["kind"] = to_string(c.kind);
  o["user_id"] = c.user_id ? json::value(*c.user_id) : json::value(nullptr);
  o["time_zone"] = c.time_zone;
  o["working_hours"] = working_hours_to_json(c.hours);
  o["slot_step_minutes"] = c.slot_step;
  o["is_active"] = c.is_active;
  o["feed_shows_names"] = c.feed_shows_names;
  o["has_feed_token"] = !c.feed_token_hash.empty();
  o["created_at"] = format_rfc3339(c.created_at);
  o["updated_at"] = format_rfc3339(c.updated_at);
  return o;
}

json::object closure_to_json(const closure& c) {
  json::object o;
  o["id"] = c.id;
  o["calendar_id"] = c.calendar_id;
  o["start"] = format_rfc3339(c.start);
  o["end"] = format_rfc3339(c.end);
  o["reason"] = c.reason;
  o["created_at"] = format_rfc3339(c.created_at);
  return o;
}

json::array reminders_to_json(const std::vector<reminder_rule>& rs) {
  json::array out;
  for (auto& r : rs) {
    json::object o{
        {"before_minutes", r.before_minutes}, {"channel_id", r.channel_id}, {"text", r.text}};
    if (!r.template_json.empty()) {
      json::error_code ec;
      auto t = parse_json(r.template_json, ec);
      if (!ec && t.is_object()) o["template"] = std::move(t);
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<reminder_rule> parse_reminders_text(std::string_view text) {
  json::error_code ec;
  auto v = parse_json(text, ec);
  std::vector<reminder_rule> out;
  if (ec || !v.is_array()) return out;
  for (auto& x : v.as_array()) {
    auto* o = x.if_object();
    if (!o) continue;
    reminder_rule r;
    if (auto* b = o->if_contains("before_minutes"); b && b->is_int64())
      r.before_minutes = static_cast<int>(b->get_int64());
    if (auto* c = o->if_contains("channel_id"); c && c->is_int64()) r.channel_id = c->get_int64();
    if (auto* t = o->if_contains("text"); t && t->is_string()) r.text = t->get_string();
    if (auto* t = o->if_contains("template"); t && t->is_object())
      r.template_json = json::serialize(*t);
    out.push_back(std::move(r));
  }
  return out;
}

json::object service_to_json(const service& s) {
  json::object o;
  o["id"] = s.id;
  o["name"] = s.name;
  o["duration_minutes"] = s.duration;
  o["buffer_minutes"] = s.buffer;
  json::array cals;
  for (auto c : s.calendar_ids) cals.push_back(c);
  o["calendar_ids"] = std::move(cals);
  o["price"] = s.price_cents ? json::value(format_cents(*s.price_cents)) : json::value(nullptr);
  o["currency"] = s.currency ? json::value(*s.currency) : json::value(nullptr);
  o["reminders"] = reminders_to_json(s.reminders);
  o["is_active"] = s.is_active;
  o["created_at"] = format_rfc3339(s.created_at);
  o["updated_at"] = format_rfc3339(s.updated_at);
  return o;
}

json::object appointment_to_json(const appointment& a) {
  json::object o;
  o["id"] = a.id;
  o["contact_id"] = a.contact_id;
  o["service_id"] = a.service_id;
  o["calendar_id"] = a.calendar_id;
  o["start"] = format_rfc3339(a.start);
  o["end"] = format_rfc3339(a.end);
  o["status"] = to_string(a.status);
  o["notes"] = a.notes;
  o["source"] = to_string(a.source);
  o["cancel_reason"] = a.cancel_reason ? json::value(*a.cancel_reason) : json::value(nullptr);
  o["created_at"] = format_rfc3339(a.created_at);
  o["updated_at"] = format_rfc3339(a.updated_at);
  return o;
}

std::string appointment_event(const appointment& a, std::string_view extra) {
  std::string p = "{\"appointment_id\":" + std::to_string(a.id) + ",\"appointment\":";
  p += json::serialize(appointment_to_json(a));
  p += ",\"contact_id\":" + std::to_string(a.contact_id);
  p += extra;
  p += ",\"tenant_id\":" + std::to_string(a.tenant_id) + "}";
  return p;
}

// ---- reads ---------------------------------------------------------------------------------

outcome<calendar> schedule_store::get_calendar(std::int64_t id) const {
  auto it = calendars.find(id);
  if (it == calendars.end()) return calendar_gone();
  return it->second;
}

outcome<service> schedule_store::get_service(std::int64_t id) const {
  auto it = services.find(id);
  if (it == services.end()) return service_gone();
  return it->second;
}

outcome<appointment> schedule_store::get_appointment(std::int64_t id) const {
  auto it = appointments.find(id);
  if (it == appointments.end()) return appointment_gone();
  return it->second;
}

page<calendar> schedule_store::list_calendars(int number, int per_page) const {
  std::vector<calendar> all;
  for (auto& [id, c] : calendars) all.push_back(c);
  return page_of(std::move(all), number, per_page);
}

page<service> schedule_store::list_services(int number, int per_page) const {
  std::vector<service> all;
  for (auto& [id, s] : services) all.push_back(s);
  return page_of(std::move(all), number, per_page);
}

outcome<page<closure>> schedule_store::list_closures(std::int64_t calendar, int number,
                                                     int per_page) const {
  if (!calendars.count(calendar)) return calendar_gone();
  std::vector<closure> all;
  if (auto it = closures_of.find(calendar); it != closures_of.end())
    for (auto id : it->second) all.push_back(closures.at(id));
  std::sort(all.begin(), all.end(), [](const closure& a, const closure& b) {
    return std::pair(a.start, a.id) < std::pair(b.start, b.id);
  });
  return page_of(std::move(all), number, per_page);
}

page<appointment> schedule_store::list_appointments(const appointment_query& q, int number,
                                                    int per_page) const {
  static const std::set<std::pair<std::int64_t, std::int64_t>> none;
  const auto* index = &by_start;
  if (q.contact_id) {
    auto it = by_contact.find(*q.contact_id);
    index = it == by_contact.end() ? &none : &it->second;
  } else if (q.calendar_id) {
    auto it = by_calendar.find(*q.calendar_id);
    index = it == by_calendar.end() ? &none : &it->second;
  }
  auto it = q.from ? index->lower_bound({*q.from, 0}) : index->begin();
  page<appointment> p;
  p.number = number;
  p.per_page = per_page;
  auto first = static_cast<std::int64_t>(number - 1) * per_page;
  for (; it != index->end(); ++it) {
    if (q.to && it->first >= *q.to) break;
    auto& a = appointments.at(it->second);
    if (q.calendar_id && a.calendar_id != *q.calendar_id) continue;
    if (q.status && a.status != *q.status) continue;
    if (p.total >= first && p.total < first + per_page) p.items.push_back(a);
    ++p.total;
  }
  return p;
}

outcome<appointment_view> schedule_store::view(std::int64_t id) const {
  auto a = get_appointment(id);
  if (!a) return a.error();
  appointment_view v{*a, {}, {}};
  if (auto s = services.find(a->service_id); s != services.end()) v.service_name = s->second.name;
  if (auto c = calendars.find(a->calendar_id); c != calendars.end())
    v.calendar_name = c->second.name;
  return v;
}

std::vector<appointment_view> schedule_store::views(const appointment_query& q) const {
  auto all = list_appointments(q, 1, std::numeric_limits<int>::max());
  std::vector<appointment_view> out;
  out.reserve(all.items.size());
  for (auto& a : all.items) out.push_back(*view(a.id));
  return out;
}

bool schedule_store::overlaps_held(std::int64_t calendar, std::int64_t from, std::int64_t until,
                                   std::int64_t ignore) const {
  auto h = held.find(calendar);
  if (h == held.end()) return false;
  // Held slots never overlap, so their ends rise with their starts: the last one starting
  // before `until` (the ignored one aside) is the only one that can reach past `from`.
  auto it = h->second.lower_bound(until);
  while (it != h->second.begin()) {
    --it;
    if (it->second == ignore) continue;
    auto& a = it->second < 0 ? pending.at(it->second) : appointments.at(it->second);
    return a.blocked_until > from;
  }
  return false;
}

bool schedule_store::closed(std::int64_t calendar, std::int64_t from, std::int64_t until) const {
  auto it = closures_of.find(calendar);
  if (it == closures_of.end()) return false;
  for (auto id : it->second) {
    auto& c = closures.at(id);
    if (c.start < until && c.end > from) return true;
  }
  return false;
}

outcome<std::vector<slot>> schedule_store::availability(std::int64_t service_id, std::int64_t from,
                                                        std::int64_t to,
                                                        std::optional<std::int64_t> calendar_id,
                                                        std::int64_t now) const {
  auto s = services.find(service_id);
  if (s == services.end()) return service_gone();
  if (calendar_id && !calendars.count(*calendar_id)) return calendar_gone();
  std::vector<slot> out;
  if (!s->second.is_active) return out;
  const auto& svc = s->second;
  auto length = static_cast<std::int64_t>(svc.duration) * minute_us;
  auto hold = static_cast<std::int64_t>(svc.duration + svc.buffer) * minute_us;
  auto earliest = std::max(from, now);
  for (auto cid : svc.calendar_ids) {
    if (calendar_id && cid != *calendar_id) continue;
    auto c = calendars.find(cid);
    if (c == calendars.end() || !c->second.is_active) continue;
    const auto& cal = c->second;
    auto* z = zone_of(cal.time_zone);
    if (!z) continue;
    // Local days from the one before `from` to the one after `to`: a day's spans may reach
    // past midnight UTC either way.
    auto first = local_of(z, earliest).day - date::days(1);
    auto last = local_of(z, to).day + date::days(1);
    for (auto day = first; day <= last; day += date::days(1)) {
      auto wd = static_cast<std::size_t>((date::weekday(day).c_encoding() + 6) % 7);
      for (auto& span : cal.hours[wd]) {
        // A span inside one offset of the zone (no daylight-saving change within it: nearly
        // always) maps its grid with that offset, not with a look-up of the zone a start (the
        // look-ups were the most of what availability cost).
        const auto span_open = date::local_seconds(day) + minutes(span.start);
        const auto span_close = date::local_seconds(day) + minutes(span.end);
        const auto at_open = z->get_info(span_open);
        const auto at_close = z->get_info(span_close - std::chrono::seconds(1));
        const bool one_offset = at_open.result == date::local_info::unique &&
                                at_close.result == date::local_info::unique &&
                                at_open.first.begin == at_close.first.begin;
        auto opens =
            one_offset
                ? micros_of(date::sys_seconds(span_open.time_since_epoch() - at_open.first.offset))
                : bound_of(z, day, span.start, false);
        auto closes =
            one_offset
                ? micros_of(date::sys_seconds(span_close.time_since_epoch() - at_open.first.offset))
                : bound_of(z, day, span.end, true);
        if (closes <= earliest || opens >= to) continue;
        int m = grid_anchor(span);
        while (m < span.start) m += cal.slot_step;
        for (; m < span.end; m += cal.slot_step) {
          auto info = one_offset ? at_open : z->get_info(date::local_seconds(day) + minutes(m));
          if (info.result == date::local_info::nonexistent) continue;
          auto local = (date::local_seconds(day) + minutes(m)).time_since_epoch();
          std::array<std::int64_t, 2> starts{
              micros_of(date::sys_seconds(local - info.first.offset)),
              micros_of(date::sys_seconds(local - info.second.offset))};
          int n = info.result == date::local_info::ambiguous ? 2 : 1;
          for (int i = 0; i < n; ++i) {
            auto start = starts[static_cast<std::size_t>(i)];
            if (start < earliest || start >= to) continue;
            if (start < opens || start + length > closes) continue;
            if (closed(cid, start, start + length)) continue;
            if (overlaps_held(cid, start, start + hold, 0)) continue;
            out.push_back({cid, start, start + length});
          }
        }
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const slot& a, const slot& b) {
    return std::pair(a.start, a.calendar_id) < std::pair(b.start, b.calendar_id);
  });
  return out;
}

// ---- plans ---------------------------------------------------------------------------------

calendar schedule_store::plan_create_calendar(calendar c, std::int64_t tenant,
                                              std::int64_t now) const {
  c.id = 0;
  c.tenant_id = tenant;
  c.created_at = c.updated_at = now;
  return c;
}

outcome<calendar> schedule_store::plan_update_calendar(std::int64_t id, const calendar_patch& p,
                                                       std::int64_t now) const {
  auto c = get_calendar(id);
  if (!c) return c;
  if (p.name) c->name = *p.name;
  if (p.kind) c->kind = *p.kind;
  if (p.user_id) c->user_id = *p.user_id;
  if (p.time_zone) c->time_zone = *p.time_zone;
  if (p.hours) c->hours = *p.hours;
  if (p.slot_step) c->slot_step = *p.slot_step;
  if (p.is_active) c->is_active = *p.is_active;
  if (p.feed_shows_names) c->feed_shows_names = *p.feed_shows_names;
  c->updated_at = now;
  return c;
}

outcome<calendar> schedule_store::plan_feed_token(std::int64_t id, std::string token_hash,
                                                  std::int64_t now) const {
  auto c = get_calendar(id);
  if (!c) return c;
  c->feed_token_hash = std::move(token_hash);
  c->updated_at = now;
  return c;
}

outcome<calendar> schedule_store::feed_calendar(std::int64_t id) const {
  auto it = calendars.find(id);
  // An unknown calendar, one without a feed and a wrong token are told apart by nobody: the
  // feed's URL is all a subscriber has.
  if (it == calendars.end() || it->second.feed_token_hash.empty()) return feed_refused();
  return it->second;
}

failure feed_refused() {
  return failure::of(errc::invalid_credentials, "the feed token is not valid for this calendar");
}

outcome<calendar> schedule_store::plan_delete_calendar(std::int64_t id) const {
  auto c = get_calendar(id);
  if (!c) return c;
  auto booked = [&](std::int64_t cal) {
    if (auto it = by_calendar.find(cal); it != by_calendar.end() && !it->second.empty())
      return true;
    return std::any_of(pending.begin(), pending.end(),
                       [cal](auto& p) { return p.second.calendar_id == cal; });
  };
  if (booked(id))
    return conflict("the calendar has appointments: deactivate it (is_active: false) instead");
  return c;
}

outcome<closure> schedule_store::plan_add_closure(closure c, std::int64_t tenant,
                                                  std::int64_t now) const {
  if (!calendars.count(c.calendar_id)) return calendar_gone();
  if (c.end <= c.start) return invalid_at("end", "a closure must end after it starts");
  c.id = 0;
  c.tenant_id = tenant;
  c.created_at = now;
  return c;
}

outcome<closure> schedule_store::plan_remove_closure(std::int64_t calendar, std::int64_t id) const {
  auto it = closures.find(id);
  if (it == closures.end() || it->second.calendar_id != calendar)
    return failure::of(errc::not_found, "closure not found");
  return it->second;
}

namespace {

// The calendars a service names must be the tenant's (each reported at its index).
std::optional<failure> unknown_calendars(const std::map<std::int64_t, calendar>& held,
                                         const std::vector<std::int64_t>& ids) {
  std::vector<issue> issues;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (!held.count(ids[i]))
      issues.push_back(
          {{std::string("body"), std::string("calendar_ids"), static_cast<std::int64_t>(i)},
           "calendar not found in this tenant",
           "value_error"});
  if (issues.empty()) return std::nullopt;
  return failure::invalid(std::move(issues));
}

} // namespace

outcome<service> schedule_store::plan_create_service(service s, std::int64_t tenant,
                                                     std::int64_t now) const {
  if (auto f = unknown_calendars(calendars, s.calendar_ids)) return *f;
  s.id = 0;
  s.tenant_id = tenant;
  s.created_at = s.updated_at = now;
  return s;
}

outcome<service> schedule_store::plan_update_service(std::int64_t id, const service_patch& p,
                                                     std::int64_t now) const {
  auto s = get_service(id);
  if (!s) return s;
  if (p.calendar_ids)
    if (auto f = unknown_calendars(calendars, *p.calendar_ids)) return *f;
  if (p.name) s->name = *p.name;
  if (p.duration) s->duration = *p.duration;
  if (p.buffer) s->buffer = *p.buffer;
  if (p.calendar_ids) s->calendar_ids = *p.calendar_ids;
  if (p.price_cents) s->price_cents = *p.price_cents;
  if (p.currency) s->currency = *p.currency;
  if (p.reminders) s->reminders = *p.reminders;
  if (p.is_active) s->is_active = *p.is_active;
  if (s->price_cents && !s->currency) return invalid_at("currency", "a price needs its currency");
  s->updated_at = now;
  return s;
}

outcome<service> schedule_store::plan_delete_service(std::int64_t id) const {
  auto s = get_service(id);
  if (!s) return s;
  for (auto* all : {&appointments, &pending})
    for (auto& [aid, a] : *all)
      if (a.service_id == id)
        return conflict("the service has appointments: deactivate it (is_active: false) instead");
  return s;
}

std::optional<failure> schedule_store::refuse(const calendar& c, const service& s,
                                              std::int64_t start, std::int64_t ignore,
                                              std::int64_t now, const char* field) const {
  if (!c.is_active) return conflict("the calendar is not active");
  if (!s.is_active) return conflict("the service is not active");
  if (std::find(s.calendar_ids.begin(), s.calendar_ids.end(), c.id) == s.calendar_ids.end())
    return conflict("this calendar does not perform the service");
  auto* z = zone_of(c.time_zone);
  if (!z) return conflict("the calendar's time zone is unknown to this server");
  auto length = static_cast<std::int64_t>(s.duration) * minute_us;
  auto hold = static_cast<std::int64_t>(s.duration + s.buffer) * minute_us;
  auto at = local_of(z, start);
  const day_span* span = nullptr;
  for (auto& sp : c.hours[static_cast<std::size_t>(at.weekday)])
    if (sp.start <= at.minute && at.minute < sp.end) span = &sp;
  if (!span) return conflict("the start is outside working hours");
  if (start % minute_us != 0 || !on_grid(*span, at.minute, c.slot_step))
    return invalid_at(field, "the start is not on the calendar's " + std::to_string(c.slot_step) +
                                 "-minute grid");
  if (start + length > bound_of(z, at.day, span->end, true))
    return conflict("the appointment would end after working hours");
  if (start < now) return conflict("the start is in the past");
  if (closed(c.id, start, start + length)) return conflict("the calendar is closed then");
  if (overlaps_held(c.id, start, start + hold, ignore))
    return conflict("the slot is taken: another appointment (or its buffer) overlaps it");
  return std::nullopt;
}

outcome<appointment> schedule_store::plan_book(const booking& b, std::int64_t tenant,
                                               std::int64_t now) const {
  std::vector<issue> issues;
  auto c = calendars.find(b.calendar_id);
  auto s = services.find(b.service_id);
  if (s == services.end())
    issues.push_back({{std::string("body"), std::string("service_id")},
                      "service not found in this tenant",
                      "value_error"});
  if (c == calendars.end())
    issues.push_back({{std::string("body"), std::string("calendar_id")},
                      "calendar not found in this tenant",
                      "value_error"});
  if (!issues.empty()) return failure::invalid(std::move(issues));
  if (auto why = refuse(c->second, s->second, b.start, 0, now, "start")) return *why;
  appointment a;
  a.tenant_id = tenant;
  a.contact_id = b.contact_id;
  a.service_id = b.service_id;
  a.calendar_id = b.calendar_id;
  a.start = b.start;
  a.end = b.start + static_cast<std::int64_t>(s->second.duration) * minute_us;
  a.blocked_until = a.end + static_cast<std::int64_t>(s->second.buffer) * minute_us;
  a.notes = b.notes;
  a.source = b.source;
  a.created_at = a.updated_at = now;
  return a;
}

outcome<appointment> schedule_store::plan_reschedule(std::int64_t id, std::int64_t start,
                                                     std::optional<std::int64_t> calendar_id,
                                                     std::int64_t now) const {
  auto a = get_appointment(id);
  if (!a) return a;
  if (a->status != appointment_status::booked && a->status != appointment_status::confirmed)
    return conflict("only a booked or confirmed appointment can be rescheduled (it is " +
                    std::string(to_string(a->status)) + ")");
  auto cid = calendar_id.value_or(a->calendar_id);
  auto c = calendars.find(cid);
  if (c == calendars.end()) return invalid_at("calendar_id", "calendar not found in this tenant");
  auto s = services.find(a->service_id);
  if (s == services.end()) return conflict("the appointment's service is gone");
  if (auto why = refuse(c->second, s->second, start, id, now, "start")) return *why;
  a->calendar_id = cid;
  a->start = start;
  a->end = start + static_cast<std::int64_t>(s->second.duration) * minute_us;
  a->blocked_until = a->end + static_cast<std::int64_t>(s->second.buffer) * minute_us;
  a->status = appointment_status::booked;
  a->updated_at = now;
  return a;
}

outcome<appointment> schedule_store::plan_cancel(std::int64_t id, std::optional<std::string> reason,
                                                 appointment_source by, std::int64_t now) const {
  auto a = get_appointment(id);
  if (!a) return a;
  if (!is_live(a->status))
    return conflict("only a live appointment can be cancelled (it is " +
                    std::string(to_string(a->status)) + ")");
  a->status = appointment_status::cancelled;
  a->cancel_reason = std::move(reason);
  if (by == appointment_source::patient_reply || by == appointment_source::ai) a->source = by;
  a->updated_at = now;
  return a;
}

outcome<appointment> schedule_store::plan_status(std::int64_t id,
                                                 std::optional<appointment_status> to,
                                                 std::optional<std::string> notes,
                                                 std::int64_t now) const {
  using st = appointment_status;
  auto a = get_appointment(id);
  if (!a) return a;
  if (to) {
    auto from = a->status;
    auto rank = [](st s) {
      return static_cast<int>(s);
    }; // booked < confirmed < arrived < completed
    bool ok = false;
    switch (*to) {
    case st::confirmed:
    case st::arrived:
    case st::completed: ok = is_live(from) && rank(*to) > rank(from); break;
    case st::no_show:
      if ((from == st::booked || from == st::confirmed) && now < a->start)
        return conflict("an appointment is a no-show only once its start has passed");
      ok = from == st::booked || from == st::confirmed;
      break;
    case st::cancelled: ok = is_live(from); break;
    case st::booked: ok = false; break;
    }
    if (!ok)
      return conflict("an appointment cannot go from " + std::string(to_string(from)) + " to " +
                      std::string(to_string(*to)));
    a->status = *to;
  }
  if (notes) a->notes = std::move(*notes);
  a->updated_at = now;
  return a;
}

// ---- applied -------------------------------------------------------------------------------

void schedule_store::put(const calendar& c) {
  calendars[c.id] = c;
}

void schedule_store::erase_calendar(std::int64_t id) {
  calendars.erase(id);
  if (auto it = closures_of.find(id); it != closures_of.end()) {
    for (auto cid : it->second) closures.erase(cid);
    closures_of.erase(it);
  }
  held.erase(id);
  by_calendar.erase(id);
  for (auto& [sid, s] : services)
    s.calendar_ids.erase(std::remove(s.calendar_ids.begin(), s.calendar_ids.end(), id),
                         s.calendar_ids.end());
}

void schedule_store::put(const closure& c) {
  closures[c.id] = c;
  closures_of[c.calendar_id].insert(c.id);
}

void schedule_store::erase_closure(std::int64_t id) {
  auto it = closures.find(id);
  if (it == closures.end()) return;
  if (auto of = closures_of.find(it->second.calendar_id); of != closures_of.end())
    of->second.erase(id);
  closures.erase(it);
}

void schedule_store::put(const service& s) {
  services[s.id] = s;
}
void schedule_store::erase_service(std::int64_t id) {
  services.erase(id);
}

void schedule_store::unindex(const appointment& a) {
  if (auto h = held.find(a.calendar_id); h != held.end()) {
    auto it = h->second.find(a.start);
    if (it != h->second.end() && it->second == a.id) h->second.erase(it);
  }
  by_calendar[a.calendar_id].erase({a.start, a.id});
  by_contact[a.contact_id].erase({a.start, a.id});
  by_start.erase({a.start, a.id});
}

void schedule_store::put(const appointment& a) {
  if (auto old = appointments.find(a.id); old != appointments.end()) unindex(old->second);
  appointments[a.id] = a;
  if (holds_slot(a.status)) held[a.calendar_id][a.start] = a.id;
  by_calendar[a.calendar_id].insert({a.start, a.id});
  by_contact[a.contact_id].insert({a.start, a.id});
  by_start.insert({a.start, a.id});
}

void schedule_store::hold(const appointment& a) {
  pending[a.id] = a;
  held[a.calendar_id][a.start] = a.id;
}

void schedule_store::release(std::int64_t pending_id) {
  auto it = pending.find(pending_id);
  if (it == pending.end()) return;
  if (auto h = held.find(it->second.calendar_id); h != held.end()) {
    auto slot = h->second.find(it->second.start);
    if (slot != h->second.end() && slot->second == pending_id) h->second.erase(slot);
  }
  pending.erase(it);
}

void schedule_store::forget_contact(std::int64_t contact) {
  auto it = by_contact.find(contact);
  if (it == by_contact.end()) return;
  auto ids = it->second;
  for (auto [start, id] : ids) {
    unindex(appointments.at(id));
    appointments.erase(id);
  }
  by_contact.erase(contact);
}

void schedule_store::move_contact(std::int64_t from, std::int64_t into) {
  auto it = by_contact.find(from);
  if (it == by_contact.end() || from == into) return;
  auto moved = std::move(it->second);
  by_contact.erase(it);
  for (auto [start, id] : moved) {
    if (auto a = appointments.find(id); a != appointments.end()) a->second.contact_id = into;
    by_contact[into].insert({start, id});
  }
}

std::string local_time_text(std::int64_t us, std::string_view zone) {
  auto z = zone_of(zone);
  if (!z) z = date::locate_zone("UTC");
  auto lt = z->to_local(date::floor<std::chrono::minutes>(sys_of(us)));
  return date::format("%Y-%m-%d %H:%M", lt);
}

} // namespace crm::domain
