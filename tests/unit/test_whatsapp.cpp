// Unit tests for domain/whatsapp (docs/channels.md "WhatsApp"): the channel's config, the
// webhook's signature and handshake, its payload into messages and statuses, the send request
// (text or template), the answer's retry classes, the 24-hour window and the template list.
#include "domain/whatsapp.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "issue_text.hpp"

using namespace crm::domain;
using crm::testing::described;
namespace wa = crm::domain::whatsapp;
namespace json = boost::json;

namespace {

constexpr std::string_view full_config = R"({"phone_number_id":"1069","access_token":"EAAG1",
  "app_secret":"app-s3cret","verify_token":"hub-v3rify"})";

channel wa_channel(std::string_view extra = "") {
  channel c;
  c.id = 7;
  c.type = channel_type::whatsapp;
  c.config = json::parse(full_config).as_object();
  if (!extra.empty()) {
    auto more = json::parse(extra);
    for (auto& kv : more.as_object()) c.config[kv.key()] = kv.value();
  }
  return c;
}

// A webhook body for number 1069 with one text message from 5511987654321 and one status.
constexpr std::string_view webhook = R"({"object":"whatsapp_business_account","entry":[{
  "id":"WABA","changes":[{"field":"messages","value":{"messaging_product":"whatsapp",
  "metadata":{"display_phone_number":"15550001","phone_number_id":"1069"},
  "contacts":[{"profile":{"name":" Ana Souza "},"wa_id":"5511987654321"}],
  "messages":[{"from":"5511987654321","id":"wamid.IN1","timestamp":"1700000000","type":"text",
    "text":{"body":"Posso remarcar?"}}],
  "statuses":[{"id":"wamid.OUT1","status":"read","timestamp":"1700000001",
    "recipient_id":"5511987654321","biz_opaque_callback_data":"977"}]}}]}]})";

} // namespace

TEST(whatsapp_config, requires_the_number_and_three_secrets_on_create) {
  std::vector<issue> issues;
  EXPECT_FALSE(parse_channel_config(channel_type::whatsapp, json::object(), nullptr, issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body/config/phone_number_id:missing",
                                                         "body/config/access_token:missing",
                                                         "body/config/app_secret:missing",
                                                         "body/config/verify_token:missing"}));
  issues.clear();
  auto ok = parse_channel_config(channel_type::whatsapp, json::parse(full_config), nullptr, issues);
  ASSERT_TRUE(ok) << described(issues).size();
  EXPECT_EQ(ok->size(), 4u);
}

TEST(whatsapp_config, checks_ids_version_and_address_and_refuses_other_keys) {
  std::vector<issue> issues;
  auto bad = json::parse(full_config).as_object();
  bad["phone_number_id"] = "10-69";
  bad["business_account_id"] = "abc";
  bad["api_version"] = "19";
  bad["api_base_url"] = "ftp://graph.example";
  bad["note"] = "x";
  EXPECT_FALSE(parse_channel_config(channel_type::whatsapp, bad, nullptr, issues));
  EXPECT_EQ(described(issues),
            (std::vector<std::string>{
                "body/config/note:extra_forbidden", "body/config/phone_number_id:value_error",
                "body/config/business_account_id:value_error",
                "body/config/api_base_url:value_error", "body/config/api_version:value_error"}));
  issues.clear();
  auto good = json::parse(full_config).as_object();
  good["api_version"] = "v20.0";
  good["api_base_url"] = "http://127.0.0.1:9/graph";
  good["business_account_id"] = "4242";
  EXPECT_TRUE(parse_channel_config(channel_type::whatsapp, good, nullptr, issues));
}

TEST(whatsapp_config, an_update_keeps_secrets_but_a_new_address_needs_them_again) {
  std::vector<issue> issues;
  auto stored = json::parse(full_config).as_object();
  auto kept = parse_channel_config(channel_type::whatsapp,
                                   json::parse(R"({"phone_number_id":"7"})"), &stored, issues);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->at("access_token"), "EAAG1");
  EXPECT_EQ(kept->at("phone_number_id"), "7");
  // The access token would travel to the new address: it must be sent with it. (A config sent
  // replaces the stored one but for its secrets: the number's id must be sent too.)
  EXPECT_FALSE(parse_channel_config(channel_type::whatsapp,
                                    json::parse(R"({"api_base_url":"https://evil.example"})"),
                                    &stored, issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body/config/access_token:missing",
                                                         "body/config/app_secret:missing",
                                                         "body/config/verify_token:missing",
                                                         "body/config/phone_number_id:missing"}));
}

