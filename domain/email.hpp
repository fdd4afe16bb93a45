// E-mail channels as carecrm speaks them (contract §12, docs/channels.md "E-mail"): the mail an
// outbound message becomes (From, To, Subject, Message-ID, In-Reply-To and References, text and
// HTML), and Mailgun's inbound route (its signed form, plain or multipart) read into a message
// that joins the conversation it answers. Pure: the SMTP exchange is net/smtp_client's.
#pragma once
#include "domain/channel.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crm::domain::email {

// A posted form's fields, decoded, in the order sent.
using form = std::vector<std::pair<std::string, std::string>>;

struct attachment_info {
  std::string filename;
  std::string content_type;
  std::size_t size = 0;
  std::string data; // the file
};

// A multipart/form-data body (RFC 7578) with `boundary`: its fields (parts without a filename)
// and the files' names, types and sizes. Nothing when the body is not such a document.
struct form_data {
  form fields;
  std::vector<attachment_info> files;
};
std::optional<form_data> parse_multipart(std::string_view body, std::string_view boundary);
// The boundary parameter of a multipart/form-data Content-Type, if it is one.
std::optional<std::string> multipart_boundary(std::string_view content_type);

// The mail a message becomes.
struct mail {
  std::string host;
  int port = 587;
  std::string security; // starttls, tls, none
  std::string username, password;
  std::string from, from_name;
  std::string to, to_name;
  std::string subject;
  std::string text, html;
  std::string message_id, in_reply_to, references;
  std::vector<outbound_message::file> attachments;
};
struct mail_plan {
  std::optional<mail> m;
  std::string error;
};
// What the conversation's last message from the contact said of its thread: its Message-ID and
// Subject (empty when the contact never wrote).
struct thread_info {
  std::string last_message_id;
  std::string subject;
};
// `m.email`: the contact's address. The Message-ID names the conversation, so the reply to it
// finds it again: <carecrm.c{conversation}.m{message}@{the sender's domain}>.
mail_plan plan_send(const channel& c, const outbound_message& m, const thread_info& thread);
std::string message_id(std::int64_t conversation_id, std::int64_t message_id,
                       std::string_view from_address);
// The conversation a reply answers, from its In-Reply-To and References (carecrm's Message-IDs).
std::optional<std::int64_t> answered_conversation(std::string_view in_reply_to,
                                                  std::string_view references);
// The text as HTML: escaped, paragraphs and line breaks kept.
std::string html_of(std::string_view text);

// Mailgun's webhook signature: hex HMAC-SHA256, under the signing key, of timestamp + token.
bool signature_matches(std::string_view signing_key, std::string_view timestamp,
                       std::string_view token, std::string_view signature);

// An e-mail a route forwarded (Mailgun's fields: sender, from, subject, stripped-text or
// body-plain, Message-Id, In-Reply-To, References; attachments described in the text). Missing
// sender or Message-Id → issues.
struct inbound_mail {
  inbound_message message;
  std::string subject;
  std::optional<std::int64_t> conversation; // the carecrm conversation it answers
};
std::optional<inbound_mail> parse_inbound(const form& fields,
                                          const std::vector<attachment_info>& files,
                                          std::vector<issue>& issues);

} // namespace crm::domain::email
