// The pure rules of the messaging area (docs/channels.md): channel types and their config (with
// write-only secrets), the inbound payloads (generic api body, Telegram Update) read into 422
// issues, and the provider adapters: the request that sends a message and how the answer reads.
#include "domain/channel.hpp"

#include "domain/clock.hpp"
#include "domain/email.hpp"
#include "domain/json_check.hpp"
#include "domain/json_nul.hpp"
#include "domain/json_parse.hpp"
#include "domain/twilio.hpp"
#include "domain/validation.hpp"
#include "domain/whatsapp.hpp"
#include "domain/workflow.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <initializer_list>
#include <limits>

namespace crm::domain {
namespace json = boost::json;
namespace {

using namespace detail;

using namespace channel_rules;

constexpr auto channel_names = table_of<channel_type>(types);
static_assert(channel_names.back().first == channel_type::email);
constexpr auto status_names = table_of<conversation_status>(conversation_statuses);
static_assert(status_names.back().first == conversation_status::closed);
constexpr auto priority_names = table_of<conversation_priority>(conversation_priorities);
static_assert(priority_names.back().first == conversation_priority::urgent);

constexpr std::string_view default_telegram_base = "https://api.telegram.org";
constexpr std::string_view url_message = "Input should be a valid URL: http or https with a host";

std::optional<std::int64_t> parse_int64(std::string_view s) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return n;
}

// A JSON integer as the provider sent it; doubles are not ids (they would lose digits).
std::optional<std::int64_t> json_int64(const json::value& v) {
  if (auto i = v.if_int64()) return *i;
  if (auto u = v.if_uint64(); u && *u <= static_cast<std::uint64_t>(INT64_MAX))
    return static_cast<std::int64_t>(*u);
  return std::nullopt;
}

// ---- Validation helpers ------------------------------------------------------------------

const loc_path body_loc = {std::string("body")};

// An id sent as a string of 1..200 characters, or as an integer (kept as its decimal text:
// senders often number their messages and contacts).
std::optional<std::string> identifier(checker& ck, const json::value& v, const loc_path& l) {
  if (auto n = json_int64(v)) return std::to_string(*n);
  if (auto u = v.if_uint64()) return std::to_string(*u);
  if (auto s = ck.string(v, l, 1, external_id_max)) return std::string(*s);
  return std::nullopt;
}

// ^[0-9]+:[A-Za-z0-9_-]{20,}$, the shape BotFather hands out.
bool looks_like_bot_token(std::string_view s) {
  auto colon = s.find(':');
  if (colon == 0 || colon == std::string_view::npos) return false;
  auto id = s.substr(0, colon);
  auto secret = s.substr(colon + 1);
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  auto secret_char = [&](char c) {
    return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
  };
  return std::all_of(id.begin(), id.end(), digit) && secret.size() >= bot_token_secret_min &&
         std::all_of(secret.begin(), secret.end(), secret_char);
}

// An http(s) URL under the adapter's control. `as_base`: paths are appended to it, so a query
// would end up in the middle of the request target.
void check_url(checker& ck, const json::value& v, const loc_path& l, bool as_base,
               json::object& out, std::string_view key) {
  auto s = ck.string(v, l, 1, url_max);
  if (!s) return;
  if (!parse_url(*s) || (as_base && s->find('?') != std::string_view::npos)) {
    ck.add(l, std::string(url_message) + (as_base ? " and no query" : ""), "value_error");
    return;
  }
  out[key] = *s;
}

void check_api_config(checker& ck, const json::object& sent, const loc_path& l, json::object& out) {
  ck.extra_keys(sent, {"outbound_url", "signing_secret"}, l);
  if (auto v = given(sent, "outbound_url"))
    check_url(ck, *v, at(l, "outbound_url"), false, out, "outbound_url");
  if (auto v = given(sent, "signing_secret"))
    if (auto s = ck.string(*v, at(l, "signing_secret"), secret_min, secret_max))
      out["signing_secret"] = *s;
}

void check_telegram_config(checker& ck, const json::object& sent, const loc_path& l,
                           json::object& out) {
  ck.extra_keys(sent, {"bot_token", "api_base_url"}, l);
  if (auto v = given(sent, "bot_token")) {
    auto where = at(l, "bot_token");
    if (auto s = ck.text(*v, where)) {
      if (looks_like_bot_token(sv(*s)))
        out["bot_token"] = *s;
      else
        ck.add(where, "bot_token must look like 123456:ABC-...", "value_error");
    }
  }
  if (auto v = given(sent, "api_base_url"))
    check_url(ck, *v, at(l, "api_base_url"), true, out, "api_base_url");
}

// WhatsApp Cloud API (docs/channels.md "WhatsApp"): the number's id, the business account's
// (for its templates), the Graph API's address and version, and three secrets.
void check_whatsapp_config(checker& ck, const json::object& sent, const loc_path& l,
                           json::object& out) {
  ck.extra_keys(sent,
                {"phone_number_id", "business_account_id", "api_base_url", "api_version",
                 "access_token", "app_secret", "verify_token"},
                l);
  auto digits = [&](std::string_view key) {
    auto v = given(sent, key);
    if (!v) return;
    auto where = at(l, key);
    if (auto s = ck.string(*v, where, 1, whatsapp_id_max)) {
      if (std::all_of(s->begin(), s->end(), [](char c) { return c >= '0' && c <= '9'; }))
        out[key] = *s;
      else
        ck.add(where, std::string(key) + " is the number Meta shows: digits only", "value_error");
    }
  };
  digits("phone_number_id");
  digits("business_account_id");
  if (auto v = given(sent, "api_base_url"))
    check_url(ck, *v, at(l, "api_base_url"), true, out, "api_base_url");
  if (auto v = given(sent, "api_version")) {
    auto where = at(l, "api_version");
    if (auto s = ck.string(*v, where, 2, 10)) {
      auto rest = s->substr(1);
      auto dot = rest.find('.');
      auto number = [](std::string_view n) {
        return !n.empty() &&
               std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; });
      };
      if ((*s)[0] == 'v' && dot != std::string_view::npos && number(rest.substr(0, dot)) &&
          number(rest.substr(dot + 1)))
        out["api_version"] = *s;
      else
        ck.add(where, "a Graph API version such as v19.0", "value_error");
    }
  }
  for (auto key : {"access_token", "app_secret", "verify_token"})
    if (auto v = given(sent, key))
      if (auto s = ck.string(*v, at(l, key), 1, config_value_max)) out[key] = *s;
}

