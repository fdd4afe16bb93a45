// Unit tests for domain/email (docs/channels.md "E-mail"): the channel's config, the mail an
// outbound message becomes (threading headers, subject, HTML), Mailgun's signature, an inbound
// mail read from its form (plain or multipart), and the conversation a reply answers.
#include "domain/email.hpp"

#include "domain/crypto.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "issue_text.hpp"

using namespace crm::domain;
using crm::testing::described;
namespace em = crm::domain::email;
namespace json = boost::json;

namespace {

channel mail_channel() {
  channel c;
  c.id = 4;
  c.type = channel_type::email;
  c.config = json::parse(R"({"smtp_host":"smtp.clinic.example","smtp_port":2525,
                             "smtp_username":"crm","smtp_password":"pw",
                             "from_address":"recepcao@clinic.example",
                             "from_name":"Clínica Sol"})")
                 .as_object();
  return c;
}

outbound_message to_ana() {
  outbound_message m;
  m.message_id = 77;
  m.conversation_id = 12;
  m.text = "Olá Ana,\nsua consulta é amanhã.\n\nAté logo <3";
  m.email = "ana@patient.example";
  return m;
}

} // namespace

TEST(email_config, requires_a_server_and_sender_and_no_credentials_in_clear) {
  std::vector<issue> issues;
  EXPECT_FALSE(parse_channel_config(channel_type::email, json::object(), nullptr, issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body/config/smtp_host:missing",
                                                         "body/config/from_address:missing"}));
  issues.clear();
  EXPECT_FALSE(parse_channel_config(
      channel_type::email,
      json::parse(R"({"smtp_host":"smtp example","smtp_port":70000,"smtp_security":"ssl",
                      "from_address":"nope","x":"1"})"),
      nullptr, issues));
  EXPECT_EQ(described(issues),
            (std::vector<std::string>{
                "body/config/x:extra_forbidden", "body/config/smtp_host:value_error",
                "body/config/smtp_port:less_than_equal", "body/config/smtp_security:enum",
                "body/config/from_address:value_error.email"}));
  issues.clear();
  EXPECT_FALSE(parse_channel_config(
      channel_type::email,
      json::parse(R"({"smtp_host":"relay","smtp_security":"none","smtp_username":"u",
                      "smtp_password":"p","from_address":"a@b.example"})"),
      nullptr, issues));
  EXPECT_EQ(described(issues), (std::vector<std::string>{"body/config/smtp_security:value_error"}));
  issues.clear();
  EXPECT_TRUE(parse_channel_config(channel_type::email, json::value(mail_channel().config), nullptr,
                                   issues));
}

TEST(email_send, a_new_thread_gets_the_channels_subject_and_a_message_id_naming_it) {
  auto plan = em::plan_send(mail_channel(), to_ana(), {});
  ASSERT_TRUE(plan.m) << plan.error;
  auto& m = *plan.m;
  EXPECT_EQ(m.host, "smtp.clinic.example");
  EXPECT_EQ(m.port, 2525);
  EXPECT_EQ(m.security, "starttls");
  EXPECT_EQ(m.from, "recepcao@clinic.example");
  EXPECT_EQ(m.to, "ana@patient.example");
  EXPECT_EQ(m.subject, "A message from Clínica Sol");
  EXPECT_EQ(m.message_id, "<carecrm.c12.m77@clinic.example>");
  EXPECT_EQ(m.in_reply_to, "");
  EXPECT_EQ(m.html, "<!DOCTYPE html><html><body><p>Olá Ana,<br>sua consulta é amanhã.</p><p>Até "
                    "logo &lt;3</p></body></html>");
  auto no_address = to_ana();
  no_address.email.reset();
  EXPECT_EQ(em::plan_send(mail_channel(), no_address, {}).error,
            "the contact has no e-mail address");
}

TEST(email_send, a_reply_answers_the_patients_last_mail) {
  auto plan = em::plan_send(mail_channel(), to_ana(), {"<abc@patient.example>", "Exames"});
  ASSERT_TRUE(plan.m);
  EXPECT_EQ(plan.m->subject, "Re: Exames");
  EXPECT_EQ(plan.m->in_reply_to, "<abc@patient.example>");
  EXPECT_EQ(plan.m->references, "<abc@patient.example>");
  EXPECT_EQ(em::plan_send(mail_channel(), to_ana(), {"<x@y>", "RE: Exames"}).m->subject,
            "RE: Exames");
}

