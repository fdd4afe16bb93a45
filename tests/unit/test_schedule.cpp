// The schedule's rules without an actor (domain::schedule_store): working hours as the API
// writes them, free slots in the calendar's own time zone across daylight-saving changes, what
// a booking may not do and why, the status moves, and what a contact's deletion frees.
#include "domain/clock.hpp"
#include "domain/ical.hpp"
#include "domain/schedule.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

std::int64_t at(const char* rfc3339) {
  return *parse_rfc3339(rfc3339);
}

constexpr std::int64_t minute = 60'000'000;

working_week every_day(int from, int to) {
  working_week w;
  for (auto& d : w) d.push_back({from, to});
  return w;
}

// Calendar 1 in `zone`, open every day [from, to) local minutes, performing service 5.
schedule_store clinic(const char* zone, int from, int to, int step = 15, int duration = 30,
                      int buffer = 0) {
  schedule_store s;
  calendar c;
  c.id = 1;
  c.name = "Dr. Ana";
  c.time_zone = zone;
  c.hours = every_day(from, to);
  c.slot_step = step;
  s.put(c);
  service v;
  v.id = 5;
  v.name = "Check-up";
  v.duration = duration;
  v.buffer = buffer;
  v.calendar_ids = {1};
  s.put(v);
  return s;
}

std::vector<std::string> starts(const std::vector<slot>& slots) {
  std::vector<std::string> out;
  for (auto& x : slots) out.push_back(format_rfc3339(x.start).substr(0, 16));
  return out;
}

std::vector<std::string> free_slots(const schedule_store& s, const char* from, const char* to) {
  auto r = s.availability(5, at(from), at(to), std::nullopt, 0);
  EXPECT_TRUE(r);
  return r ? starts(*r) : std::vector<std::string>{};
}

appointment booked(const schedule_store& s, std::int64_t id, const char* start,
                   std::int64_t contact = 9) {
  booking b{contact, 5, 1, at(start), "", appointment_source::staff};
  auto a = s.plan_book(b, 1, 0);
  EXPECT_TRUE(a) << (a ? "" : a.error().detail);
  a->id = id;
  return *a;
}

std::optional<working_week> hours_of(const char* json_text, std::vector<issue>& issues) {
  return read_working_hours(boost::json::parse(json_text), {std::string("body")}, issues);
}

} // namespace

TEST(working_hours, are_read_as_the_api_writes_them_and_written_back_alike) {
  std::vector<issue> issues;
  auto w = hours_of(
      R"({"mon": [["13:00", "17:00"], ["08:00", "12:00"]], "sun": [["20:00", "24:00"]]})", issues);
  ASSERT_TRUE(w) << issues.size();
  EXPECT_EQ((*w)[0], (std::vector<day_span>{{480, 720}, {780, 1020}}));
  EXPECT_TRUE((*w)[1].empty());
  EXPECT_EQ((*w)[6], (std::vector<day_span>{{1200, 1440}}));
  EXPECT_EQ(working_hours_text(*w),
            R"({"mon":[["08:00","12:00"],["13:00","17:00"]],"sun":[["20:00","24:00"]]})");
  EXPECT_EQ(parse_working_hours_text(working_hours_text(*w)), *w);
}

TEST(working_hours, refuse_spans_that_end_first_overlap_or_name_no_day) {
  struct bad_case {
    const char* json;
    std::vector<loc_part> loc;
  };
  for (auto& c : std::vector<bad_case>{
           {R"({"mon": [["12:00", "08:00"]]})", {"body", "mon", std::int64_t(0)}},
           {R"({"mon": [["08:00", "08:00"]]})", {"body", "mon", std::int64_t(0)}},
           {R"({"tue": [["08:00", "12:00"], ["11:00", "13:00"]]})", {"body", "tue"}},
           {R"({"monday": [["08:00", "12:00"]]})", {"body", "monday"}},
           {R"({"wed": [["24:00", "24:00"]]})", {"body", "wed", std::int64_t(0)}},
           {R"({"thu": [["8:00", "12:00"]]})", {"body", "thu", std::int64_t(0)}},
           {R"({"fri": [["08:00", "12:60"]]})", {"body", "fri", std::int64_t(0)}},
           {R"({"sat": "08:00-12:00"})", {"body", "sat"}},
           {R"(["08:00", "12:00"])", {"body"}},
       }) {
    std::vector<issue> issues;
    EXPECT_FALSE(hours_of(c.json, issues)) << c.json;
    ASSERT_EQ(issues.size(), 1u) << c.json;
    EXPECT_EQ(issues[0].loc, c.loc) << c.json;
  }
}

