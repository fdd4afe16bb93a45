// Unit tests for domain/channel: channel config per type (secrets write-only and kept across
// updates), the inbound api body and Telegram Update into 422 issues, names, and the provider
// adapters' requests and how their answers read (docs/channels.md).
#include "domain/channel.hpp"
#include "domain/messaging.hpp"

#include "domain/clock.hpp"
#include "domain/workflow.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "issue_text.hpp"

using namespace crm::domain;
using crm::testing::described;
namespace json = boost::json;

namespace {

json::value js(std::string_view text) {
  return json::parse(text);
}

json::object obj(std::string_view text) {
  return json::parse(text).as_object();
}

using strings = std::vector<std::string>;

std::vector<std::string> config_issues(channel_type t, std::string_view text,
                                       const json::object* previous = nullptr) {
  std::vector<issue> issues;
  auto r = parse_channel_config(t, js(text), previous, issues);
  EXPECT_EQ(r.has_value(), issues.empty());
  return described(issues);
}

json::object config_ok(channel_type t, std::string_view text,
                       const json::object* previous = nullptr) {
  std::vector<issue> issues;
  auto r = parse_channel_config(t, js(text), previous, issues);
  EXPECT_TRUE(r.has_value()) << testing::PrintToString(described(issues));
  return r ? *r : json::object{};
}

std::vector<std::string> inbound_issues(std::string_view body) {
  std::vector<issue> issues;
  auto r = parse_api_inbound(body, issues);
  EXPECT_EQ(r.has_value(), issues.empty());
  return described(issues);
}

inbound_message inbound_ok(std::string_view body) {
  std::vector<issue> issues;
  auto r = parse_api_inbound(body, issues);
  EXPECT_TRUE(r.has_value()) << testing::PrintToString(described(issues));
  return r ? *r : inbound_message{};
}

constexpr std::string_view token = "123456:ABCdefGHIjklMNOpqrSTUvwx-_yz";

} // namespace

// ---- Names ---------------------------------------------------------------------------------

TEST(channel_names, round_trip_every_type_and_status) {
  for (auto t : {channel_type::api, channel_type::telegram, channel_type::whatsapp,
                 channel_type::sms, channel_type::email})
    EXPECT_EQ(parse_channel_type(to_string(t)), t);
  for (auto s :
       {conversation_status::open, conversation_status::pending, conversation_status::closed})
    EXPECT_EQ(parse_conversation_status(to_string(s)), s);
  EXPECT_EQ(parse_channel_type("Telegram"), std::nullopt);
  EXPECT_EQ(parse_conversation_status("archived"), std::nullopt);
}

// ---- Config: api -----------------------------------------------------------------------------

TEST(channel_config, api_accepts_an_outbound_url_and_a_signing_secret) {
  auto c = config_ok(channel_type::api,
                     R"({"outbound_url":"https://hooks.example.com/in","signing_secret":)"
                     R"("0123456789abcdef"})");
  EXPECT_EQ(
      json::serialize(c),
      R"({"outbound_url":"https://hooks.example.com/in","signing_secret":"0123456789abcdef"})");
}

TEST(channel_config, api_config_may_be_empty_or_null) {
  EXPECT_TRUE(config_ok(channel_type::api, "{}").empty());
  EXPECT_TRUE(config_ok(channel_type::api, "null").empty());
}

TEST(channel_config, api_rejects_bad_url_short_secret_and_unknown_keys_together) {
  EXPECT_EQ(config_issues(channel_type::api,
                          R"({"outbound_url":"ftp://x.example","signing_secret":"short",)"
                          R"("retries":3})"),
            (strings{"body/config/retries:extra_forbidden", "body/config/outbound_url:value_error",
                     "body/config/signing_secret:string_too_short"}));
  EXPECT_EQ(config_issues(channel_type::api, R"({"outbound_url":5})"),
            (strings{"body/config/outbound_url:string_type"}));
  EXPECT_EQ(
      config_issues(channel_type::api, R"({"signing_secret":")" + std::string(257, 'x') + R"("})"),
      (strings{"body/config/signing_secret:string_too_long"}));
}

TEST(channel_config, a_config_that_is_not_an_object_is_one_issue) {
  std::vector<issue> issues;
  EXPECT_FALSE(parse_channel_config(channel_type::api, js("[1]"), nullptr, issues));
  ASSERT_EQ(described(issues), (strings{"body/config:value_error"}));
  EXPECT_EQ(issues[0].msg, "Input should be a valid dictionary");
  EXPECT_EQ(config_issues(channel_type::email, R"("x")"), (strings{"body/config:value_error"}));
}

// ---- Config: telegram ----------------------------------------------------------------------

TEST(channel_config, telegram_requires_a_bot_token_on_create) {
  EXPECT_EQ(config_issues(channel_type::telegram, "{}"),
            (strings{"body/config/bot_token:missing"}));
  EXPECT_EQ(config_issues(channel_type::telegram, "null"),
            (strings{"body/config/bot_token:missing"}));
  EXPECT_EQ(config_issues(channel_type::telegram, R"({"bot_token":null})"),
            (strings{"body/config/bot_token:missing"}));
}

TEST(channel_config, telegram_bot_token_must_have_the_botfather_shape) {
  std::vector<issue> issues;
  EXPECT_FALSE(
      parse_channel_config(channel_type::telegram, js(R"({"bot_token":"abc"})"), nullptr, issues));
  ASSERT_EQ(described(issues), (strings{"body/config/bot_token:value_error"}));
  EXPECT_EQ(issues[0].msg, "bot_token must look like 123456:ABC-...");
  for (auto bad :
       {":ABCdefGHIjklMNOpqrSTUvwx", "12a:ABCdefGHIjklMNOpqrSTUvwx", "123:ABCdefGHIjklMNOpqrS",
        "123:ABCdefGHIjklMNOpqrSTU vwx", "123ABCdefGHIjklMNOpqrSTUvwx"})
    EXPECT_EQ(
        config_issues(channel_type::telegram, std::string(R"({"bot_token":")") + bad + R"("})"),
        (strings{"body/config/bot_token:value_error"}))
        << bad;
  EXPECT_EQ(config_issues(channel_type::telegram, R"({"bot_token":123})"),
            (strings{"body/config/bot_token:string_type"}));
  // Exactly 20 characters after the colon is enough.
  config_ok(channel_type::telegram, R"({"bot_token":"1:abcdefghij-_KLMNOPQR"})");
}

TEST(channel_config, telegram_accepts_an_api_base_url_and_rejects_unknown_keys) {
  auto c = config_ok(channel_type::telegram, std::string(R"({"bot_token":")") + std::string(token) +
                                                 R"(","api_base_url":"http://127.0.0.1:8081"})");
  EXPECT_EQ(c.at("api_base_url"), "http://127.0.0.1:8081");
  EXPECT_EQ(c.at("bot_token").as_string(), token);
  EXPECT_EQ(
      config_issues(channel_type::telegram, std::string(R"({"bot_token":")") + std::string(token) +
                                                R"(","api_base_url":"api.telegram.org","chat":1})"),
      (strings{"body/config/chat:extra_forbidden", "body/config/api_base_url:value_error"}));
  // Paths are appended to the base: a query would land in the middle.
  EXPECT_EQ(
      config_issues(channel_type::telegram, std::string(R"({"bot_token":")") + std::string(token) +
                                                R"(","api_base_url":"https://t.example/?a=1"})"),
      (strings{"body/config/api_base_url:value_error"}));
}