// SMS through Twilio (docs/channels.md "SMS"): the account, the number it sends from, the API's
// address, and the auth token (sends, and the webhook's signature).
void check_sms_config(checker& ck, const json::object& sent, const loc_path& l, json::object& out) {
  ck.extra_keys(sent, {"account_sid", "from_number", "api_base_url", "auth_token"}, l);
  if (auto v = given(sent, "account_sid")) {
    auto where = at(l, "account_sid");
    if (auto s = ck.string(*v, where, 1, twilio::account_sid_length)) {
      auto hex = [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      };
      if (s->size() == twilio::account_sid_length && s->starts_with("AC") &&
          std::all_of(s->begin() + 2, s->end(), hex))
        out["account_sid"] = *s;
      else
        ck.add(where, "a Twilio account SID: AC and 32 hexadecimal digits", "value_error");
    }
  }
  if (auto v = given(sent, "from_number")) {
    auto where = at(l, "from_number");
    if (auto s = ck.string(*v, where, 1, 16)) {
      if (is_e164(*s))
        out["from_number"] = *s;
      else
        ck.add(where, "an E.164 phone number such as +15551234567", "value_error.phone");
    }
  }
  if (auto v = given(sent, "api_base_url"))
    check_url(ck, *v, at(l, "api_base_url"), true, out, "api_base_url");
  if (auto v = given(sent, "auth_token"))
    if (auto s = ck.string(*v, at(l, "auth_token"), 1, config_value_max)) out["auth_token"] = *s;
}