TEST(time_zones, come_from_the_system_tz_database) {
  EXPECT_TRUE(is_time_zone("America/Sao_Paulo"));
  EXPECT_TRUE(is_time_zone("Europe/Lisbon"));
  EXPECT_TRUE(is_time_zone("UTC"));
  EXPECT_FALSE(is_time_zone("Mars/Olympus_Mons"));
  EXPECT_FALSE(is_time_zone(""));
  EXPECT_FALSE(is_time_zone("../../etc/passwd"));
}

TEST(availability, offers_every_grid_start_where_the_service_fits) {
  auto s = clinic("UTC", 8 * 60, 9 * 60);
  EXPECT_EQ(free_slots(s, "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z"),
            (std::vector<std::string>{"2030-01-07T08:00", "2030-01-07T08:15", "2030-01-07T08:30"}));
}

TEST(availability, leaves_out_a_held_slot_with_its_buffer_closures_and_the_past) {
  auto s = clinic("UTC", 8 * 60, 10 * 60, 15, 30, 15);
  s.put(booked(s, 100, "2030-01-07T08:30:00Z"));
  // 08:30-09:00 is held with its buffer until 09:15; a new slot holds its 30 minutes and 15
  // of buffer, so 08:00 (to 08:45) overlaps, and nothing before 09:15 starts.
  EXPECT_EQ(free_slots(s, "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z"),
            (std::vector<std::string>{"2030-01-07T09:15", "2030-01-07T09:30"}));
  closure c;
  c.id = 3;
  c.calendar_id = 1;
  c.start = at("2030-01-07T09:40:00Z");
  c.end = at("2030-01-07T11:00:00Z");
  s.put(c);
  EXPECT_EQ(free_slots(s, "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z"),
            (std::vector<std::string>{}));
  // Before `now`, nothing is offered.
  auto later = s.availability(5, at("2030-01-08T00:00:00Z"), at("2030-01-09T00:00:00Z"),
                              std::nullopt, at("2030-01-08T09:00:00Z"));
  ASSERT_TRUE(later);
  EXPECT_EQ(starts(*later),
            (std::vector<std::string>{"2030-01-08T09:00", "2030-01-08T09:15", "2030-01-08T09:30"}));
}

TEST(availability, follows_the_calendars_clock_across_daylight_saving_changes) {
  // New York moves from UTC-5 to UTC-4 on Sunday 2027-03-14: 09:00 local is 14:00Z before
  // and 13:00Z after.
  auto s = clinic("America/New_York", 9 * 60, 10 * 60, 30, 30);
  EXPECT_EQ(free_slots(s, "2027-03-13T00:00:00Z", "2027-03-16T00:00:00Z"),
            (std::vector<std::string>{"2027-03-13T14:00", "2027-03-13T14:30", "2027-03-14T13:00",
                                      "2027-03-14T13:30", "2027-03-15T13:00", "2027-03-15T13:30"}));
}