TEST(whatsapp_config, shows_has_flags_not_secrets) {
  auto shown = json::serialize(public_config(channel_type::whatsapp, wa_channel().config));
  EXPECT_EQ(shown, R"({"phone_number_id":"1069","has_access_token":true,)"
                   R"("has_app_secret":true,"has_verify_token":true})");
}

TEST(whatsapp_webhook, the_signature_is_the_hmac_of_the_raw_body) {
  std::string body = R"({"entry":[]})";
  auto header = wa::signature("app-s3cret", body);
  EXPECT_EQ(header.substr(0, 7), "sha256=");
  EXPECT_EQ(header.size(), 7u + 64u);
  EXPECT_TRUE(wa::signature_matches("app-s3cret", body, header));
  // Meta's hex is lower case; a header in upper case is the same digest.
  std::string upper = header;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(wa::signature_matches("app-s3cret", body, upper));
  EXPECT_FALSE(wa::signature_matches("other", body, header));
  EXPECT_FALSE(wa::signature_matches("app-s3cret", body + " ", header));
  EXPECT_FALSE(wa::signature_matches("app-s3cret", body, header.substr(7)));
  EXPECT_FALSE(wa::signature_matches("app-s3cret", body, ""));
  EXPECT_FALSE(wa::signature_matches("", body, wa::signature("", body)));
}

TEST(whatsapp_webhook, the_handshake_needs_subscribe_and_the_token) {
  EXPECT_TRUE(wa::verification_accepted("subscribe", "hub-v3rify", "hub-v3rify"));
  EXPECT_FALSE(wa::verification_accepted("subscribe", "hub-v3rifY", "hub-v3rify"));
  EXPECT_FALSE(wa::verification_accepted("unsubscribe", "hub-v3rify", "hub-v3rify"));
  EXPECT_FALSE(wa::verification_accepted("subscribe", "", ""));
}

TEST(whatsapp_webhook, reads_messages_with_their_sender_and_statuses) {
  std::vector<issue> issues;
  auto b = wa::parse_webhook(webhook, "1069", issues);
  ASSERT_TRUE(b) << described(issues).size();
  ASSERT_EQ(b->messages.size(), 1u);
  auto& m = b->messages[0];
  EXPECT_EQ(m.text, "Posso remarcar?");
  EXPECT_EQ(m.external_message_id, "wamid.IN1");
  EXPECT_EQ(m.contact.external_id, "5511987654321");
  EXPECT_EQ(m.contact.phone, "+5511987654321");
  EXPECT_EQ(m.contact.name, "Ana Souza");
  EXPECT_EQ(m.timestamp, 1'700'000'000'000'000);
  ASSERT_EQ(b->statuses.size(), 1u);
  EXPECT_EQ(b->statuses[0].provider_message_id, "wamid.OUT1");
  EXPECT_EQ(b->statuses[0].status, delivery::read);
  EXPECT_EQ(b->statuses[0].message_id, 977); // carecrm's id, as the send gave it
  EXPECT_EQ(b->ignored, 0u);
}

TEST(whatsapp_webhook, another_numbers_changes_and_other_fields_are_ignored) {
  std::vector<issue> issues;
  auto b = wa::parse_webhook(webhook, "2000", issues);
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->messages.empty());
  EXPECT_TRUE(b->statuses.empty());
  EXPECT_EQ(b->ignored, 1u);
  auto other = wa::parse_webhook(
      R"({"entry":[{"changes":[{"field":"account_update","value":{}}]}]})", "1069", issues);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->ignored, 1u);
}

TEST(whatsapp_webhook, buttons_media_and_locations_read_as_text_staff_can_follow) {
  std::vector<issue> issues;
  auto b = wa::parse_webhook(
      R"({"entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"1"},
      "messages":[
       {"from":"1555","id":"a","type":"button","button":{"text":"Confirmar","payload":"1"}},
       {"from":"1555","id":"b","type":"interactive","interactive":{"type":"button_reply",
         "button_reply":{"id":"2","title":"Cancelar"}}},
       {"from":"1555","id":"c","type":"image","image":{"id":"MEDIA9","caption":"exame",
         "mime_type":"image/jpeg"}},
       {"from":"1555","id":"d","type":"location","location":{"latitude":-23.5,"longitude":-46.6}}
      ]}}]}]})",
      "1", issues);
  ASSERT_TRUE(b) << described(issues).size();
  ASSERT_EQ(b->messages.size(), 4u);
  EXPECT_EQ(b->messages[0].text, "Confirmar");
  EXPECT_EQ(b->messages[1].text, "Cancelar");
  EXPECT_EQ(b->messages[2].text, "[image] exame (media MEDIA9)");
  EXPECT_EQ(b->messages[3].text, "[location] (-23.5, -46.6)");
}

