// Unit tests for domain/twilio (docs/channels.md "SMS"): the SMS channel's config, Twilio's
// request signature, an incoming message or status callback read from the form, the send, its
// answer's retry classes, and segment counting.
#include "domain/twilio.hpp"

#include "domain/crypto.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "issue_text.hpp"

using namespace crm::domain;
using crm::testing::described;
namespace tw = crm::domain::twilio;
namespace json = boost::json;

namespace {

constexpr std::string_view sid = "AC0123456789abcdef0123456789abcdef";

channel sms_channel() {
  channel c;
  c.id = 3;
  c.type = channel_type::sms;
  c.config = json::object{{"account_sid", sid},
                          {"from_number", "+15005550006"},
                          {"auth_token", "tw-auth-token"},
                          {"api_base_url", "http://127.0.0.1:9"}};
  return c;
}

} // namespace

TEST(sms_config, requires_the_account_number_and_token_and_checks_their_shape) {
  std::vector<issue> issues;
  EXPECT_FALSE(parse_channel_config(channel_type::sms, json::object(), nullptr, issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body/config/account_sid:missing",
                                                         "body/config/from_number:missing",
                                                         "body/config/auth_token:missing"}));
  issues.clear();
  EXPECT_FALSE(parse_channel_config(
      channel_type::sms,
      json::parse(R"({"account_sid":"AC12","from_number":"5550006","auth_token":"t","x":"1"})"),
      nullptr, issues));
  EXPECT_EQ(described(issues),
            (std::vector<std::string>{"body/config/x:extra_forbidden",
                                      "body/config/account_sid:value_error",
                                      "body/config/from_number:value_error.phone"}));
  issues.clear();
  auto ok =
      parse_channel_config(channel_type::sms, json::value(sms_channel().config), nullptr, issues);
  ASSERT_TRUE(ok);
  EXPECT_EQ(json::serialize(public_config(channel_type::sms, *ok)),
            R"({"account_sid":"AC0123456789abcdef0123456789abcdef","from_number":"+15005550006",)"
            R"("api_base_url":"http://127.0.0.1:9","has_auth_token":true})");
}