TEST(availability, skips_the_hour_that_does_not_exist_and_offers_the_repeated_one_twice) {
  auto spring = clinic("America/New_York", 60, 4 * 60, 60, 60);
  // 01:00 EST, (02:00 does not exist), 03:00 EDT.
  EXPECT_EQ(free_slots(spring, "2027-03-14T00:00:00Z", "2027-03-15T00:00:00Z"),
            (std::vector<std::string>{"2027-03-14T06:00", "2027-03-14T07:00"}));
  auto autumn = clinic("America/New_York", 0, 3 * 60, 60, 60);
  // 00:00 EDT, 01:00 EDT, 01:00 EST, 02:00 EST (the day's end, 03:00 EST, is 08:00Z).
  EXPECT_EQ(free_slots(autumn, "2027-11-07T00:00:00Z", "2027-11-08T00:00:00Z"),
            (std::vector<std::string>{"2027-11-07T04:00", "2027-11-07T05:00", "2027-11-07T06:00",
                                      "2027-11-07T07:00"}));
}

TEST(availability, a_span_that_ends_where_the_clock_jumps_keeps_its_last_slot) {
  // São Paulo moved from UTC-3 to UTC-2 at midnight on 2018-11-04 (00:00 did not exist): the
  // 22:00-24:00 span before it ends at the jump (03:00Z), and is mapped with one offset; the
  // next night's span is under the new one.
  auto s = clinic("America/Sao_Paulo", 22 * 60, 24 * 60, 60, 60);
  EXPECT_EQ(free_slots(s, "2018-11-04T00:00:00Z", "2018-11-05T02:00:00Z"),
            (std::vector<std::string>{"2018-11-04T01:00", "2018-11-04T02:00", "2018-11-05T00:00",
                                      "2018-11-05T01:00"}));
  // And back at midnight on 2019-02-17 (23:00 on the 16th came twice): that span holds the
  // change, so each grid time is looked up: 22:00, 23:00 at UTC-2, 23:00 again at UTC-3.
  EXPECT_EQ(free_slots(s, "2019-02-16T12:00:00Z", "2019-02-17T04:00:00Z"),
            (std::vector<std::string>{"2019-02-17T00:00", "2019-02-17T01:00", "2019-02-17T02:00"}));
}

TEST(availability, anchors_the_grid_at_the_hour_a_span_starts_in) {
  auto s = clinic("UTC", 8 * 60 + 10, 10 * 60, 45, 30);
  // The grid of the 08:10 span steps 45 minutes from 08:00: 08:45, 09:30.
  EXPECT_EQ(free_slots(s, "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z"),
            (std::vector<std::string>{"2030-01-07T08:45", "2030-01-07T09:30"}));
}

TEST(booking, names_why_a_start_is_not_a_free_slot) {
  auto s = clinic("UTC", 8 * 60, 12 * 60);
  s.put(booked(s, 100, "2030-01-07T09:00:00Z"));
  auto refused = [&](const char* start, errc code) {
    booking b{9, 5, 1, at(start), "", appointment_source::staff};
    auto r = s.plan_book(b, 1, at("2030-01-01T00:00:00Z"));
    EXPECT_FALSE(r) << start;
    if (!r) {
      EXPECT_EQ(r.error().code, code) << start << ": " << r.error().detail;
    }
    if (r) return std::string();
    return r.error().issues.empty() ? r.error().detail : r.error().issues[0].msg;
  };
  EXPECT_NE(refused("2030-01-07T09:15:00Z", errc::conflict).find("taken"), std::string::npos);
  EXPECT_NE(refused("2030-01-07T08:45:00Z", errc::conflict).find("taken"), std::string::npos);
  EXPECT_NE(refused("2030-01-07T07:00:00Z", errc::conflict).find("outside"), std::string::npos);
  EXPECT_NE(refused("2030-01-07T11:45:00Z", errc::conflict).find("after working hours"),
            std::string::npos);
  EXPECT_NE(refused("2030-01-07T10:05:00Z", errc::validation).find("grid"), std::string::npos);
  EXPECT_NE(refused("2029-12-31T10:00:00Z", errc::conflict).find("past"), std::string::npos);
  // The slot right after it is free.
  booking ok{9, 5, 1, at("2030-01-07T09:30:00Z"), "", appointment_source::staff};
  EXPECT_TRUE(s.plan_book(ok, 1, 0));

  auto inactive = s;
  inactive.calendars[1].is_active = false;
  auto r = inactive.plan_book(ok, 1, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().detail, "the calendar is not active");
  auto other = s;
  other.services[5].calendar_ids.clear();
  r = other.plan_book(ok, 1, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().detail, "this calendar does not perform the service");
  booking nowhere{9, 6, 2, at("2030-01-07T09:30:00Z"), "", appointment_source::staff};
  r = s.plan_book(nowhere, 1, 0);
  ASSERT_FALSE(r);
  ASSERT_EQ(r.error().issues.size(), 2u);
  EXPECT_EQ(r.error().issues[0].loc, (std::vector<loc_part>{"body", "service_id"}));
  EXPECT_EQ(r.error().issues[1].loc, (std::vector<loc_part>{"body", "calendar_id"}));
}