// E-mail (docs/channels.md "E-mail"): the SMTP server carecrm sends through (credentials only
// over TLS), the sender, a subject for new threads, and Mailgun's webhook signing key for
// inbound mail.
void check_email_config(checker& ck, const json::object& sent, const loc_path& l,
                        json::object& out) {
  ck.extra_keys(sent,
                {"smtp_host", "smtp_port", "smtp_security", "smtp_username", "smtp_password",
                 "from_address", "from_name", "subject", "inbound_signing_key"},
                l);
  if (auto v = given(sent, "smtp_host")) {
    auto where = at(l, "smtp_host");
    if (auto s = ck.string(*v, where, 1, 253)) {
      if (std::all_of(s->begin(), s->end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '-';
          }))
        out["smtp_host"] = *s;
      else
        ck.add(where, "a host name or IPv4 address", "value_error");
    }
  }
  if (auto v = given(sent, "smtp_port"))
    if (auto n = ck.integer(*v, at(l, "smtp_port"), 1, 65535)) out["smtp_port"] = *n;
  if (auto v = given(sent, "smtp_security")) {
    auto where = at(l, "smtp_security");
    if (auto s = ck.string(*v, where, 1, 16)) {
      if (*s == "starttls" || *s == "tls" || *s == "none")
        out["smtp_security"] = *s;
      else
        ck.add(where, "Input should be 'starttls', 'tls' or 'none'", "enum");
    }
  }
  if (auto v = given(sent, "from_address")) {
    auto where = at(l, "from_address");
    if (auto s = ck.string(*v, where, 3, 254)) {
      if (is_valid_email(*s))
        out["from_address"] = *s;
      else
        ck.add(where, "value is not a valid email address", "value_error.email");
    }
  }
  for (auto key : {"smtp_username", "from_name", "subject"})
    if (auto v = given(sent, key))
      if (auto s = ck.string(*v, at(l, key), 1, 200)) out[key] = *s;
  for (auto key : {"smtp_password", "inbound_signing_key"})
    if (auto v = given(sent, key))
      if (auto s = ck.string(*v, at(l, key), 1, config_value_max)) out[key] = *s;
  auto security = out.if_contains("smtp_security");
  if (security && *security == "none" && out.contains("smtp_username"))
    ck.add(at(l, "smtp_security"), "credentials are sent only over TLS: starttls or tls",
           "value_error");
}

} // namespace

std::optional<std::string> config_string(const json::object& config, std::string_view key) {
  auto v = given(config, key);
  if (!v || !v->is_string() || v->get_string().empty()) return std::nullopt;
  return std::string(sv(v->get_string()));
}

std::optional<channel_type> parse_channel_type(std::string_view s) {
  return lookup(channel_names, s);
}
std::string_view to_string(channel_type t) {
  return name_of(channel_names, t);
}
std::string channel_type_choices() {
  return one_of_message(channel_names);
}

std::optional<conversation_status> parse_conversation_status(std::string_view s) {
  return lookup(status_names, s);
}
std::string_view to_string(conversation_status s) {
  return name_of(status_names, s);
}
std::string conversation_status_choices() {
  return one_of_message(status_names);
}

std::optional<conversation_priority> parse_conversation_priority(std::string_view s) {
  return lookup(priority_names, s);
}
std::string_view to_string(conversation_priority p) {
  return name_of(priority_names, p);
}
std::string conversation_priority_choices() {
  return one_of_message(priority_names);
}

bool conversation_query::matches(const conversation& c) const {
  return (!status || c.status == *status) && (!channel_id || c.channel_id == *channel_id) &&
         (!contact_id || c.contact_id == *contact_id) &&
         (!assignee_id || c.assignee_id == assignee_id) && (!team_id || c.team_id == team_id) &&
         (!priority || c.priority == priority) &&
         (!label || std::binary_search(c.labels.begin(), c.labels.end(), *label));
}

std::vector<std::string> label_set(std::vector<std::string> labels) {
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  return labels;
}

std::optional<std::int64_t> after_hours_period(const channel& ch, const conversation& c,
                                               std::int64_t now) {
  if (!ch.business_hours || !ch.after_hours_reply) return std::nullopt;
  auto since = closed_since(*ch.business_hours, ch.time_zone, now);
  if (!since || c.after_hours_for == since) return std::nullopt;
  return since;
}

// ---- Channel config ------------------------------------------------------------------------