TEST(whatsapp_webhook, a_malformed_body_is_issues_and_nothing_half_read) {
  std::vector<issue> issues;
  EXPECT_FALSE(wa::parse_webhook("not json", "1", issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body:json_invalid"}));
  issues.clear();
  EXPECT_FALSE(wa::parse_webhook(R"({"object":"x"})", "1", issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body/entry:missing"}));
  issues.clear();
  // One good message and one without a sender: nothing of the body is taken.
  EXPECT_FALSE(wa::parse_webhook(
      R"({"entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"1"},
      "messages":[{"from":"1555","id":"ok","type":"text","text":{"body":"hi"}},
                  {"id":"bad","type":"text","text":{"body":"hi"}}]}}]}]})",
      "1", issues));
  EXPECT_EQ(described(issues),
            (std::vector<std::string>{"body/entry/0/changes/0/value/messages/1/from:value_error"}));
}

TEST(whatsapp_webhook, failed_statuses_carry_the_providers_reason) {
  std::vector<issue> issues;
  auto b = wa::parse_webhook(
      R"({"entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"1"},
      "statuses":[{"id":"w1","status":"failed","errors":[{"code":131047,
        "title":"Re-engagement message","error_data":{"details":"more than 24 hours"}}]},
        {"id":"w2","status":"deleted"}]}}]}]})",
      "1", issues);
  ASSERT_TRUE(b);
  ASSERT_EQ(b->statuses.size(), 1u);
  EXPECT_EQ(b->statuses[0].status, delivery::failed);
  EXPECT_EQ(b->statuses[0].error, "whatsapp: 131047 Re-engagement message: more than 24 hours");
  EXPECT_EQ(b->ignored, 1u);
}

TEST(whatsapp_delivery, statuses_only_move_forward) {
  auto from = [](delivery d) { return delivery_predecessors(d); };
  using v = std::vector<std::string_view>;
  EXPECT_EQ(from(delivery::sent), (v{"queued"}));
  EXPECT_EQ(from(delivery::delivered), (v{"queued", "sent"}));
  EXPECT_EQ(from(delivery::read), (v{"queued", "sent", "delivered"}));
  // A failure after a read is a late report: the patient read it.
  EXPECT_EQ(from(delivery::failed), (v{"queued", "sent", "delivered"}));
  for (auto d : {delivery::sent, delivery::delivered, delivery::read, delivery::failed})
    EXPECT_EQ(parse_delivery(to_string(d)), d);
}

TEST(whatsapp_send, text_goes_to_the_numbers_messages_endpoint_with_the_token) {
  outbound_message m;
  m.text = "Até amanhã";
  m.phone = "+5511987654321";
  auto plan = plan_outbound(wa_channel(), m, 0);
  ASSERT_TRUE(plan.request) << plan.error;
  EXPECT_EQ(plan.request->url, "https://graph.facebook.com/v19.0/1069/messages");
  auto body = json::parse(plan.request->body).as_object();
  EXPECT_EQ(body.at("messaging_product"), "whatsapp");
  EXPECT_EQ(body.at("to"), "5511987654321");
  EXPECT_EQ(body.at("type"), "text");
  EXPECT_EQ(body.at("text").at("body"), "Até amanhã");
  EXPECT_FALSE(body.contains("biz_opaque_callback_data")); // no id: nothing to name
  m.message_id = 977;
  EXPECT_EQ(
      json::parse(plan_outbound(wa_channel(), m, 0).request->body).at("biz_opaque_callback_data"),
      "977");
  bool auth = false;
  for (auto& [k, v] : plan.request->headers)
    auth = auth || (k == "authorization" && v == "Bearer EAAG1");
  EXPECT_TRUE(auth);
  // The WhatsApp id the contact wrote from wins over the phone on file.
  m.external_id = "5511900000000";
  EXPECT_EQ(json::parse(plan_outbound(wa_channel(), m, 0).request->body).at("to"), "5511900000000");
  m.external_id.reset();
  m.phone.reset();
  EXPECT_EQ(plan_outbound(wa_channel(), m, 0).error,
            "the contact has no WhatsApp number (no phone, no WhatsApp id on the channel)");
}