TEST(booking, a_reschedule_counts_its_own_slot_free_and_frees_the_old_one) {
  auto s = clinic("UTC", 8 * 60, 12 * 60);
  s.put(booked(s, 100, "2030-01-07T09:00:00Z"));
  auto moved = s.plan_reschedule(100, at("2030-01-07T09:15:00Z"), std::nullopt, 0);
  ASSERT_TRUE(moved) << moved.error().detail;
  EXPECT_EQ(moved->end, at("2030-01-07T09:45:00Z"));
  s.put(*moved);
  EXPECT_TRUE(
      s.plan_book({9, 5, 1, at("2030-01-07T08:45:00Z"), "", appointment_source::staff}, 1, 0));
  EXPECT_FALSE(
      s.plan_book({9, 5, 1, at("2030-01-07T09:30:00Z"), "", appointment_source::staff}, 1, 0));
}

TEST(booking, statuses_move_along_their_rules) {
  using st = appointment_status;
  auto s = clinic("UTC", 8 * 60, 12 * 60);
  s.put(booked(s, 100, "2030-01-07T09:00:00Z"));
  auto before_start = at("2030-01-07T08:00:00Z");
  auto after_start = at("2030-01-07T09:10:00Z");
  auto to = [&](st target, std::int64_t now) { return s.plan_status(100, target, {}, now); };
  EXPECT_TRUE(to(st::confirmed, before_start));
  EXPECT_TRUE(to(st::arrived, before_start));
  EXPECT_FALSE(to(st::booked, before_start));
  EXPECT_FALSE(to(st::no_show, before_start));
  EXPECT_TRUE(to(st::no_show, after_start));
  s.put(*to(st::confirmed, before_start));
  EXPECT_FALSE(to(st::confirmed, before_start)) << "confirmed twice";
  s.put(*to(st::arrived, before_start));
  EXPECT_FALSE(to(st::no_show, after_start)) << "an arrived patient is no no-show";
  EXPECT_FALSE(s.plan_reschedule(100, at("2030-01-07T10:00:00Z"), std::nullopt, 0))
      << "an arrived appointment stays where it is";
  s.put(*to(st::completed, after_start));
  EXPECT_FALSE(to(st::cancelled, after_start));
  EXPECT_FALSE(s.plan_cancel(100, std::nullopt, appointment_source::staff, 0));
  // A completed appointment still holds its time.
  EXPECT_FALSE(
      s.plan_book({9, 5, 1, at("2030-01-07T09:00:00Z"), "", appointment_source::staff}, 1, 0));
}

TEST(booking, a_cancellation_frees_the_slot_and_a_contacts_deletion_its_appointments) {
  auto s = clinic("UTC", 8 * 60, 12 * 60);
  s.put(booked(s, 100, "2030-01-07T09:00:00Z", 9));
  s.put(booked(s, 101, "2030-01-07T10:00:00Z", 8));
  booking again{7, 5, 1, at("2030-01-07T09:00:00Z"), "", appointment_source::staff};
  EXPECT_FALSE(s.plan_book(again, 1, 0));
  auto cancelled = s.plan_cancel(100, "fever", appointment_source::staff, 0);
  ASSERT_TRUE(cancelled);
  EXPECT_EQ(cancelled->cancel_reason, "fever");
  s.put(*cancelled);
  EXPECT_TRUE(s.plan_book(again, 1, 0));
  EXPECT_FALSE(
      s.plan_book({7, 5, 1, at("2030-01-07T10:00:00Z"), "", appointment_source::staff}, 1, 0));
  s.forget_contact(8);
  EXPECT_TRUE(
      s.plan_book({7, 5, 1, at("2030-01-07T10:00:00Z"), "", appointment_source::staff}, 1, 0));
  EXPECT_FALSE(s.get_appointment(101));
  EXPECT_EQ(s.list_appointments({}, 1, 20).total, 1);
}