std::optional<json::object> parse_channel_config(channel_type type, const json::value& config,
                                                 const json::object* previous,
                                                 std::vector<issue>& issues) {
  checker ck{issues};
  const auto before = issues.size();
  const loc_path l = {std::string("body"), std::string("config")};
  json::object sent;
  if (!config.is_null()) {
    auto o = ck.object(config, l);
    if (!o) return std::nullopt;
    sent = *o;
  }
  json::object out;
  switch (type) {
  case channel_type::api: check_api_config(ck, sent, l, out); break;
  case channel_type::telegram: check_telegram_config(ck, sent, l, out); break;
  case channel_type::whatsapp: check_whatsapp_config(ck, sent, l, out); break;
  case channel_type::sms: check_sms_config(ck, sent, l, out); break;
  case channel_type::email: check_email_config(ck, sent, l, out); break;
  }
  // Secrets are never shown, so a client editing the rest cannot send them back: one not sent
  // is kept; null is how it is removed. But a kept secret only goes where it went before: when
  // an address the channel sends to changes (Telegram's api_base_url, which the bot token
  // travels to), the secrets must be sent again, so whoever may edit a channel cannot redirect
  // its token to a server of their own.
  bool redirected = false;
  bool token_asked = false;
  if (previous) {
    if (type != channel_type::api)
      for (auto& kv : out) {
        auto* was = previous->if_contains(kv.key());
        if (kv.key().ends_with("url") && (!was || *was != kv.value())) redirected = true;
      }
    for (auto& kv : *previous) {
      if (!is_secret_config_key(type, kv.key()) || kv.value().is_null() || sent.contains(kv.key()))
        continue;
      if (redirected) {
        ck.add(at(l, kv.key()), "Field required: the channel's address changes, send it again",
               "missing");
        token_asked = token_asked || kv.key() == "bot_token";
      } else
        out[kv.key()] = kv.value();
    }
  }
  if (type == channel_type::telegram && !token_asked && !given(sent, "bot_token") &&
      !out.contains("bot_token"))
    ck.add(at(l, "bot_token"), "Field required", "missing");
  // A WhatsApp channel cannot send without its number and token, nor receive without its app
  // secret (the webhook's signature) and verify token (Meta's subscription handshake); an SMS
  // channel without its account, number and auth token.
  std::vector<const char*> required;
  if (type == channel_type::whatsapp)
    required = {"phone_number_id", "access_token", "app_secret", "verify_token"};
  if (type == channel_type::sms) required = {"account_sid", "from_number", "auth_token"};
  if (type == channel_type::email) required = {"smtp_host", "from_address"};
  for (auto key : required)
    if (!out.contains(key) && !given(sent, key) &&
        std::none_of(issues.begin() + static_cast<std::ptrdiff_t>(before), issues.end(),
                     [&](const issue& i) { return i.loc == at(l, key); }))
      ck.add(at(l, key), "Field required", "missing");
  if (issues.size() != before) return std::nullopt;
  return out;
}

bool is_secret_config_key(channel_type type, std::string_view key) {
  switch (type) {
  case channel_type::api: return key == "signing_secret";
  case channel_type::telegram: return key == "bot_token";
  case channel_type::whatsapp:
    return key == "access_token" || key == "app_secret" || key == "verify_token";
  case channel_type::sms: return key == "auth_token";
  case channel_type::email: return key == "smtp_password" || key == "inbound_signing_key";
  }
  return false;
}

json::object public_config(channel_type type, const json::object& config) {
  json::object out;
  for (auto& kv : config)
    if (!is_secret_config_key(type, kv.key())) out[kv.key()] = kv.value();
  switch (type) {
  case channel_type::api:
    out["has_signing_secret"] = config_string(config, "signing_secret").has_value();
    break;
  case channel_type::telegram:
    out["has_bot_token"] = config_string(config, "bot_token").has_value();
    break;
  case channel_type::whatsapp:
    for (auto key : {"access_token", "app_secret", "verify_token"})
      out["has_" + std::string(key)] = config_string(config, key).has_value();
    break;
  case channel_type::sms:
    out["has_auth_token"] = config_string(config, "auth_token").has_value();
    break;
  case channel_type::email:
    for (auto key : {"smtp_password", "inbound_signing_key"})
      out["has_" + std::string(key)] = config_string(config, key).has_value();
    break;
  }
  return out;
}

