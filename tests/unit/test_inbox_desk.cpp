// Unit tests for the front desk's rules (docs/channels.md "Canned responses", "Labels and
// priority", "Business hours"): when a channel is closed and since when (in its own time zone,
// across midnight and daylight-saving changes), one after-hours reply per closed period, the
// conversation list's filters, and canned responses with their placeholders and shortcodes.
#include "domain/channel.hpp"
#include "domain/clock.hpp"
#include "domain/contact.hpp"
#include "domain/inbox.hpp"
#include "domain/placeholders.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

std::int64_t at(const char* text) {
  auto t = parse_rfc3339(text);
  EXPECT_TRUE(t) << text;
  return t.value_or(0);
}

// Monday to Friday 08:00-12:00 and 13:00-18:00; Saturday 08:00-12:00.
working_week clinic_hours() {
  working_week w;
  for (int d = 0; d < 5; ++d) w[d] = {{8 * 60, 12 * 60}, {13 * 60, 18 * 60}};
  w[5] = {{8 * 60, 12 * 60}};
  return w;
}

} // namespace

TEST(business_hours, are_read_in_the_channels_own_time_zone) {
  auto w = clinic_hours();
  // Monday 2030-01-07, 10:00 in São Paulo is 13:00 UTC: open.
  EXPECT_EQ(closed_since(w, "America/Sao_Paulo", at("2030-01-07T13:00:00Z")), std::nullopt);
  // The same instant read in UTC is lunchtime: closed since 12:00 UTC.
  EXPECT_EQ(closed_since(w, "UTC", at("2030-01-07T12:30:00Z")), at("2030-01-07T12:00:00Z"));
  // Monday 19:00 in São Paulo (22:00 UTC): closed since 18:00 there.
  EXPECT_EQ(closed_since(w, "America/Sao_Paulo", at("2030-01-07T22:00:00Z")),
            at("2030-01-07T21:00:00Z"));
  // Sunday, and the night before Monday: one closed period since Saturday noon.
  EXPECT_EQ(closed_since(w, "America/Sao_Paulo", at("2030-01-13T15:00:00Z")),
            at("2030-01-12T15:00:00Z"));
  EXPECT_EQ(closed_since(w, "America/Sao_Paulo", at("2030-01-14T06:00:00Z")),
            at("2030-01-12T15:00:00Z"));
  // An unknown zone reads as UTC.
  EXPECT_EQ(closed_since(w, "Mars/Olympus", at("2030-01-07T12:30:00Z")),
            at("2030-01-07T12:00:00Z"));
}

TEST(business_hours, spans_that_touch_at_midnight_are_one_open_period) {
  working_week w;
  w[0] = {{20 * 60, 24 * 60}}; // Monday 20:00 to midnight
  w[1] = {{0, 8 * 60}};        // Tuesday midnight to 08:00
  EXPECT_EQ(closed_since(w, "UTC", at("2030-01-08T00:00:00Z")), std::nullopt);
  EXPECT_EQ(closed_since(w, "UTC", at("2030-01-07T23:59:59Z")), std::nullopt);
  EXPECT_EQ(closed_since(w, "UTC", at("2030-01-08T09:00:00Z")), at("2030-01-08T08:00:00Z"));
}

TEST(business_hours, follow_daylight_saving_changes) {
  working_week w;
  for (auto& d : w) d = {{9 * 60, 17 * 60}};
  // Lisbon: UTC+0 in winter, UTC+1 from 2030-03-31. 16:30 local is open both sides.
  EXPECT_EQ(closed_since(w, "Europe/Lisbon", at("2030-03-30T16:30:00Z")), std::nullopt);
  EXPECT_EQ(closed_since(w, "Europe/Lisbon", at("2030-03-31T15:30:00Z")), std::nullopt);
  // 16:30 UTC on 2030-03-31 is 17:30 local: closed since 17:00 local, 16:00 UTC.
  EXPECT_EQ(closed_since(w, "Europe/Lisbon", at("2030-03-31T16:30:00Z")),
            at("2030-03-31T16:00:00Z"));
}

TEST(business_hours, a_week_without_open_days_is_closed_since_ever) {
  EXPECT_EQ(closed_since(working_week{}, "UTC", at("2030-01-07T12:00:00Z")), 0);
}

TEST(after_hours_reply, is_due_once_per_conversation_per_closed_period) {
  channel ch;
  ch.business_hours = clinic_hours();
  ch.time_zone = "UTC";
  conversation c;
  // No reply text, or no hours: never.
  EXPECT_EQ(after_hours_period(ch, c, at("2030-01-07T20:00:00Z")), std::nullopt);
  ch.after_hours_reply = "We are closed.";
  EXPECT_EQ(after_hours_period(ch, c, at("2030-01-07T10:00:00Z")), std::nullopt); // open
  auto evening = after_hours_period(ch, c, at("2030-01-07T20:00:00Z"));
  EXPECT_EQ(evening, at("2030-01-07T18:00:00Z"));
  c.after_hours_for = evening;
  // Later the same night: the same period, no second reply.
  EXPECT_EQ(after_hours_period(ch, c, at("2030-01-08T06:00:00Z")), std::nullopt);
  // Lunch the next day is a new closed period.
  EXPECT_EQ(after_hours_period(ch, c, at("2030-01-08T12:30:00Z")), at("2030-01-08T12:00:00Z"));
  ch.business_hours.reset();
  EXPECT_EQ(after_hours_period(ch, c, at("2030-01-08T12:30:00Z")), std::nullopt);
}