TEST(booking, lists_filter_by_calendar_contact_status_and_range_in_start_order) {
  auto s = clinic("UTC", 8 * 60, 12 * 60);
  s.put(booked(s, 102, "2030-01-07T11:00:00Z", 9));
  s.put(booked(s, 100, "2030-01-07T09:00:00Z", 9));
  s.put(booked(s, 101, "2030-01-07T10:00:00Z", 8));
  s.put(*s.plan_cancel(101, std::nullopt, appointment_source::staff, 0));
  auto ids = [&](appointment_query q, int page = 1, int per_page = 20) {
    std::vector<std::int64_t> out;
    for (auto& a : s.list_appointments(q, page, per_page).items) out.push_back(a.id);
    return out;
  };
  EXPECT_EQ(ids({}), (std::vector<std::int64_t>{100, 101, 102}));
  appointment_query of_contact;
  of_contact.contact_id = 9;
  EXPECT_EQ(ids(of_contact), (std::vector<std::int64_t>{100, 102}));
  appointment_query cancelled;
  cancelled.calendar_id = 1;
  cancelled.status = appointment_status::cancelled;
  EXPECT_EQ(ids(cancelled), (std::vector<std::int64_t>{101}));
  appointment_query range;
  range.from = at("2030-01-07T10:00:00Z");
  range.to = at("2030-01-07T11:00:00Z");
  EXPECT_EQ(ids(range), (std::vector<std::int64_t>{101}));
  EXPECT_EQ(ids({}, 2, 2), (std::vector<std::int64_t>{102}));
  appointment_query elsewhere;
  elsewhere.calendar_id = 2;
  EXPECT_EQ(ids(elsewhere), (std::vector<std::int64_t>{}));
}

// ---- reminders ---------------------------------------------------------------------------

namespace {

schedule_store reminding(std::vector<int> before_minutes) {
  auto s = clinic("America/Sao_Paulo", 0, 24 * 60, 5);
  auto v = *s.get_service(5);
  for (auto b : before_minutes) v.reminders.push_back({b, 3, "{{appointment.start_local}}", ""});
  s.put(v);
  return s;
}

} // namespace

TEST(reminders, come_due_at_start_minus_before_once_and_only_for_live_appointments) {
  auto s = reminding({1440, 60});
  auto a = booked(s, 1, "2030-01-07T15:00:00Z"); // 12:00 in São Paulo
  s.put(a);
  EXPECT_TRUE(s.due_reminders(at("2030-01-06T14:59:00Z")).empty());
  auto due = s.due_reminders(at("2030-01-06T15:00:00Z"));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].key, (reminder_key{1, 1440, a.start}));
  EXPECT_FALSE(due[0].superseded);
  EXPECT_EQ(due[0].start_local, "2030-01-07 12:00");
  EXPECT_EQ(due[0].service_name, "Check-up");
  EXPECT_EQ(due[0].calendar_name, "Dr. Ana");
  // Being sent, then sent: not due again.
  s.reminders_out.insert(due[0].key);
  EXPECT_TRUE(s.due_reminders(at("2030-01-06T16:00:00Z")).empty());
  s.reminders_out.clear();
  s.reminders_done.insert(due[0].key);
  EXPECT_EQ(s.due_reminders(at("2030-01-07T14:30:00Z")).size(), 1u); // the hour before
  // Once it has started, nothing; nor for a cancelled one.
  EXPECT_TRUE(s.due_reminders(at("2030-01-07T15:00:00Z")).empty());
  a.status = appointment_status::cancelled;
  s.put(a);
  EXPECT_TRUE(s.due_reminders(at("2030-01-07T14:30:00Z")).empty());
}