// ---- Inbound -------------------------------------------------------------------------------

namespace {

std::optional<inbound_contact> read_contact(checker& ck, const json::object& body,
                                            const loc_path& l) {
  auto v = member(body, "contact");
  if (!v) {
    ck.add(l, "Field required", "missing");
    return std::nullopt;
  }
  auto o = ck.object(*v, l);
  if (!o) return std::nullopt;
  const auto before = ck.issues.size();
  ck.extra_keys(*o, {"phone", "email", "name", "external_id"}, l);
  inbound_contact c;
  if (auto p = given(*o, "phone")) {
    auto where = at(l, "phone");
    if (auto s = ck.text(*p, where)) {
      auto t = trim(sv(*s));
      if (is_e164(t))
        c.phone = std::string(t);
      else
        ck.add(where, "value is not a valid E.164 phone number", "value_error.phone");
    }
  }
  if (auto e = given(*o, "email")) {
    auto where = at(l, "email");
    if (auto s = ck.text(*e, where)) {
      auto t = trim(sv(*s));
      if (is_valid_email(t))
        c.email = std::string(t);
      else
        ck.add(where, "value is not a valid email address", "value_error.email");
    }
  }
  if (auto n = given(*o, "name")) {
    auto where = at(l, "name");
    if (auto s = ck.text(*n, where)) {
      auto t = trim(sv(*s));
      // A blank name is no name: the contact is then named after its phone, e-mail or id.
      if (ck.length(t, where, 0, contact_name_max) && !t.empty()) c.name = std::string(t);
    }
  }
  auto id = given(*o, "external_id");
  if (id) c.external_id = identifier(ck, *id, at(l, "external_id"));
  // As a model validator, this runs on what was given: a malformed phone is its own issue.
  if (!given(*o, "phone") && !given(*o, "email") && !id)
    ck.add(l, "the contact needs a phone, an email or an external_id", "value_error");
  if (ck.issues.size() != before) return std::nullopt;
  return c;
}

bool read_message(checker& ck, const json::object& body, const loc_path& l, inbound_message& m) {
  auto v = member(body, "message");
  if (!v) {
    ck.add(l, "Field required", "missing");
    return false;
  }
  auto o = ck.object(*v, l);
  if (!o) return false;
  const auto before = ck.issues.size();
  ck.extra_keys(*o, {"text", "external_message_id"}, l);
  if (auto t = member(*o, "text")) {
    auto where = at(l, "text");
    if (auto s = ck.text(*t, where)) {
      // Kept as sent (leading spaces and line breaks can matter in a message), but white space
      // alone is no message.
      if (trim(sv(*s)).empty())
        ck.add(where, "String should have at least 1 character", "string_too_short");
      else if (ck.length(sv(*s), where, 1, text_max))
        m.text = std::string(sv(*s));
    }
  } else {
    ck.add(at(l, "text"), "Field required", "missing");
  }
  if (auto id = member(*o, "external_message_id")) {
    if (auto s = identifier(ck, *id, at(l, "external_message_id"))) m.external_message_id = *s;
  } else {
    ck.add(at(l, "external_message_id"), "Field required", "missing");
  }
  return ck.issues.size() == before;
}

} // namespace

std::optional<inbound_message> parse_api_inbound(std::string_view body,
                                                 std::vector<issue>& issues) {
  checker ck{issues};
  const auto before = issues.size();
  json::value doc;
  auto o = body_object(body, doc, ck.issues);
  if (!o) return std::nullopt;
  ck.extra_keys(*o, {"event", "contact", "message", "timestamp"}, body_loc);
  if (auto e = given(*o, "event")) {
    auto s = e->if_string();
    if (!s || sv(*s) != inbound_event)
      ck.add(at(body_loc, "event"), "Input should be '" + std::string(inbound_event) + "'", "enum");
  }
  inbound_message m;
  if (auto c = read_contact(ck, *o, at(body_loc, "contact"))) m.contact = std::move(*c);
  read_message(ck, *o, at(body_loc, "message"), m);
  if (auto t = given(*o, "timestamp")) {
    auto s = t->if_string();
    auto micros = s ? parse_rfc3339(sv(*s)) : std::nullopt;
    if (micros)
      m.timestamp = *micros;
    else
      ck.add(at(body_loc, "timestamp"), "Input should be a valid RFC 3339 date-time",
             "value_error");
  }
  if (issues.size() != before) return std::nullopt;
  return m;
}