TEST(sms_signature, is_the_hmac_sha1_of_the_url_and_the_sorted_fields) {
  // Twilio's documented example (https://www.twilio.com/docs/usage/security).
  tw::form f = {{"CallSid", "CA1234567890ABCDE"},
                {"Caller", "+12349013030"},
                {"Digits", "1234"},
                {"From", "+12349013030"},
                {"To", "+18005551212"}};
  std::string url = "https://mycompany.com/myapp.php?foo=1&bar=2";
  EXPECT_EQ(tw::signature("12345", url, f), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=");
  // The order the fields came in does not matter; their values and the URL do.
  std::reverse(f.begin(), f.end());
  EXPECT_TRUE(tw::signature_matches("12345", url, f, "0/KCTR6DLpKmkAf8muzZqo1nDgQ="));
  EXPECT_FALSE(tw::signature_matches("12345", url + "&x=1", f, "0/KCTR6DLpKmkAf8muzZqo1nDgQ="));
  f[0].second = "+18005551213";
  EXPECT_FALSE(tw::signature_matches("12345", url, f, "0/KCTR6DLpKmkAf8muzZqo1nDgQ="));
  EXPECT_FALSE(tw::signature_matches("", url, f, tw::signature("", url, f)));
  EXPECT_FALSE(tw::signature_matches("12345", url, f, ""));
}

TEST(sms_webhook, an_incoming_message_with_media_reads_into_a_message) {
  std::vector<issue> issues;
  auto w = tw::parse_webhook({{"AccountSid", std::string(sid)},
                              {"MessageSid", "SM1"},
                              {"From", "+5511987654321"},
                              {"To", "+15005550006"},
                              {"Body", " Segue o exame "},
                              {"NumMedia", "1"},
                              {"MediaUrl0", "https://api.twilio.com/media/ME1"},
                              {"MediaContentType0", "image/jpeg"},
                              {"SmsStatus", "received"}},
                             sid, issues);
  ASSERT_TRUE(w) << described(issues).size();
  ASSERT_TRUE(w->message);
  EXPECT_FALSE(w->status);
  EXPECT_EQ(w->message->external_message_id, "SM1");
  EXPECT_EQ(w->message->contact.phone, "+5511987654321");
  EXPECT_EQ(w->message->contact.external_id, "+5511987654321");
  EXPECT_EQ(w->message->text, "Segue o exame [media image/jpeg https://api.twilio.com/media/ME1]");
}

TEST(sms_webhook, a_status_callback_reads_into_a_delivery_report) {
  std::vector<issue> issues;
  auto delivered = tw::parse_webhook(
      {{"AccountSid", std::string(sid)}, {"MessageSid", "SM9"}, {"MessageStatus", "delivered"}},
      sid, issues);
  ASSERT_TRUE(delivered && delivered->status);
  EXPECT_EQ(delivered->status->provider_message_id, "SM9");
  EXPECT_EQ(delivered->status->status, delivery::delivered);
  auto failed = tw::parse_webhook({{"AccountSid", std::string(sid)},
                                   {"MessageSid", "SM9"},
                                   {"MessageStatus", "undelivered"},
                                   {"ErrorCode", "30003"}},
                                  sid, issues);
  ASSERT_TRUE(failed && failed->status);
  EXPECT_EQ(failed->status->status, delivery::failed);
  EXPECT_EQ(failed->status->error, "twilio: undelivered 30003");
  // Twilio's own queue says nothing carecrm shows.
  auto sending = tw::parse_webhook(
      {{"AccountSid", std::string(sid)}, {"MessageSid", "SM9"}, {"MessageStatus", "sending"}}, sid,
      issues);
  ASSERT_TRUE(sending);
  EXPECT_FALSE(sending->status);
  EXPECT_FALSE(sending->message);
  EXPECT_TRUE(issues.empty());
}

TEST(sms_webhook, another_account_or_missing_fields_are_issues) {
  std::vector<issue> issues;
  EXPECT_FALSE(tw::parse_webhook({{"AccountSid", "ACffffffffffffffffffffffffffffffff"},
                                  {"MessageSid", "SM1"},
                                  {"From", "+15551234567"}},
                                 sid, issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body/AccountSid:value_error"}));
  issues.clear();
  EXPECT_FALSE(
      tw::parse_webhook({{"AccountSid", std::string(sid)}, {"From", "nope"}}, sid, issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body/MessageSid:missing"}));
  issues.clear();
  EXPECT_FALSE(tw::parse_webhook(
      {{"AccountSid", std::string(sid)}, {"MessageSid", "SM1"}, {"From", "nope"}}, sid, issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body/From:value_error.phone"}));
}

TEST(sms_send, posts_a_form_with_basic_auth_and_the_status_callback) {
  outbound_message m;
  m.text = "Olá & até amanhã";
  m.phone = "+5511987654321";
  m.callback_url = "https://crm.example/api/v1/channels/3/sms/webhook";
  m.message_id = 42;
  auto plan = plan_outbound(sms_channel(), m, 0);
  ASSERT_TRUE(plan.request) << plan.error;
  EXPECT_EQ(plan.request->url,
            "http://127.0.0.1:9/2010-04-01/Accounts/AC0123456789abcdef0123456789abcdef/"
            "Messages.json");
  EXPECT_EQ(plan.request->body,
            "To=%2B5511987654321&From=%2B15005550006&Body=Ol%C3%A1+%26+at%C3%A9+amanh%C3%A3&"
            "StatusCallback=https%3A%2F%2Fcrm.example%2Fapi%2Fv1%2Fchannels%2F3%2Fsms%2Fwebhook%3F"
            "message%3D42");
  // Its status callbacks name the message by carecrm's id (a send whose outcome was lost).
  EXPECT_EQ(tw::status_callback_ref("/api/v1/channels/3/sms/webhook?message=42"), 42);
  EXPECT_EQ(tw::status_callback_ref("/api/v1/channels/3/sms/webhook?a=1&message=7"), 7);
  EXPECT_EQ(tw::status_callback_ref("/api/v1/channels/3/sms/webhook"), std::nullopt);
  EXPECT_EQ(tw::status_callback_ref("/x?message=4x"), std::nullopt);
  EXPECT_EQ(tw::status_callback_ref("/x?message=&message=5"), std::nullopt);
  std::string auth;
  for (auto& [k, v] : plan.request->headers)
    if (k == "authorization") auth = v;
  EXPECT_EQ(auth, "Basic " + base64_encode(std::string(sid) + ":tw-auth-token"));
  m.phone.reset();
  EXPECT_EQ(plan_outbound(sms_channel(), m, 0).error, "the contact has no phone number");
  EXPECT_EQ(cannot_write_first(sms_channel(), {}), std::nullopt);
}

TEST(sms_send, answers_read_as_sent_or_a_failure_that_may_or_may_not_be_retried) {
  auto ok = tw::read_send_response(201, R"({"sid":"SMabc","status":"queued","num_segments":"1"})");
  EXPECT_TRUE(ok.sent);
  EXPECT_EQ(ok.provider_message_id, "SMabc");
  auto bad = tw::read_send_response(
      400,
      R"({"code":21211,"message":"The 'To' number is not a valid phone number.","status":400})");
  EXPECT_FALSE(bad.sent);
  EXPECT_FALSE(bad.retry);
  EXPECT_EQ(bad.error, "twilio: 21211 The 'To' number is not a valid phone number.");
  EXPECT_TRUE(tw::read_send_response(429, R"({"code":20429,"message":"Too Many Requests"})").retry);
  EXPECT_TRUE(tw::read_send_response(503, "").retry);
}

TEST(sms_segments, gsm7_or_ucs2_as_the_text_needs) {
  EXPECT_EQ(tw::count_segments(std::string(160, 'a')).count, 1);
  EXPECT_EQ(tw::count_segments(std::string(161, 'a')).count, 2);
  EXPECT_EQ(tw::count_segments(std::string(306, 'a')).count, 2);
  EXPECT_EQ(tw::count_segments(std::string(307, 'a')).count, 3);
  EXPECT_FALSE(tw::count_segments("Até às 10h: Ñ ü è É").unicode);
  // The extension table's characters take two septets: 80 of them fill one segment.
  std::string euros;
  for (int i = 0; i < 80; ++i) euros += "€";
  EXPECT_EQ(tw::count_segments(euros).count, 1);
  EXPECT_EQ(tw::count_segments(euros + "a").count, 2);
  // One character outside GSM-7 (ã, an emoji) makes the whole text UCS-2.
  auto s = tw::count_segments("Confirmação");
  EXPECT_TRUE(s.unicode);
  EXPECT_EQ(s.count, 1);
  std::string long_ucs(69, 'a');
  long_ucs += "ã";
  EXPECT_EQ(tw::count_segments(long_ucs).count, 1);
  EXPECT_EQ(tw::count_segments(long_ucs + "b").count, 2);
  // An emoji is two UTF-16 units.
  std::string emoji(68, 'a');
  emoji += "😀";
  EXPECT_EQ(tw::count_segments(emoji).count, 1);
  EXPECT_EQ(tw::count_segments(emoji + "b").count, 2);
}