TEST(reminders, a_rescheduled_appointment_gets_new_keys) {
  auto s = reminding({1440});
  auto a = booked(s, 1, "2030-01-07T15:00:00Z");
  s.put(a);
  s.reminders_done.insert({1, 1440, a.start});
  a.start = at("2030-01-08T15:00:00Z");
  a.end = a.start + 30 * minute;
  a.blocked_until = a.end;
  s.put(a);
  auto due = s.due_reminders(at("2030-01-07T16:00:00Z"));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].key.start, a.start);
}

TEST(reminders, those_of_starts_gone_by_are_forgotten_once_a_minute) {
  auto s = reminding({1440, 60});
  auto a = booked(s, 1, "2030-01-07T15:00:00Z");
  auto b = booked(s, 2, "2030-01-08T15:00:00Z");
  s.reminders_done = {{1, 1440, a.start}, {1, 60, a.start}, {2, 1440, b.start}};
  s.forget_past_reminders(at("2030-01-07T14:59:45Z"));
  EXPECT_EQ(s.reminders_done.size(), 3u); // neither has started
  s.forget_past_reminders(at("2030-01-07T15:00:30Z"));
  EXPECT_EQ(s.reminders_done.size(), 3u); // swept less than a minute ago
  s.forget_past_reminders(at("2030-01-07T15:00:00Z") + 60 * minute);
  EXPECT_EQ(s.reminders_done, (std::set<reminder_key>{{2, 1440, b.start}}));
}

TEST(reminders, the_next_live_appointment_of_a_contact) {
  auto s = reminding({});
  auto first = booked(s, 1, "2030-01-07T15:00:00Z", 9);
  s.put(first);
  auto second = booked(s, 2, "2030-01-08T15:00:00Z", 9);
  s.put(second);
  EXPECT_EQ(s.next_live(9, at("2030-01-06T00:00:00Z"))->id, 1);
  EXPECT_EQ(s.next_live(9, at("2030-01-07T15:00:00Z"))->id, 2); // started: the next one
  first.status = appointment_status::cancelled;
  s.put(first);
  EXPECT_EQ(s.next_live(9, at("2030-01-06T00:00:00Z"))->id, 2);
  EXPECT_FALSE(s.next_live(8, at("2030-01-06T00:00:00Z")));
}

TEST(reminders, answers_are_read_in_the_patients_languages) {
  using ra = reminder_answer;
  for (auto yes : {"1", " Yes ", "sim", "SIM!", "Sí", "si", "confirm", "Confirmo."})
    EXPECT_EQ(read_reminder_answer(yes), ra::confirm) << yes;
  for (auto no : {"2", "no", "Não", "NÃO", "nao", "cancel", "Cancelar!"})
    EXPECT_EQ(read_reminder_answer(no), ra::cancel) << no;
  for (auto other : {"", "12", "yes please", "stop", "quero remarcar", "1 2"})
    EXPECT_EQ(read_reminder_answer(other), ra::none) << other;
  EXPECT_EQ(reminder_acknowledgement("sim", ra::confirm, "2030-01-07 12:00", true),
            "Obrigado! Sua consulta de 2030-01-07 12:00 está confirmada.");
  EXPECT_EQ(reminder_acknowledgement("2", ra::cancel, "2030-01-07 12:00", true),
            "Your appointment on 2030-01-07 12:00 is cancelled.");
  EXPECT_EQ(reminder_acknowledgement("1", ra::confirm, "", false),
            "We found no upcoming appointment to answer for.");
}