std::optional<inbound_message> parse_telegram_update(std::string_view body, bool& ignored,
                                                     std::vector<issue>& issues) {
  ignored = false;
  checker ck{issues};
  const auto before = issues.size();
  json::value doc;
  auto o = body_object(body, doc, ck.issues);
  if (!o) return std::nullopt;
  // Edits, stickers, photos, callbacks...: acknowledged (Telegram would resend anything else)
  // and not stored.
  std::string_view key = "message";
  auto v = given(*o, key);
  if (!v) {
    key = "channel_post";
    v = given(*o, key);
  }
  auto mo = v ? v->if_object() : nullptr;
  auto text = mo ? given(*mo, "text") : nullptr;
  if (!text || !text->is_string() || text->get_string().empty()) {
    ignored = true;
    return std::nullopt;
  }
  const auto l = at(body_loc, key);
  auto integer = [&](const json::object& in, std::string_view k,
                     const loc_path& where) -> std::optional<std::int64_t> {
    auto x = member(in, k);
    if (!x) {
      ck.add(at(where, k), "Field required", "missing");
      return std::nullopt;
    }
    auto n = json_int64(*x);
    if (!n) ck.add(at(where, k), "Input should be a valid integer", "int_type");
    return n;
  };
  auto message_id = integer(*mo, "message_id", l);
  std::optional<std::int64_t> chat_id;
  if (auto chat = member(*mo, "chat")) {
    if (auto co = ck.object(*chat, at(l, "chat"))) chat_id = integer(*co, "id", at(l, "chat"));
  } else {
    ck.add(at(l, "chat"), "Field required", "missing");
  }
  if (issues.size() != before) return std::nullopt;

  inbound_message m;
  m.text = std::string(sv(text->get_string()));
  m.external_message_id = std::to_string(*chat_id) + ":" + std::to_string(*message_id);
  m.contact.external_id = std::to_string(*chat_id);
  if (auto from = given(*mo, "from"); from && from->is_object()) {
    std::string name;
    for (auto part : {"first_name", "last_name"}) {
      auto p = given(from->get_object(), part);
      if (!p || !p->is_string()) continue;
      auto t = trim(sv(p->get_string()));
      if (t.empty()) continue;
      if (!name.empty()) name += ' ';
      name += t;
    }
    if (!name.empty()) m.contact.name = std::move(name);
  }
  // The date is informational: a strange one leaves the arrival time in charge.
  if (auto d = given(*mo, "date"))
    if (auto secs = json_int64(*d);
        secs && *secs > 0 && *secs <= std::numeric_limits<std::int64_t>::max() / 1'000'000)
      m.timestamp = *secs * 1'000'000;
  return m;
}

std::pair<std::string, std::optional<std::string>> split_name(std::string_view name) {
  auto t = trim(name);
  auto gap = t.find_first_of(" \t\r\n\f\v");
  if (gap == std::string_view::npos) return {std::string(t), std::nullopt};
  auto rest = trim(t.substr(gap));
  return {std::string(t.substr(0, gap)),
          rest.empty() ? std::nullopt : std::optional<std::string>(std::string(rest))};
}

// ---- Outbound ------------------------------------------------------------------------------