TEST(channel_config, telegram_update_keeps_the_stored_bot_token_when_not_sent) {
  auto previous = obj(std::string(R"({"bot_token":")") + std::string(token) +
                      R"(","api_base_url":"https://tg.example"})");
  auto c = config_ok(channel_type::telegram, R"({"api_base_url":"https://tg.example"})", &previous);
  EXPECT_EQ(c.at("bot_token").as_string(), token);
  EXPECT_EQ(c.at("api_base_url"), "https://tg.example");
  // Back to Telegram's own address: the token may stay.
  c = config_ok(channel_type::telegram, "{}", &previous);
  EXPECT_EQ(c.at("bot_token").as_string(), token);
}

TEST(channel_config, a_new_address_needs_the_secrets_sent_again) {
  // The bot token travels to api_base_url: a kept token must not follow it to a new address.
  auto previous = obj(std::string(R"({"bot_token":")") + std::string(token) + R"("})");
  EXPECT_EQ(config_issues(channel_type::telegram, R"({"api_base_url":"https://evil.example"})",
                          &previous),
            (strings{"body/config/bot_token:missing"}));
  auto moved = config_ok(channel_type::telegram,
                         std::string(R"({"api_base_url":"https://tg2.example","bot_token":")") +
                             std::string(token) + R"("})",
                         &previous);
  EXPECT_EQ(moved.at("api_base_url"), "https://tg2.example");
  // Every provider's: a Twilio auth token does not follow a new api_base_url either.
  auto sms = obj(R"({"account_sid":"AC0123456789abcdef0123456789abcdef",
                     "from_number":"+15005550006","api_base_url":"https://a.example",
                     "auth_token":"t0k3n"})");
  auto same = std::string(R"({"account_sid":"AC0123456789abcdef0123456789abcdef",)"
                          R"("from_number":"+15005550006","api_base_url":)");
  EXPECT_EQ(config_issues(channel_type::sms, same + R"("https://b.example"})", &sms),
            (strings{"body/config/auth_token:missing"}));
  auto kept = config_ok(channel_type::sms, same + R"("https://a.example"})", &sms);
  EXPECT_EQ(kept.at("auth_token"), "t0k3n");
  // An api channel's signing secret is never sent anywhere: its outbound_url may change.
  auto api = obj(R"({"outbound_url":"https://a.example","signing_secret":"0123456789abcdef"})");
  auto api_moved = config_ok(channel_type::api, R"({"outbound_url":"https://b.example"})", &api);
  EXPECT_EQ(api_moved.at("signing_secret"), "0123456789abcdef");
}

TEST(channel_config, telegram_update_requires_a_bot_token_when_none_is_stored) {
  auto previous = obj(R"({"api_base_url":"https://tg.example"})");
  EXPECT_EQ(config_issues(channel_type::telegram, "{}", &previous),
            (strings{"body/config/bot_token:missing"}));
}

TEST(channel_config, telegram_bot_token_sent_as_null_on_update_is_missing) {
  // Null removes a secret, and a telegram channel cannot be without its token.
  auto previous = obj(std::string(R"({"bot_token":")") + std::string(token) + R"("})");
  EXPECT_EQ(config_issues(channel_type::telegram, R"({"bot_token":null})", &previous),
            (strings{"body/config/bot_token:missing"}));
}

// ---- Config: secrets across updates ----------------------------------------------------------

TEST(channel_config, update_replaces_the_config_but_keeps_secrets_not_sent) {
  auto previous =
      obj(R"({"outbound_url":"https://old.example/in","signing_secret":"0123456789abcdef"})");
  auto c = config_ok(channel_type::api, R"({"outbound_url":"https://new.example/in"})", &previous);
  EXPECT_EQ(json::serialize(c),
            R"({"outbound_url":"https://new.example/in","signing_secret":"0123456789abcdef"})");
  // Non-secret keys not sent are gone: the new config replaces the old one.
  auto emptied = config_ok(channel_type::api, "{}", &previous);
  EXPECT_EQ(json::serialize(emptied), R"({"signing_secret":"0123456789abcdef"})");
}

TEST(channel_config, a_secret_sent_as_null_is_removed) {
  auto previous =
      obj(R"({"outbound_url":"https://old.example/in","signing_secret":"0123456789abcdef"})");
  auto c =
      config_ok(channel_type::api,
                R"({"outbound_url":"https://old.example/in","signing_secret":null})", &previous);
  EXPECT_FALSE(c.contains("signing_secret"));
  EXPECT_EQ(c.at("outbound_url"), "https://old.example/in");
}

TEST(channel_config, a_secret_sent_again_replaces_the_stored_one) {
  auto previous = obj(R"({"signing_secret":"0123456789abcdef"})");
  auto c = config_ok(channel_type::api, R"({"signing_secret":"fedcba9876543210"})", &previous);
  EXPECT_EQ(c.at("signing_secret"), "fedcba9876543210");
}

TEST(channel_config, secret_keys_by_type) {
  EXPECT_TRUE(is_secret_config_key(channel_type::api, "signing_secret"));
  EXPECT_FALSE(is_secret_config_key(channel_type::api, "outbound_url"));
  EXPECT_TRUE(is_secret_config_key(channel_type::telegram, "bot_token"));
  EXPECT_FALSE(is_secret_config_key(channel_type::telegram, "api_base_url"));
  for (auto k : {"smtp_password", "inbound_signing_key"})
    EXPECT_TRUE(is_secret_config_key(channel_type::email, k)) << k;
  for (auto k : {"smtp_host", "smtp_username", "from_address", "subject"})
    EXPECT_FALSE(is_secret_config_key(channel_type::email, k)) << k;
  EXPECT_TRUE(is_secret_config_key(channel_type::sms, "auth_token"));
  for (auto k : {"account_sid", "from_number", "api_base_url"})
    EXPECT_FALSE(is_secret_config_key(channel_type::sms, k)) << k;
  for (auto k : {"access_token", "app_secret", "verify_token"})
    EXPECT_TRUE(is_secret_config_key(channel_type::whatsapp, k)) << k;
  for (auto k : {"phone_number_id", "business_account_id", "api_base_url", "api_version"})
    EXPECT_FALSE(is_secret_config_key(channel_type::whatsapp, k)) << k;
  for (auto k : {"phone_number_id", "from", "host"})
    EXPECT_FALSE(is_secret_config_key(channel_type::email, k)) << k;
}

// ---- public_config -------------------------------------------------------------------------

TEST(public_config, hides_the_api_signing_secret) {
  auto shown = public_config(
      channel_type::api,
      obj(R"({"outbound_url":"https://x.example/in","signing_secret":"0123456789abcdef"})"));
  EXPECT_EQ(json::serialize(shown),
            R"({"outbound_url":"https://x.example/in","has_signing_secret":true})");
  EXPECT_EQ(json::serialize(public_config(channel_type::api, {})),
            R"({"has_signing_secret":false})");
}

TEST(public_config, hides_the_telegram_bot_token) {
  auto shown = public_config(channel_type::telegram,
                             obj(std::string(R"({"bot_token":")") + std::string(token) + R"("})"));
  EXPECT_EQ(json::serialize(shown), R"({"has_bot_token":true})");
  EXPECT_EQ(json::serialize(public_config(channel_type::telegram,
                                          obj(R"({"api_base_url":"https://tg.example"})"))),
            R"({"api_base_url":"https://tg.example","has_bot_token":false})");
}

TEST(public_config, email_shows_has_flags_for_its_secrets) {
  auto shown = public_config(channel_type::email,
                             obj(R"({"smtp_host":"smtp.example","from_address":"a@b.example",
                                     "smtp_password":"pw-secret"})"));
  EXPECT_EQ(json::serialize(shown), R"({"smtp_host":"smtp.example","from_address":"a@b.example",)"
                                    R"("has_smtp_password":true,"has_inbound_signing_key":false})");
  EXPECT_EQ(json::serialize(shown).find("pw-secret"), std::string::npos);
}

// ---- Inbound: the generic api body ---------------------------------------------------------

TEST(api_inbound, reads_a_full_message) {
  auto m = inbound_ok(
      R"({"event":"message.received","contact":{"phone":"+15551234567","email":"Ada@Example.com",)"
      R"("name":"  Ada Lovelace ","external_id":"u-1"},"message":{"text":"  hello\n",)"
      R"("external_message_id":"m-1"},"timestamp":"2026-11-21T10:15:30Z"})");
  EXPECT_EQ(m.contact.phone, "+15551234567");
  EXPECT_EQ(m.contact.email, "Ada@Example.com");
  EXPECT_EQ(m.contact.name, "Ada Lovelace");
  EXPECT_EQ(m.contact.external_id, "u-1");
  EXPECT_EQ(m.text, "  hello\n"); // kept as sent
  EXPECT_EQ(m.external_message_id, "m-1");
  EXPECT_EQ(m.timestamp, *parse_rfc3339("2026-11-21T10:15:30Z"));
}

TEST(api_inbound, event_and_timestamp_are_optional) {
  auto m = inbound_ok(R"({"contact":{"email":"a@example.com"},"message":{"text":"hi",)"
                      R"("external_message_id":"1"}})");
  EXPECT_EQ(m.timestamp, 0);
  EXPECT_EQ(m.contact.phone, std::nullopt);
  EXPECT_EQ(m.contact.external_id, std::nullopt);
  inbound_ok(R"({"event":null,"timestamp":null,"contact":{"email":"a@example.com"},)"
             R"("message":{"text":"hi","external_message_id":"1"}})");
}

TEST(api_inbound, integer_ids_become_their_decimal_text) {
  auto m = inbound_ok(R"({"contact":{"external_id":9007199254740993},)"
                      R"("message":{"text":"hi","external_message_id":-42}})");
  EXPECT_EQ(m.contact.external_id, "9007199254740993");
  EXPECT_EQ(m.external_message_id, "-42");
  auto big = inbound_ok(R"({"contact":{"external_id":18446744073709551615},)"
                        R"("message":{"text":"hi","external_message_id":1}})");
  EXPECT_EQ(big.contact.external_id, "18446744073709551615");
}

TEST(api_inbound, a_blank_name_counts_as_no_name) {
  auto m = inbound_ok(R"({"contact":{"phone":"+15551234567","name":"   "},)"
                      R"("message":{"text":"hi","external_message_id":"1"}})");
  EXPECT_EQ(m.contact.name, std::nullopt);
}

TEST(api_inbound, rejects_text_that_is_not_a_json_object) {
  std::vector<issue> issues;
  EXPECT_FALSE(parse_api_inbound("{nope", issues));
  ASSERT_EQ(described(issues), (strings{"body:json_invalid"}));
  EXPECT_EQ(issues[0].msg, "JSON decode error");
  issues.clear();
  EXPECT_FALSE(parse_api_inbound("[1,2]", issues));
  ASSERT_EQ(described(issues), (strings{"body:json_invalid"}));
  EXPECT_EQ(issues[0].msg, "Input should be a valid dictionary");
  EXPECT_EQ(inbound_issues(""), (strings{"body:json_invalid"}));
}

TEST(api_inbound, contact_and_message_are_required) {
  EXPECT_EQ(inbound_issues("{}"), (strings{"body/contact:missing", "body/message:missing"}));
  EXPECT_EQ(inbound_issues(R"({"contact":null,"message":[]})"),
            (strings{"body/contact:value_error", "body/message:value_error"}));
  EXPECT_EQ(inbound_issues(R"({"contact":{"phone":"+15551234567"},"message":{}})"),
            (strings{"body/message/text:missing", "body/message/external_message_id:missing"}));
}

TEST(api_inbound, event_other_than_message_received_is_an_enum_issue) {
  std::vector<issue> issues;
  EXPECT_FALSE(parse_api_inbound(R"({"event":"message.sent","contact":{"phone":"+15551234567"},)"
                                 R"("message":{"text":"hi","external_message_id":"1"}})",
                                 issues));
  ASSERT_EQ(described(issues), (strings{"body/event:enum"}));
  EXPECT_EQ(issues[0].msg, "Input should be 'message.received'");
  EXPECT_EQ(inbound_issues(R"({"event":1,"contact":{"phone":"+15551234567"},)"
                           R"("message":{"text":"hi","external_message_id":"1"}})"),
            (strings{"body/event:enum"}));
}

TEST(api_inbound, the_contact_needs_a_phone_an_email_or_an_external_id) {
  std::vector<issue> issues;
  EXPECT_FALSE(parse_api_inbound(
      R"({"contact":{"name":"Ada"},"message":{"text":"hi","external_message_id":"1"}})", issues));
  ASSERT_EQ(described(issues), (strings{"body/contact:value_error"}));
  EXPECT_EQ(issues[0].msg, "the contact needs a phone, an email or an external_id");
  EXPECT_EQ(inbound_issues(R"({"contact":{"phone":null,"email":null},)"
                           R"("message":{"text":"hi","external_message_id":"1"}})"),
            (strings{"body/contact:value_error"}));
  inbound_ok(
      R"({"contact":{"external_id":"x"},"message":{"text":"hi","external_message_id":"1"}})");
}

TEST(api_inbound, phone_must_be_e164_and_email_valid) {
  std::vector<issue> issues;
  EXPECT_FALSE(parse_api_inbound(R"({"contact":{"phone":"555-1234","email":"not-an-email"},)"
                                 R"("message":{"text":"hi","external_message_id":"1"}})",
                                 issues));
  ASSERT_EQ(described(issues), (strings{"body/contact/phone:value_error.phone",
                                        "body/contact/email:value_error.email"}));
  EXPECT_EQ(issues[0].msg, "value is not a valid E.164 phone number");
  EXPECT_EQ(issues[1].msg, "value is not a valid email address");
  EXPECT_EQ(inbound_issues(R"({"contact":{"phone":15551234567},)"
                           R"("message":{"text":"hi","external_message_id":"1"}})"),
            (strings{"body/contact/phone:string_type"}));
}

TEST(api_inbound, contact_field_lengths) {
  EXPECT_EQ(inbound_issues(std::string(R"({"contact":{"phone":"+15551234567","name":")") +
                           std::string(201, 'a') +
                           R"("},"message":{"text":"hi","external_message_id":"1"}})"),
            (strings{"body/contact/name:string_too_long"}));
  EXPECT_EQ(inbound_issues(std::string(R"({"contact":{"external_id":")") + std::string(201, 'a') +
                           R"("},"message":{"text":"hi","external_message_id":"1"}})"),
            (strings{"body/contact/external_id:string_too_long"}));
  EXPECT_EQ(inbound_issues(R"({"contact":{"external_id":""},)"
                           R"("message":{"text":"hi","external_message_id":"1"}})"),
            (strings{"body/contact/external_id:string_too_short"}));
  EXPECT_EQ(inbound_issues(R"({"contact":{"external_id":true},)"
                           R"("message":{"text":"hi","external_message_id":"1"}})"),
            (strings{"body/contact/external_id:string_type"}));
  // Characters, not bytes: 200 two-byte characters fit.
  std::string name;
  for (int i = 0; i < 200; ++i) name += "\xC3\xA9";
  inbound_ok(R"({"contact":{"phone":"+15551234567","name":")" + name +
             R"("},"message":{"text":"hi","external_message_id":"1"}})");
}

TEST(api_inbound, message_text_is_1_to_4096_characters_and_not_blank) {
  auto body = [](std::string text) {
    return R"({"contact":{"phone":"+15551234567"},"message":{"text":")" + text +
           R"(","external_message_id":"1"}})";
  };
  EXPECT_EQ(inbound_issues(body("")), (strings{"body/message/text:string_too_short"}));
  EXPECT_EQ(inbound_issues(body(" \\n\\t ")), (strings{"body/message/text:string_too_short"}));
  EXPECT_EQ(inbound_issues(body(std::string(4097, 'a'))),
            (strings{"body/message/text:string_too_long"}));
  EXPECT_EQ(inbound_ok(body(std::string(4096, 'a'))).text.size(), 4096u);
  EXPECT_EQ(inbound_issues(R"({"contact":{"phone":"+15551234567"},"message":{"text":5,)"
                           R"("external_message_id":""}})"),
            (strings{"body/message/text:string_type",
                     "body/message/external_message_id:string_too_short"}));
}

TEST(api_inbound, timestamp_must_be_rfc3339) {
  auto body = [](std::string ts) {
    return R"({"contact":{"phone":"+15551234567"},"message":{"text":"hi",)"
           R"("external_message_id":"1"},"timestamp":)" +
           ts + "}";
  };
  EXPECT_EQ(inbound_issues(body(R"("yesterday")")), (strings{"body/timestamp:value_error"}));
  EXPECT_EQ(inbound_issues(body("1700000000")), (strings{"body/timestamp:value_error"}));
  EXPECT_EQ(inbound_ok(body(R"("2026-11-21T10:15:30.5+01:00")")).timestamp,
            *parse_rfc3339("2026-11-21T09:15:30.5Z"));
}

TEST(api_inbound, unknown_keys_are_forbidden_at_every_level) {
  EXPECT_EQ(inbound_issues(R"({"contact":{"phone":"+15551234567","age":3},)"
                           R"("message":{"text":"hi","external_message_id":"1","html":"<b>"},)"
                           R"("channel":"x"})"),
            (strings{"body/channel:extra_forbidden", "body/contact/age:extra_forbidden",
                     "body/message/html:extra_forbidden"}));
}

TEST(api_inbound, reports_every_issue_at_once) {
  std::vector<issue> issues;
  EXPECT_FALSE(parse_api_inbound(
      R"({"event":"x","contact":{"phone":"123","email":"@","name":7,"external_id":[]},)"
      R"("message":{"text":"","external_message_id":{}},"timestamp":"soon","extra":1})",
      issues));
  EXPECT_EQ(
      described(issues),
      (strings{"body/extra:extra_forbidden", "body/event:enum",
               "body/contact/phone:value_error.phone", "body/contact/email:value_error.email",
               "body/contact/name:string_type", "body/contact/external_id:string_type",
               "body/message/text:string_too_short", "body/message/external_message_id:string_type",
               "body/timestamp:value_error"}));
  // loc parts are keys, never indexes, here.
  for (auto& i : issues)
    for (auto& p : i.loc) EXPECT_TRUE(std::holds_alternative<std::string>(p));
}

// ---- Inbound: Telegram -----------------------------------------------------------------------

TEST(telegram_update, a_text_message_becomes_an_inbound_message) {
  bool ignored = true;
  std::vector<issue> issues;
  auto m = parse_telegram_update(
      R"({"update_id":10,"message":{"message_id":77,"date":1700000000,)"
      R"("chat":{"id":-1001234,"type":"private"},)"
      R"("from":{"id":5,"first_name":"Ada","last_name":"Lovelace"},"text":"hello"}})",
      ignored, issues);
  ASSERT_TRUE(m);
  EXPECT_FALSE(ignored);
  EXPECT_TRUE(issues.empty());
  EXPECT_EQ(m->text, "hello");
  EXPECT_EQ(m->external_message_id, "-1001234:77");
  EXPECT_EQ(m->contact.external_id, "-1001234");
  EXPECT_EQ(m->contact.name, "Ada Lovelace");
  EXPECT_EQ(m->contact.phone, std::nullopt);
  EXPECT_EQ(m->timestamp, 1'700'000'000'000'000);
}

TEST(telegram_update, first_name_alone_is_the_name_and_no_from_is_no_name) {
  bool ignored = false;
  std::vector<issue> issues;
  auto m = parse_telegram_update(R"({"message":{"message_id":1,"chat":{"id":5},)"
                                 R"("from":{"first_name":"Ada"},"text":"x"}})",
                                 ignored, issues);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->contact.name, "Ada");
  EXPECT_EQ(m->timestamp, 0);
  auto post = parse_telegram_update(
      R"({"channel_post":{"message_id":2,"chat":{"id":-100},"text":"news"}})", ignored, issues);
  ASSERT_TRUE(post);
  EXPECT_EQ(post->contact.name, std::nullopt);
  EXPECT_EQ(post->external_message_id, "-100:2");
}

TEST(telegram_update, edits_stickers_and_callbacks_are_ignored) {
  for (auto body :
       {R"({"update_id":1,"edited_message":{"message_id":1,"chat":{"id":5},"text":"x"}})",
        R"({"update_id":2,"message":{"message_id":1,"chat":{"id":5},"sticker":{"file_id":"f"}}})",
        R"({"update_id":3,"callback_query":{"id":"q","data":"d"}})",
        R"({"update_id":4,"message":{"message_id":1,"chat":{"id":5},"text":""}})",
        R"({"update_id":5})"}) {
    bool ignored = false;
    std::vector<issue> issues;
    EXPECT_FALSE(parse_telegram_update(body, ignored, issues)) << body;
    EXPECT_TRUE(ignored) << body;
    EXPECT_TRUE(issues.empty()) << body;
  }
}

TEST(telegram_update, invalid_json_is_json_invalid) {
  for (auto body : {"{", "not json", "[]"}) {
    bool ignored = true;
    std::vector<issue> issues;
    EXPECT_FALSE(parse_telegram_update(body, ignored, issues));
    EXPECT_FALSE(ignored);
    EXPECT_EQ(described(issues), (strings{"body:json_invalid"})) << body;
  }
}

TEST(telegram_update, a_text_message_without_ids_is_invalid) {
  bool ignored = true;
  std::vector<issue> issues;
  EXPECT_FALSE(
      parse_telegram_update(R"({"message":{"message_id":"7","text":"x"}})", ignored, issues));
  EXPECT_FALSE(ignored);
  EXPECT_EQ(described(issues),
            (strings{"body/message/message_id:int_type", "body/message/chat:missing"}));
}

// ---- split_name ----------------------------------------------------------------------------

TEST(split_name, first_word_then_the_rest) {
  EXPECT_EQ(split_name("Ada Lovelace King"),
            (std::pair<std::string, std::optional<std::string>>{"Ada", "Lovelace King"}));
  EXPECT_EQ(split_name("  Ada \t Lovelace  "),
            (std::pair<std::string, std::optional<std::string>>{"Ada", "Lovelace"}));
  EXPECT_EQ(split_name("Ada"), (std::pair<std::string, std::optional<std::string>>{"Ada", {}}));
  EXPECT_EQ(split_name(" Ada  "), (std::pair<std::string, std::optional<std::string>>{"Ada", {}}));
  EXPECT_EQ(split_name(""), (std::pair<std::string, std::optional<std::string>>{"", {}}));
}

// ---- Outbound ------------------------------------------------------------------------------

namespace {

outbound_message sample_message() {
  outbound_message m;
  m.message_id = 501;
  m.conversation_id = 40;
  m.contact_id = 30;
  m.channel_id = 20;
  m.text = "Hi \"Ada\"";
  m.created_at = 1'700'000'000'123'456;
  m.phone = "+15551234567";
  m.external_id = "987654321";
  return m;
}

channel api_channel(std::string_view config) {
  channel c;
  c.id = 20;
  c.type = channel_type::api;
  c.config = obj(config);
  return c;
}

channel telegram_channel(std::string_view extra = "") {
  channel c;
  c.id = 21;
  c.type = channel_type::telegram;
  c.config =
      obj(std::string(R"({"bot_token":")") + std::string(token) + "\"" + std::string(extra) + "}");
  return c;
}

std::optional<std::string> header(const adapter_request& r, std::string_view name) {
  for (auto& [k, v] : r.headers)
    if (k == name) return v;
  return std::nullopt;
}

} // namespace

TEST(plan_outbound, api_posts_the_message_sent_envelope) {
  auto plan = plan_outbound(api_channel(R"({"outbound_url":"https://hooks.example.com/in"})"),
                            sample_message(), 1'700'000'100);
  ASSERT_TRUE(plan.request) << plan.error;
  EXPECT_TRUE(plan.error.empty());
  auto& r = *plan.request;
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, "https://hooks.example.com/in");
  EXPECT_EQ(header(r, "content-type"), "application/json");
  EXPECT_EQ(header(r, "webhook-signature"), std::nullopt);
  EXPECT_EQ(json::parse(r.body),
            js(R"({"type":"message.sent","timestamp":"2023-11-14T22:13:20.123456Z",)"
               R"("data":{"message_id":501,"conversation_id":40,"contact_id":30,"channel_id":20,)"
               R"("text":"Hi \"Ada\"","contact":{"phone":"+15551234567","email":null,)"
               R"("external_id":"987654321"}}})"));
}

TEST(plan_outbound, api_signs_with_standard_webhooks_when_a_signing_secret_is_set) {
  const std::string secret = "0123456789abcdef";
  auto plan = plan_outbound(api_channel(R"({"outbound_url":"http://127.0.0.1:9/x",)"
                                        R"("signing_secret":")" +
                                        secret + R"("})"),
                            sample_message(), 1'700'000'100);
  ASSERT_TRUE(plan.request) << plan.error;
  auto& r = *plan.request;
  EXPECT_EQ(header(r, "webhook-id"), "msg_out_501");
  EXPECT_EQ(header(r, "webhook-timestamp"), "1700000100");
  // What a receiver does: recompute over the exact bytes received.
  EXPECT_EQ(header(r, "webhook-signature"),
            webhook_signature(secret, "msg_out_501", 1'700'000'100, r.body));
  EXPECT_NE(header(r, "webhook-signature"),
            webhook_signature(secret, "msg_out_501", 1'700'000'101, r.body));
}

TEST(plan_outbound, api_without_outbound_url_is_not_configured) {
  auto plan =
      plan_outbound(api_channel(R"({"signing_secret":"0123456789abcdef"})"), sample_message(), 0);
  EXPECT_FALSE(plan.request);
  EXPECT_EQ(plan.error, "not configured: the channel has no outbound_url");
}

TEST(plan_outbound, telegram_posts_send_message_with_an_integer_chat_id) {
  auto plan = plan_outbound(telegram_channel(), sample_message(), 0);
  ASSERT_TRUE(plan.request) << plan.error;
  auto& r = *plan.request;
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, "https://api.telegram.org/bot" + std::string(token) + "/sendMessage");
  EXPECT_EQ(header(r, "content-type"), "application/json");
  auto body = json::parse(r.body);
  EXPECT_EQ(body, js(R"({"chat_id":987654321,"text":"Hi \"Ada\""})"));
  EXPECT_TRUE(body.at("chat_id").is_int64());
}

TEST(plan_outbound, telegram_uses_the_configured_base_url_without_its_trailing_slash) {
  auto plan = plan_outbound(telegram_channel(R"(,"api_base_url":"http://127.0.0.1:8081/")"),
                            sample_message(), 0);
  ASSERT_TRUE(plan.request) << plan.error;
  EXPECT_EQ(plan.request->url, "http://127.0.0.1:8081/bot" + std::string(token) + "/sendMessage");
}

TEST(plan_outbound, telegram_chat_ids_that_are_not_integers_stay_strings) {
  auto m = sample_message();
  m.external_id = "-100200300";
  auto plan = plan_outbound(telegram_channel(), m, 0);
  ASSERT_TRUE(plan.request);
  EXPECT_EQ(json::parse(plan.request->body).at("chat_id"), json::value(-100200300));
  m.external_id = "@carecrm_news";
  plan = plan_outbound(telegram_channel(), m, 0);
  ASSERT_TRUE(plan.request);
  EXPECT_EQ(json::parse(plan.request->body).at("chat_id"), json::value("@carecrm_news"));
}

TEST(plan_outbound, telegram_contact_without_a_chat_fails) {
  auto m = sample_message();
  m.external_id.reset();
  auto plan = plan_outbound(telegram_channel(), m, 0);
  EXPECT_FALSE(plan.request);
  EXPECT_EQ(plan.error, "the contact has no chat on this channel");
}

TEST(plan_outbound, carecrm_writes_first_only_where_the_adapter_can_reach_the_contact) {
  // An api channel reaches anyone through its outbound_url; Telegram only a chat it knows.
  EXPECT_EQ(cannot_write_first(api_channel(R"({"outbound_url":"https://example.com/out"})"), {}),
            std::nullopt);
  EXPECT_EQ(cannot_write_first(api_channel("{}"), {}),
            "not configured: the channel has no outbound_url");
  EXPECT_EQ(cannot_write_first(telegram_channel(), {}), "the contact has no chat on this channel");
  EXPECT_EQ(cannot_write_first(telegram_channel(), "4242"), std::nullopt);
  // E-mail reaches any address once the channel has its SMTP server and sender.
  channel email;
  email.type = channel_type::email;
  EXPECT_EQ(cannot_write_first(email, {}),
            "not configured: the channel has no smtp_host or from_address");
  email.config = obj(R"({"smtp_host":"smtp.example","from_address":"a@b.example"})");
  EXPECT_EQ(cannot_write_first(email, {}), std::nullopt);
}

// ---- read_outbound_response ----------------------------------------------------------------

TEST(read_outbound_response, api_2xx_is_sent_with_the_receivers_id_when_given) {
  auto r = read_outbound_response(channel_type::api, 200, R"({"id":"ext-9"})");
  EXPECT_TRUE(r.sent);
  EXPECT_EQ(r.provider_message_id, "ext-9");
  r = read_outbound_response(channel_type::api, 202, R"({"message_id":12345})");
  EXPECT_TRUE(r.sent);
  EXPECT_EQ(r.provider_message_id, "12345");
  r = read_outbound_response(channel_type::api, 204, "");
  EXPECT_TRUE(r.sent);
  EXPECT_EQ(r.provider_message_id, std::nullopt);
  r = read_outbound_response(channel_type::api, 200, "OK");
  EXPECT_TRUE(r.sent);
  EXPECT_EQ(r.provider_message_id, std::nullopt);
  r = read_outbound_response(channel_type::api, 200, R"({"id":{"x":1}})");
  EXPECT_TRUE(r.sent);
  EXPECT_EQ(r.provider_message_id, std::nullopt);
}

TEST(read_outbound_response, api_other_statuses_fail_with_the_status) {
  for (int status : {301, 400, 404, 500, 503}) {
    auto r = read_outbound_response(channel_type::api, status, R"({"id":"x"})");
    EXPECT_FALSE(r.sent);
    EXPECT_EQ(r.error, "the receiver answered " + std::to_string(status));
    EXPECT_EQ(r.provider_message_id, std::nullopt);
  }
}

TEST(read_outbound_response, telegram_ok_true_is_sent_with_the_message_id) {
  auto r = read_outbound_response(channel_type::telegram, 200,
                                  R"({"ok":true,"result":{"message_id":4242,"chat":{"id":5}}})");
  EXPECT_TRUE(r.sent);
  EXPECT_EQ(r.provider_message_id, "4242");
}

TEST(read_outbound_response, telegram_ok_false_fails_with_the_description) {
  auto r = read_outbound_response(
      channel_type::telegram, 403,
      R"({"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"})");
  EXPECT_FALSE(r.sent);
  EXPECT_EQ(r.error, "telegram: Forbidden: bot was blocked by the user");
}

TEST(read_outbound_response, telegram_other_answers_fail_with_the_status) {
  for (auto [status, body] : {std::pair{502, "<html>Bad Gateway</html>"}, std::pair{200, "{}"},
                              std::pair{200, R"({"ok":true,"result":true})"},
                              std::pair{500, R"({"ok":true,"result":{"message_id":1}})"}}) {
    auto r = read_outbound_response(channel_type::telegram, status, body);
    EXPECT_FALSE(r.sent) << body;
    EXPECT_EQ(r.error, "telegram answered " + std::to_string(status)) << body;
  }
}

// ---- Response times ----------------------------------------------------------------------------

TEST(response_times, the_first_reply_of_a_person_after_the_contact_wrote_and_the_close) {
  conversation c;
  person_replied(c, 50); // nobody wrote yet: no response to measure
  EXPECT_EQ(c.first_response_at, 0);
  c.last_inbound_at = 100;
  person_replied(c, 160);
  person_replied(c, 200);
  EXPECT_EQ(c.first_response_at, 160);
  set_status(c, conversation_status::closed, 300);
  EXPECT_EQ(c.resolved_at, 300);
  set_status(c, conversation_status::closed, 400); // closing again keeps the first close
  EXPECT_EQ(c.resolved_at, 300);
  set_status(c, conversation_status::open, 500);
  EXPECT_EQ(c.resolved_at, 0);
  EXPECT_EQ(c.status, conversation_status::open);
}

TEST(unknown_send, a_copy_is_sent_only_where_it_can_be_told_apart) {
  // The receiver deduplicates on the webhook-id / Message-ID: sent again.
  EXPECT_EQ(after_unknown_send(channel_type::api), unknown_send::send_again);
  EXPECT_EQ(after_unknown_send(channel_type::email), unknown_send::send_again);
  // Their reports name carecrm's id: they decide.
  EXPECT_EQ(after_unknown_send(channel_type::whatsapp), unknown_send::await_report);
  EXPECT_EQ(after_unknown_send(channel_type::sms), unknown_send::await_report);
  // Nothing tells: never twice.
  EXPECT_EQ(after_unknown_send(channel_type::telegram), unknown_send::give_up);
}

TEST(unknown_send, a_reports_reference_is_carecrms_id_or_nothing) {
  EXPECT_EQ(message_ref_of(message_ref(1234567)), 1234567);
  EXPECT_EQ(message_ref_of("977"), 977);
  for (std::string_view other :
       {"", "0", "012", "-5", "12a", "abc", "1e3", " 12", "1234567890123456789", "campaign-7"})
    EXPECT_EQ(message_ref_of(other), std::nullopt) << other;
}