TEST(reminders, an_answer_confirms_or_cancels_the_next_live_appointment_once) {
  using step = answer_plan::step;
  auto s = reminding({});
  auto a = booked(s, 1, "2030-01-07T15:00:00Z", 9); // 12:00 in São Paulo
  s.put(a);
  auto now = at("2030-01-06T15:00:00Z");
  auto answer = [&](const char* text, std::int64_t contact = 9) {
    patient_answer m{101, contact, 7, 3, text, now};
    auto p = s.plan_answer(m, now + 1);
    EXPECT_TRUE(p) << (p ? "" : p.error().detail);
    return p ? *p : answer_plan{};
  };
  // A confirmation: the appointment confirmed by the patient, and the answer said after.
  auto yes = answer("Sim");
  ASSERT_EQ(yes.what, step::change);
  EXPECT_EQ(yes.change.id, 1);
  EXPECT_EQ(yes.change.status, appointment_status::confirmed);
  EXPECT_EQ(yes.change.source, appointment_source::patient_reply);
  EXPECT_EQ(yes.change.updated_at, now + 1);
  EXPECT_STREQ(yes.event, "appointment.confirmed");
  EXPECT_STREQ(yes.action, "update_appointment");
  EXPECT_EQ(yes.ack, "Obrigado! Sua consulta de 2030-01-07 12:00 está confirmada.");
  // Confirmed already: nothing changes, the patient is told all the same.
  s.put(yes.change);
  auto again = answer("1");
  EXPECT_EQ(again.what, step::settle);
  EXPECT_FALSE(again.ack.empty());
  // A cancellation cancels it, with why.
  auto no = answer("cancelar");
  ASSERT_EQ(no.what, step::change);
  EXPECT_EQ(no.change.status, appointment_status::cancelled);
  EXPECT_EQ(no.change.source, appointment_source::patient_reply);
  EXPECT_EQ(no.change.cancel_reason, "the patient answered the reminder");
  EXPECT_STREQ(no.event, "appointment.cancelled");
  EXPECT_STREQ(no.action, "cancel_appointment");
  // Anything else is an ordinary message: settled, nothing said.
  auto other = answer("can I come at 3?");
  EXPECT_EQ(other.what, step::settle);
  EXPECT_TRUE(other.ack.empty());
  // Nothing to answer for: a STOP word is the STOP it is everywhere else; a confirmation is
  // told there is nothing to confirm.
  EXPECT_EQ(answer("cancel", 8).what, step::stop);
  auto nothing = answer("yes", 8);
  EXPECT_EQ(nothing.what, step::settle);
  EXPECT_EQ(nothing.ack, "We found no upcoming appointment to answer for.");
  // The appointment answered for is the next live one when the answer came, not when its turn
  // runs: an answer that came once it had started answers for none.
  patient_answer late{102, 9, 7, 3, "2", at("2030-01-07T15:00:00Z")};
  auto too_late = s.plan_answer(late, now);
  ASSERT_TRUE(too_late);
  EXPECT_EQ(too_late->what, step::settle);
  EXPECT_EQ(too_late->ack, "We found no upcoming appointment to answer for.");
}

TEST(reminders, templates_name_the_appointment_the_patient_and_the_service) {
  reminder_values v{"2030-01-07 12:00", "Maria", "Check-up", "Dr. Ana"};
  EXPECT_EQ(render_reminder("Hi {{contact.first_name}}, {{ service.name }} at "
                            "{{appointment.start_local}} with {{calendar.name}}{{nope}}.",
                            v),
            "Hi Maria, Check-up at 2030-01-07 12:00 with Dr. Ana.");
  EXPECT_EQ(render_reminder("no template {{ unclosed", v), "no template {{ unclosed");
  EXPECT_EQ(local_time_text(at("2030-07-01T12:00:00Z"), "Europe/Lisbon"), "2030-07-01 13:00");
}

TEST(reminders, one_booked_after_its_time_is_due_at_once) {
  auto s = reminding({1440});
  booking b{9, 5, 1, at("2030-01-07T15:00:00Z"), "", appointment_source::staff};
  auto a = s.plan_book(b, 1, at("2030-01-07T12:00:00Z")); // three hours before
  ASSERT_TRUE(a);
  a->id = 1;
  s.put(*a);
  EXPECT_EQ(s.due_reminders(at("2030-01-07T12:00:01Z")).size(), 1u);
}