namespace {

// E-mail leaves through net/smtp_client, not as an HTTP request (email::plan_send).
constexpr std::string_view over_smtp = "e-mail is sent over SMTP, not HTTP";

json::value optional_text(const std::optional<std::string>& s) {
  return s ? json::value(*s) : json::value(nullptr);
}

adapter_plan plan_api(const channel& c, const outbound_message& m, std::int64_t now_seconds) {
  adapter_plan plan;
  auto url = config_string(c.config, "outbound_url");
  if (!url) {
    plan.error = "not configured: the channel has no outbound_url";
    return plan;
  }
  // Stored configs were validated; one edited behind the API's back still must not reach the
  // HTTP client as something it would misread.
  if (!parse_url(*url)) {
    plan.error = "not configured: the channel's outbound_url is not a valid URL";
    return plan;
  }
  json::object contact;
  contact["phone"] = optional_text(m.phone);
  contact["email"] = optional_text(m.email);
  contact["external_id"] = optional_text(m.external_id);
  json::object data;
  data["message_id"] = m.message_id;
  data["conversation_id"] = m.conversation_id;
  data["contact_id"] = m.contact_id;
  data["channel_id"] = m.channel_id;
  data["text"] = m.text;
  data["contact"] = std::move(contact);
  // Files, when it has any: where the receiver fetches each (docs/channels.md "Media").
  if (!m.files.empty()) {
    json::array files;
    for (auto& f : m.files)
      files.push_back(
          json::object{{"url", f.url}, {"content_type", f.content_type}, {"filename", f.filename}});
    data["attachments"] = std::move(files);
  }
  json::object envelope;
  envelope["type"] = "message.sent";
  envelope["timestamp"] = format_rfc3339(m.created_at);
  envelope["data"] = std::move(data);

  adapter_request req;
  req.url = std::move(*url);
  req.body = json::serialize(envelope);
  req.headers.emplace_back("content-type", "application/json");
  if (auto secret = config_string(c.config, "signing_secret")) {
    // The id is the message's: a retry carries the same one, so the receiver can deduplicate.
    auto id = "msg_out_" + std::to_string(m.message_id);
    req.headers.emplace_back("webhook-id", id);
    req.headers.emplace_back("webhook-timestamp", std::to_string(now_seconds));
    req.headers.emplace_back("webhook-signature",
                             webhook_signature(*secret, id, now_seconds, req.body));
  }
  plan.request = std::move(req);
  return plan;
}

adapter_plan plan_telegram(const channel& c, const outbound_message& m) {
  adapter_plan plan;
  auto token = config_string(c.config, "bot_token");
  if (!token) {
    plan.error = "not configured: the channel has no bot_token";
    return plan;
  }
  if (!m.external_id || m.external_id->empty()) {
    plan.error = "the contact has no chat on this channel";
    return plan;
  }
  auto base = config_string(c.config, "api_base_url").value_or(std::string(default_telegram_base));
  while (!base.empty() && base.back() == '/') base.pop_back();
  json::object body;
  // Chat ids are integers (negative for groups); "@channelname" is the other form Telegram takes.
  if (auto n = parse_int64(*m.external_id))
    body["chat_id"] = *n;
  else
    body["chat_id"] = *m.external_id;
  body["text"] = m.text;

  adapter_request req;
  req.url = base + "/bot" + *token + "/sendMessage";
  req.body = json::serialize(body);
  req.headers.emplace_back("content-type", "application/json");
  plan.request = std::move(req);
  return plan;
}

// The receiver's id for the message, when its JSON answer names one.
std::optional<std::string> provider_id(std::string_view body) {
  boost::system::error_code ec;
  auto doc = crm::domain::parse_json(body, ec);
  auto o = ec ? nullptr : doc.if_object();
  if (!o) return std::nullopt;
  for (auto key : {"id", "message_id"}) {
    auto v = given(*o, key);
    if (!v) continue;
    if (auto n = json_int64(*v)) return std::to_string(*n);
    // An id is stored as external_message_id (1-200 characters): anything else is no id.
    if (auto s = v->if_string(); s && !s->empty() && utf8_length(sv(*s)) <= external_id_max &&
                                 sv(*s).find('\0') == std::string_view::npos)
      return std::string(sv(*s));
  }
  return std::nullopt;
}

} // namespace

adapter_plan plan_outbound(const channel& c, const outbound_message& m, std::int64_t now_seconds) {
  switch (c.type) {
  case channel_type::api: return plan_api(c, m, now_seconds);
  case channel_type::telegram: return plan_telegram(c, m);
  case channel_type::whatsapp: {
    std::optional<whatsapp::template_message> tpl;
    if (!m.template_json.empty()) {
      tpl = whatsapp::template_from_json(m.template_json);
      if (!tpl) return {std::nullopt, "the stored template is not readable"};
    }
    return whatsapp::plan_send(c, m, tpl);
  }
  case channel_type::sms: return twilio::plan_send(c, m, m.callback_url);
  case channel_type::email: return {std::nullopt, std::string(over_smtp)};
  }
  return {};
}