TEST(email_inbound, a_reply_names_the_conversation_it_answers) {
  EXPECT_EQ(em::answered_conversation("<carecrm.c12.m77@clinic.example>", ""), 12);
  EXPECT_EQ(em::answered_conversation("", "<a@b> <carecrm.c5.m9@x> <carecrm.c12.m77@x>"), 12);
  EXPECT_EQ(em::answered_conversation("<a@b>", "<c@d>"), std::nullopt);
  EXPECT_EQ(em::answered_conversation("<carecrm.cX.m1@x>", ""), std::nullopt);
  // A header that ends in the id (found by the fuzzer: read past its end).
  std::string cut = "<carecrm.c12";
  EXPECT_EQ(em::answered_conversation(std::string_view(cut), ""), std::nullopt);
}

TEST(email_inbound, mailguns_signature_is_the_hmac_of_timestamp_and_token) {
  auto sig = hex_encode(as_bytes(hmac_sha256("key-123", "1700000000tok")));
  EXPECT_TRUE(em::signature_matches("key-123", "1700000000", "tok", sig));
  EXPECT_FALSE(em::signature_matches("key-124", "1700000000", "tok", sig));
  EXPECT_FALSE(em::signature_matches("key-123", "1700000001", "tok", sig));
  EXPECT_FALSE(em::signature_matches("", "1700000000", "tok", sig));
}

TEST(email_inbound, a_forwarded_mail_reads_into_a_message) {
  std::vector<issue> issues;
  auto m = em::parse_inbound({{"sender", "bounce+x@patient.example"},
                              {"from", "\"Ana Souza\" <ana@patient.example>"},
                              {"subject", "Re: A message from Clínica Sol"},
                              {"body-plain", "Pode ser às 10h?\n\n> quoted"},
                              {"stripped-text", "Pode ser às 10h?"},
                              {"Message-Id", "<reply1@patient.example>"},
                              {"In-Reply-To", "<carecrm.c12.m77@clinic.example>"}},
                             {{"exame.pdf", "application/pdf", 4, "%PDF"}}, issues);
  ASSERT_TRUE(m) << described(issues).size();
  EXPECT_EQ(m->message.contact.email, "ana@patient.example");
  EXPECT_EQ(m->message.contact.name, "Ana Souza");
  EXPECT_EQ(m->message.external_message_id, "<reply1@patient.example>");
  EXPECT_EQ(m->message.text, "Pode ser às 10h? [attachment exame.pdf (application/pdf, 4 bytes)]");
  // The file itself goes with the message, to be kept beside it.
  ASSERT_EQ(m->message.media.size(), 1u);
  EXPECT_EQ(m->message.media[0].data, "%PDF");
  EXPECT_EQ(m->message.media[0].filename, "exame.pdf");
  EXPECT_EQ(m->subject, "Re: A message from Clínica Sol");
  EXPECT_EQ(m->conversation, 12);
  EXPECT_FALSE(em::parse_inbound({{"subject", "x"}}, {}, issues));
  EXPECT_EQ(described(issues),
            (std::vector<std::string>{"body/sender:missing", "body/Message-Id:missing"}));
}

TEST(email_inbound, multipart_form_data_splits_fields_and_files) {
  std::string body = "--XyZ\r\n"
                     "Content-Disposition: form-data; name=\"subject\"\r\n\r\n"
                     "Exames\r\n"
                     "--XyZ\r\n"
                     "Content-Disposition: form-data; name=\"attachment-1\"; "
                     "filename=\"raio x.png\"\r\n"
                     "Content-Type: image/png\r\n\r\n"
                     "\x89PNG\r\n\x1a\n....\r\n"
                     "--XyZ--\r\n";
  EXPECT_EQ(em::multipart_boundary("multipart/form-data; boundary=XyZ"), "XyZ");
  EXPECT_EQ(em::multipart_boundary("multipart/form-data; boundary=\"XyZ\""), "XyZ");
  EXPECT_EQ(em::multipart_boundary("application/x-www-form-urlencoded"), std::nullopt);
  auto f = em::parse_multipart(body, "XyZ");
  ASSERT_TRUE(f);
  ASSERT_EQ(f->fields.size(), 1u);
  EXPECT_EQ(f->fields[0], (std::pair<std::string, std::string>{"subject", "Exames"}));
  ASSERT_EQ(f->files.size(), 1u);
  EXPECT_EQ(f->files[0].filename, "raio x.png");
  EXPECT_EQ(f->files[0].content_type, "image/png");
  EXPECT_EQ(f->files[0].size, 12u); // the bytes between the part's headers and the delimiter
  EXPECT_FALSE(em::parse_multipart("no delimiter here", "XyZ"));
  EXPECT_FALSE(
      em::parse_multipart("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx", "XyZ"));
}