TEST(whatsapp_send, a_template_is_sent_with_its_body_parameters) {
  std::vector<issue> issues;
  auto t = wa::parse_template(
      json::parse(
          R"({"name":"lembrete_consulta","language":"pt_BR","parameters":["Ana","10:00"]})"),
      {std::string("body"), std::string("template")}, issues);
  ASSERT_TRUE(t);
  outbound_message m;
  m.phone = "+5511987654321";
  m.template_json = wa::template_to_json(*t);
  auto plan = plan_outbound(wa_channel(R"({"api_base_url":"http://127.0.0.1:9/",
                                           "api_version":"v20.0"})"),
                            m, 0);
  ASSERT_TRUE(plan.request) << plan.error;
  EXPECT_EQ(plan.request->url, "http://127.0.0.1:9/v20.0/1069/messages");
  auto body = json::parse(plan.request->body);
  EXPECT_EQ(body.at("type"), "template");
  EXPECT_EQ(json::serialize(body.at("template")),
            R"({"name":"lembrete_consulta","language":{"code":"pt_BR"},"components":[)"
            R"({"type":"body","parameters":[{"type":"text","text":"Ana"},)"
            R"({"type":"text","text":"10:00"}]}]})");
  EXPECT_EQ(wa::template_text(*t), "[template lembrete_consulta (pt_BR)] Ana | 10:00");
}

TEST(whatsapp_send, template_input_is_checked) {
  std::vector<issue> issues;
  EXPECT_FALSE(wa::parse_template(json::parse(R"({"name":"Bad Name","parameters":[""],"x":1})"),
                                  {std::string("body"), std::string("template")}, issues));
  EXPECT_EQ(described(issues),
            (std::vector<std::string>{
                "body/template/x:extra_forbidden", "body/template/name:value_error",
                "body/template/language:missing", "body/template/parameters/0:string_too_short"}));
}

TEST(whatsapp_send, answers_read_as_sent_or_a_failure_that_may_or_may_not_be_retried) {
  auto ok = wa::read_send_response(
      200, R"({"messaging_product":"whatsapp","messages":[{"id":"wamid.OUT9"}]})");
  EXPECT_TRUE(ok.sent);
  EXPECT_EQ(ok.provider_message_id, "wamid.OUT9");
  // Outside the window: another attempt cannot help.
  auto closed = wa::read_send_response(
      400, R"({"error":{"message":"(#131047) Re-engagement message","code":131047,
               "error_data":{"details":"Message failed to send"}}})");
  EXPECT_FALSE(closed.sent);
  EXPECT_FALSE(closed.retry);
  EXPECT_EQ(closed.error,
            "whatsapp: 131047 (#131047) Re-engagement message: Message failed to send");
  auto token = wa::read_send_response(401, R"({"error":{"message":"bad token","code":190}})");
  EXPECT_FALSE(token.retry);
  // Throttled, or the provider failing: later.
  EXPECT_TRUE(wa::read_send_response(400, R"({"error":{"message":"rate","code":130429}})").retry);
  EXPECT_TRUE(wa::read_send_response(429, R"({"error":{"message":"slow","code":100}})").retry);
  EXPECT_TRUE(wa::read_send_response(503, "<html>").retry);
  EXPECT_TRUE(wa::read_send_response(200, "{}").retry);
}

TEST(whatsapp_window, free_text_only_within_24_hours_of_the_contacts_last_message) {
  constexpr std::int64_t hour = 3'600'000'000;
  std::int64_t now = 1'700'000'000'000'000;
  EXPECT_TRUE(wa::outside_window(0, now));
  EXPECT_FALSE(wa::outside_window(now - 23 * hour, now));
  EXPECT_TRUE(wa::outside_window(now - 24 * hour, now));
  EXPECT_EQ(cannot_write_first(wa_channel(), "5511987654321"),
            "WhatsApp lets a business write first only with an approved template");
}

TEST(whatsapp_templates, the_list_shows_each_templates_body_and_parameter_count) {
  auto plan = wa::plan_list_templates(wa_channel(R"({"business_account_id":"88"})"));
  ASSERT_TRUE(plan.request);
  EXPECT_EQ(plan.request->method, "GET");
  EXPECT_EQ(plan.request->url, "https://graph.facebook.com/v19.0/88/message_templates"
                               "?fields=name,language,status,category,components&limit=200");
  EXPECT_FALSE(wa::plan_list_templates(wa_channel()).request);
  auto r = wa::read_templates(200, R"({"data":[{"name":"lembrete","language":"pt_BR",
      "status":"APPROVED","category":"UTILITY","components":[{"type":"HEADER","text":"x"},
      {"type":"BODY","text":"Olá {{1}}, sua consulta é {{2}}. {{x}}"}]}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, R"({"items":[{"name":"lembrete","language":"pt_BR","status":"APPROVED",)"
                R"("category":"UTILITY","body":"Olá {{1}}, sua consulta é {{2}}. {{x}}",)"
                R"("parameters":2}]})");
  auto refused = wa::read_templates(401, R"({"error":{"message":"bad token","code":190}})");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, errc::conflict);
  EXPECT_EQ(wa::read_templates(502, "").error().code, errc::service_unavailable);
}