TEST(reminders, of_those_due_together_only_the_nearest_the_start_goes_out) {
  auto s = reminding({1440, 60});
  auto a = booked(s, 1, "2030-01-07T15:00:00Z");
  s.put(a);
  // Both due (a restart after the hour before): the 24-hour one is superseded, and stays so
  // whatever became of it.
  auto due = s.due_reminders(at("2030-01-07T14:30:00Z"));
  ASSERT_EQ(due.size(), 2u);
  for (auto& d : due) EXPECT_EQ(d.superseded, d.key.before_minutes == 1440);
  s.reminders_done.insert({1, 60, a.start});
  due = s.due_reminders(at("2030-01-07T14:31:00Z"));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_TRUE(due[0].superseded);
}

TEST(reminders, are_known_by_their_time_so_a_reordered_list_sends_none_twice) {
  auto s = reminding({1440});
  auto a = booked(s, 1, "2030-01-07T15:00:00Z");
  s.put(a);
  s.reminders_done.insert({1, 1440, a.start}); // sent
  auto v = *s.get_service(5);
  v.reminders.insert(v.reminders.begin(), {60, 3, "soon", ""});
  s.put(v);
  EXPECT_TRUE(s.due_reminders(at("2030-01-07T12:00:00Z")).empty());
  auto due = s.due_reminders(at("2030-01-07T14:00:00Z"));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].key.before_minutes, 60);
}

// ---- the calendar feed -----------------------------------------------------------------------

TEST(ical, text_is_escaped_and_lines_fold_at_75_octets_between_characters) {
  EXPECT_EQ(ical_text("a;b,c\\d\ne\r\nf\x01g"), "a\\;b\\,c\\\\d\\ne\\nfg");
  std::string out;
  std::string line = "SUMMARY:" + std::string(66, 'x') + "çççç"; // ç: two octets
  ical_line(out, line);
  // 74 octets fit, the next ç would make 76: it starts the continuation line.
  EXPECT_EQ(out, "SUMMARY:" + std::string(66, 'x') + "\r\n çççç\r\n");
  std::string unfolded;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out.compare(i, 3, "\r\n ") == 0) {
      i += 2;
      continue;
    }
    unfolded += out[i];
  }
  EXPECT_EQ(unfolded, line + "\r\n");
}

TEST(ical, a_feed_names_patients_only_when_given_their_names) {
  auto s = clinic("UTC", 0, 24 * 60);
  s.put(booked(s, 1, "2030-01-07T15:00:00Z", 9));
  auto views = s.views({});
  auto plain = calendar_feed(*s.get_calendar(1), views, {}, at("2030-01-01T00:00:00Z"));
  EXPECT_NE(plain.find("UID:appointment-1@carecrm\r\n"), std::string::npos);
  EXPECT_NE(plain.find("DTSTART:20300107T150000Z\r\n"), std::string::npos);
  EXPECT_NE(plain.find("SUMMARY:Check-up\r\n"), std::string::npos);
  EXPECT_NE(plain.find("STATUS:TENTATIVE\r\n"), std::string::npos);
  auto named = calendar_feed(*s.get_calendar(1), views, {{9, "Maria Silva"}}, 0);
  EXPECT_NE(named.find("SUMMARY:Check-up - Maria Silva\r\n"), std::string::npos);
  EXPECT_EQ(plain.find("Maria"), std::string::npos);
}

TEST(reminders, keep_a_whatsapp_template_beside_their_text) {
  std::vector<reminder_rule> rules{
      {1440, 3, "Olá {{contact.first_name}}",
       R"({"name":"lembrete","language":"pt_BR","parameters":["{{contact.first_name}}"]})"},
      {60, 4, "soon", ""}};
  auto text = boost::json::serialize(reminders_to_json(rules));
  auto back = parse_reminders_text(text);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back, rules);
  EXPECT_EQ(text.find("template", text.find("soon")), std::string::npos); // none without one
}
