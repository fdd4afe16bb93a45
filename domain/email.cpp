// E-mail's wire format for carecrm (docs/channels.md "E-mail"): RFC 5322 threading headers,
// RFC 7578 multipart/form-data, and Mailgun's inbound route and webhook signature
// (https://documentation.mailgun.com/docs/mailgun/user-manual/receive-forward-store/).
#include "domain/email.hpp"

#include "domain/crypto.hpp"
#include "domain/json_check.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>

namespace crm::domain::email {
namespace json = boost::json;
using namespace detail;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ascii_lower(a) == ascii_lower(b);
}

const std::string* field(const form& f, std::string_view name) {
  for (auto& [k, v] : f)
    if (iequals(k, name)) return &v;
  return nullptr;
}

std::string domain_of(std::string_view address) {
  auto at = address.rfind('@');
  return at == std::string_view::npos ? std::string("carecrm.invalid")
                                      : std::string(address.substr(at + 1));
}

// "Ana Souza <ana@x.example>" → {"Ana Souza", "ana@x.example"}; a bare address → {"", it}.
std::pair<std::string, std::string> split_mailbox(std::string_view s) {
  s = trim(s);
  auto lt = s.rfind('<');
  auto gt = s.rfind('>');
  if (lt == std::string_view::npos || gt == std::string_view::npos || gt < lt)
    return {"", std::string(s)};
  auto name = std::string(trim(s.substr(0, lt)));
  if (name.size() >= 2 && name.front() == '"' && name.back() == '"')
    name = name.substr(1, name.size() - 2);
  return {name, std::string(trim(s.substr(lt + 1, gt - lt - 1)))};
}

std::string param_of(std::string_view header, std::string_view name) {
  // name="value" or name=value within a header's parameters.
  auto lower = ascii_lower(header);
  auto key = ascii_lower(name) + "=";
  for (std::size_t at = lower.find(key); at != std::string::npos; at = lower.find(key, at + 1)) {
    if (at > 0 && lower[at - 1] != ' ' && lower[at - 1] != ';' && lower[at - 1] != '\t') continue;
    auto v = header.substr(at + key.size());
    if (!v.empty() && v.front() == '"') {
      auto end = v.find('"', 1);
      return std::string(v.substr(1, end == std::string_view::npos ? v.size() - 1 : end - 1));
    }
    auto end = v.find(';');
    return std::string(trim(v.substr(0, end)));
  }
  return {};
}

} // namespace

std::optional<std::string> multipart_boundary(std::string_view content_type) {
  auto lower = ascii_lower(trim(content_type));
  if (!lower.starts_with("multipart/form-data")) return std::nullopt;
  auto b = param_of(content_type, "boundary");
  if (b.empty() || b.size() > 200) return std::nullopt;
  return b;
}

std::optional<form_data> parse_multipart(std::string_view body, std::string_view boundary) {
  form_data out;
  const std::string delimiter = "--" + std::string(boundary);
  auto pos = body.find(delimiter);
  if (pos == std::string_view::npos) return std::nullopt;
  for (;;) {
    pos += delimiter.size();
    if (body.substr(pos, 2) == "--") return out; // the closing delimiter
    if (body.substr(pos, 2) != "\r\n") return std::nullopt;
    pos += 2;
    auto headers_end = body.find("\r\n\r\n", pos);
    if (headers_end == std::string_view::npos) return std::nullopt;
    auto headers = body.substr(pos, headers_end - pos);
    auto content_start = headers_end + 4;
    auto next = body.find("\r\n" + delimiter, content_start);
    if (next == std::string_view::npos) return std::nullopt;
    auto content = body.substr(content_start, next - content_start);
    std::string disposition, type;
    std::size_t line_start = 0;
    while (line_start <= headers.size()) {
      auto line_end = headers.find("\r\n", line_start);
      auto line =
          headers.substr(line_start, line_end == std::string_view::npos ? std::string_view::npos
                                                                        : line_end - line_start);
      auto colon = line.find(':');
      if (colon != std::string_view::npos) {
        auto name = trim(line.substr(0, colon));
        auto value = std::string(trim(line.substr(colon + 1)));
        if (iequals(name, "content-disposition")) disposition = value;
        if (iequals(name, "content-type")) type = value;
      }
      if (line_end == std::string_view::npos) break;
      line_start = line_end + 2;
    }
    if (!ascii_lower(disposition).starts_with("form-data")) return std::nullopt;
    auto name = param_of(disposition, "name");
    auto filename = param_of(disposition, "filename");
    if (!filename.empty() || (!type.empty() && !ascii_lower(type).starts_with("text/plain")))
      out.files.push_back({filename.empty() ? name : filename,
                           type.empty() ? std::string("application/octet-stream") : type,
                           content.size(), std::string(content)});
    else
      out.fields.emplace_back(std::move(name), std::string(content));
    pos = next + 2;
  }
}

std::string message_id(std::int64_t conversation_id, std::int64_t message_id,
                       std::string_view from_address) {
  return "<carecrm.c" + std::to_string(conversation_id) + ".m" + std::to_string(message_id) + "@" +
         domain_of(from_address) + ">";
}