TEST(conversation_query, every_filter_given_must_hold) {
  conversation c;
  c.id = 1;
  c.channel_id = 2;
  c.status = conversation_status::pending;
  c.labels = label_set({"lab results", "billing", "billing"});
  c.priority = conversation_priority::urgent;
  EXPECT_EQ(c.labels, (std::vector<std::string>{"billing", "lab results"}));
  conversation_query q;
  EXPECT_TRUE(q.matches(c));
  q.label = "billing";
  q.priority = conversation_priority::urgent;
  q.channel_id = 2;
  EXPECT_TRUE(q.matches(c));
  q.label = "bill";
  EXPECT_FALSE(q.matches(c));
  q.label.reset();
  q.priority = conversation_priority::low;
  EXPECT_FALSE(q.matches(c));
  q.priority.reset();
  q.status = conversation_status::open;
  EXPECT_FALSE(q.matches(c));
  EXPECT_EQ(parse_conversation_priority("asap"), std::nullopt);
  EXPECT_EQ(to_string(conversation_priority::medium), "medium");
}

TEST(canned_responses, fill_the_contacts_placeholders) {
  contact ana;
  ana.first_name = "Ana";
  ana.last_name = "Souza";
  ana.phone = "+5511999990000";
  EXPECT_EQ(
      fill_for_contact("Hi {{contact.first_name}} ({{ contact.full_name }}), {{contact.email}}"
                       "we call {{contact.phone}}.",
                       ana),
      "Hi Ana (Ana Souza), we call +5511999990000.");
  contact bo;
  bo.first_name = "Bo";
  EXPECT_EQ(fill_for_contact("{{contact.full_name}}{{contact.last_name}} {{", bo), "Bo {{");
  EXPECT_EQ(unknown_placeholders("{{contact.first_name}} {{contact.age}} {{ appointment.x }}"),
            (std::vector<std::string>{"contact.age", "appointment.x"}));
  EXPECT_TRUE(unknown_placeholders("no placeholders }} {{").empty());
  EXPECT_EQ(placeholder_names("{{a}}{{ b }}"), (std::vector<std::string>{"a", "b"}));
}

TEST(canned_responses, have_one_shortcode_each_and_are_found_by_its_start_or_a_word) {
  EXPECT_TRUE(is_shortcode("fasting_8h-adult"));
  EXPECT_FALSE(is_shortcode("Fasting"));
  EXPECT_FALSE(is_shortcode("two words"));
  EXPECT_FALSE(is_shortcode(""));
  EXPECT_FALSE(is_shortcode(std::string(33, 'a')));
  inbox_store s;
  canned_response r;
  r.shortcode = "fasting";
  r.text = "Please FAST for 8 hours.";
  auto made = s.plan_create_canned(r, 7, 1000);
  ASSERT_TRUE(made);
  EXPECT_EQ(made->tenant_id, 7);
  auto saved = *made;
  saved.id = 1;
  s.put_canned(saved);
  auto again = s.plan_create_canned(r, 7, 1001);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, errc::conflict);
  r.shortcode = "parking";
  r.text = "Parking is free.";
  auto second = *s.plan_create_canned(r, 7, 1002);
  second.id = 2;
  s.put_canned(second);
  canned_patch onto;
  onto.shortcode = "fasting";
  EXPECT_EQ(s.plan_update_canned(2, onto, 1003).error().code, errc::conflict);
  canned_patch same;
  same.shortcode = "parking";
  same.text = "Parking is free behind the clinic.";
  auto kept = s.plan_update_canned(2, same, 1003);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->text, "Parking is free behind the clinic.");
  EXPECT_EQ(s.plan_update_canned(9, same, 1003).error().code, errc::not_found);
  auto codes = [&](const std::string& q) {
    std::vector<std::string> out;
    for (auto& c : s.list_canned(q, 1, 20).items) out.push_back(c.shortcode);
    return out;
  };
  EXPECT_EQ(codes(""), (std::vector<std::string>{"fasting", "parking"}));
  EXPECT_EQ(codes("fast"), (std::vector<std::string>{"fasting"}));
  EXPECT_EQ(codes("free"), (std::vector<std::string>{"parking"}));
  EXPECT_EQ(codes("hours"), (std::vector<std::string>{"fasting"}));
  s.erase_canned(1);
  EXPECT_EQ(codes(""), (std::vector<std::string>{"parking"}));
}