std::optional<std::string> cannot_write_first(const channel& c, std::optional<std::string> chat,
                                              bool with_template) {
  // Outside the 24-hour window, which a conversation carecrm opens is, WhatsApp takes only an
  // approved template (to the contact's phone, checked as the message leaves).
  if (c.type == channel_type::whatsapp)
    return with_template ? std::nullopt
                         : std::optional<std::string>(
                               "WhatsApp lets a business write first only with an approved "
                               "template");
  outbound_message probe;
  probe.channel_id = c.id;
  probe.external_id = std::move(chat);
  // E-mail reaches any address: the contact's is checked as the message leaves.
  if (c.type == channel_type::email) {
    probe.email = "probe@example.com";
    auto plan = email::plan_send(c, probe, {});
    return plan.m ? std::nullopt : std::optional<std::string>(plan.error);
  }
  // SMS reaches any phone: the contact's is checked as the message leaves.
  if (c.type == channel_type::sms) probe.phone = "+15555550100";
  auto plan = plan_outbound(c, probe, 0);
  if (plan.request) return std::nullopt;
  return plan.error;
}

adapter_result read_outbound_response(channel_type type, int status, std::string_view body) {
  adapter_result r;
  const bool success = status >= 200 && status < 300;
  switch (type) {
  case channel_type::api:
    if (success) {
      r.sent = true;
      r.provider_message_id = provider_id(body);
    } else {
      r.error = "the receiver answered " + std::to_string(status);
    }
    return r;
  case channel_type::telegram: {
    boost::system::error_code ec;
    auto doc = crm::domain::parse_json(body, ec);
    auto o = ec ? nullptr : doc.if_object();
    auto ok = o ? given(*o, "ok") : nullptr;
    if (ok && ok->is_bool() && ok->get_bool() && success) {
      auto result = given(*o, "result");
      auto id = result && result->is_object() ? given(result->get_object(), "message_id") : nullptr;
      if (auto n = id ? json_int64(*id) : std::nullopt) {
        r.sent = true;
        r.provider_message_id = std::to_string(*n);
        return r;
      }
    } else if (ok && ok->is_bool() && !ok->get_bool()) {
      if (auto d = given(*o, "description"); d && d->is_string()) {
        r.error = "telegram: " + std::string(sv(d->get_string()));
        return r;
      }
    }
    r.error = "telegram answered " + std::to_string(status);
    return r;
  }
  case channel_type::whatsapp: return whatsapp::read_send_response(status, body);
  case channel_type::sms: return twilio::read_send_response(status, body);
  case channel_type::email: r.error = over_smtp; return r;
  }
  return r;
}

// ---- Delivery reports ----------------------------------------------------------------------

constexpr std::array<std::string_view, 4> delivery_names = {"sent", "delivered", "read", "failed"};

std::optional<delivery> parse_delivery(std::string_view s) {
  for (std::size_t i = 0; i < delivery_names.size(); ++i)
    if (delivery_names[i] == s) return static_cast<delivery>(i);
  return std::nullopt;
}

std::string_view to_string(delivery d) {
  return delivery_names[static_cast<std::size_t>(d)];
}

unknown_send after_unknown_send(channel_type type) {
  switch (type) {
  case channel_type::api:
  case channel_type::email: return unknown_send::send_again;
  case channel_type::whatsapp:
  case channel_type::sms: return unknown_send::await_report;
  case channel_type::telegram: return unknown_send::give_up;
  }
  return unknown_send::give_up;
}

std::string message_ref(std::int64_t message_id) {
  return std::to_string(message_id);
}

std::optional<std::int64_t> message_ref_of(std::string_view text) {
  if (text.empty() || text.size() > 18 || text[0] == '0') return std::nullopt;
  std::int64_t id = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    id = id * 10 + (c - '0');
  }
  return id;
}

std::vector<std::string_view> delivery_predecessors(delivery d) {
  switch (d) {
  case delivery::sent: return {"queued"};
  case delivery::delivered: return {"queued", "sent"};
  case delivery::read: return {"queued", "sent", "delivered"};
  case delivery::failed: return {"queued", "sent", "delivered"};
  }
  return {};
}

} // namespace crm::domain