std::optional<std::int64_t> answered_conversation(std::string_view in_reply_to,
                                                  std::string_view references) {
  // The message answered comes first, then the thread's others, newest last.
  for (auto text : {in_reply_to, references}) {
    for (auto at = text.rfind("<carecrm.c"); at != std::string_view::npos;
         at = at == 0 ? std::string_view::npos : text.rfind("<carecrm.c", at - 1)) {
      std::int64_t id = 0;
      auto start = text.data() + at + 10;
      auto [p, ec] = std::from_chars(start, text.data() + text.size(), id);
      if (ec == std::errc{} && p != start && p != text.data() + text.size() && *p == '.' && id > 0)
        return id;
    }
  }
  return std::nullopt;
}

std::string html_of(std::string_view text) {
  std::string out = "<!DOCTYPE html><html><body><p>";
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\r': break;
    case '\n':
      if (i + 1 < text.size() && text[i + 1] == '\n') {
        out += "</p><p>";
        ++i;
      } else {
        out += "<br>";
      }
      break;
    default: out += c;
    }
  }
  return out + "</p></body></html>";
}

mail_plan plan_send(const channel& c, const outbound_message& m, const thread_info& thread) {
  mail_plan plan;
  auto host = config_string(c.config, "smtp_host");
  auto from = config_string(c.config, "from_address");
  if (!host || !from) {
    plan.error = "not configured: the channel has no smtp_host or from_address";
    return plan;
  }
  if (!m.email || !is_valid_email(*m.email)) {
    plan.error = "the contact has no e-mail address";
    return plan;
  }
  mail out;
  out.host = *host;
  if (auto p = given(c.config, "smtp_port"); p && as_integer(*p))
    out.port = static_cast<int>(*as_integer(*p));
  out.security = config_string(c.config, "smtp_security").value_or("starttls");
  out.username = config_string(c.config, "smtp_username").value_or("");
  out.password = config_string(c.config, "smtp_password").value_or("");
  out.from = *from;
  out.from_name = config_string(c.config, "from_name").value_or("");
  out.to = *m.email;
  auto subject = thread.subject;
  if (!subject.empty()) {
    if (!ascii_lower(subject).starts_with("re:")) subject = "Re: " + subject;
  } else {
    subject = config_string(c.config, "subject")
                  .value_or(out.from_name.empty() ? std::string("A message for you")
                                                  : "A message from " + out.from_name);
  }
  out.subject = subject;
  out.text = m.text;
  out.html = html_of(m.text);
  out.message_id = message_id(m.conversation_id, m.message_id, *from);
  if (!thread.last_message_id.empty()) {
    out.in_reply_to = thread.last_message_id;
    out.references = thread.last_message_id;
  }
  out.attachments = m.files;
  plan.m = std::move(out);
  return plan;
}

bool signature_matches(std::string_view signing_key, std::string_view timestamp,
                       std::string_view token, std::string_view signature) {
  if (signing_key.empty() || signature.empty()) return false;
  std::string data(timestamp);
  data += token;
  return constant_time_equal(ascii_lower(trim(signature)),
                             hex_encode(as_bytes(hmac_sha256(signing_key, data))));
}

std::optional<inbound_mail> parse_inbound(const form& fields,
                                          const std::vector<attachment_info>& files,
                                          std::vector<issue>& issues) {
  const auto before = issues.size();
  auto add = [&](std::string_view name, std::string msg, std::string type) {
    issues.push_back({{std::string("body"), std::string(name)}, std::move(msg), std::move(type)});
  };
  for (auto& [k, v] : fields)
    if (!is_text(k) || !is_text(v)) {
      issues.push_back({{std::string("body")}, "a field that is not UTF-8 text", "value_error"});
      return std::nullopt;
    }
  auto from_header = field(fields, "from");
  auto sender = field(fields, "sender");
  auto [name, address] = split_mailbox(from_header ? *from_header : sender ? *sender : "");
  if (!is_valid_email(address) && sender) address = std::string(trim(*sender));
  if (address.empty())
    add("sender", "Field required", "missing");
  else if (!is_valid_email(address))
    add("sender", "an e-mail address", "value_error.email");
  auto id = field(fields, "Message-Id");
  if (!id || trim(*id).empty()) add("Message-Id", "Field required", "missing");
  if (issues.size() != before) return std::nullopt;

  inbound_mail out;
  auto ext = std::string(trim(*id));
  if (utf8_length(ext) > channel_rules::external_id_max)
    ext = "sha256:" + hex_encode(as_bytes(hmac_sha256("message-id", ext)));
  out.message.external_message_id = std::move(ext);
  out.message.contact.email = address;
  if (!trim(name).empty()) out.message.contact.name = std::string(utf8_prefix(trim(name), 200));
  if (auto s = field(fields, "subject")) out.subject = std::string(utf8_prefix(trim(*s), 500));
  std::string text;
  for (auto key : {"stripped-text", "body-plain"})
    if (auto t = field(fields, key); t && !trim(*t).empty()) {
      text = std::string(trim(*t));
      break;
    }
  for (auto& f : files) {
    if (!text.empty()) text += ' ';
    text += "[attachment " + f.filename + " (" + f.content_type + ", " + std::to_string(f.size) +
            " bytes)]";
    if (out.message.media.size() < media_per_message_max)
      out.message.media.push_back({"", f.content_type, f.filename, f.data});
  }
  out.message.text = text.empty() ? std::string("(empty message)")
                                  : std::string(utf8_prefix(text, channel_rules::text_max));
  auto in_reply_to = field(fields, "In-Reply-To");
  auto references = field(fields, "References");
  out.conversation =
      answered_conversation(in_reply_to ? *in_reply_to : "", references ? *references : "");
  return out;
}

} // namespace crm::domain::email
