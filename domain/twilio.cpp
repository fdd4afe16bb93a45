// Twilio's wire format for SMS (docs/channels.md "SMS"): the Messages resource
// (https://www.twilio.com/docs/messaging/api/message-resource), the incoming-message and status
// callback webhooks, and the request signature (https://www.twilio.com/docs/usage/security).
#include "domain/twilio.hpp"

#include "domain/crypto.hpp"
#include "domain/json_check.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

namespace crm::domain::twilio {
namespace json = boost::json;
using namespace detail;

namespace {

const std::string* field(const form& f, std::string_view name) {
  for (auto& [k, v] : f)
    if (k == name) return &v;
  return nullptr;
}

// application/x-www-form-urlencoded, as Twilio's API reads it.
std::string form_encode(const form& f) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  auto put = [&](std::string_view s) {
    for (unsigned char c : s) {
      if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.' || c == '~') {
        out += static_cast<char>(c);
      } else if (c == ' ') {
        out += '+';
      } else {
        out += '%';
        out += hex[c >> 4];
        out += hex[c & 15];
      }
    }
  };
  for (auto& [k, v] : f) {
    if (!out.empty()) out += '&';
    put(k);
    out += '=';
    put(v);
  }
  return out;
}

// The code points of valid UTF-8 (an invalid byte counts as U+FFFD).
std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < s.size();) {
    auto n = utf8_sequence(s, i);
    if (n == 0) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    auto b = static_cast<unsigned char>(s[i]);
    char32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (std::size_t k = 1; k < n; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// GSM 03.38's default alphabet and its extension table (each of those takes an escape too).
constexpr std::u32string_view gsm_basic =
    U"@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    U"ÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
constexpr std::u32string_view gsm_extension = U"^{}\\[~]|€\f";

std::string describe_media(const form& f) {
  std::string out;
  auto n = field(f, "NumMedia");
  int count = 0;
  if (n) std::from_chars(n->data(), n->data() + n->size(), count);
  for (int i = 0; i < std::min(count, 10); ++i) {
    auto url = field(f, "MediaUrl" + std::to_string(i));
    auto type = field(f, "MediaContentType" + std::to_string(i));
    if (!url) continue;
    if (!out.empty()) out += ' ';
    out += "[media " + (type ? *type : std::string("?")) + " " + *url + "]";
  }
  return out;
}

constexpr std::array<std::int64_t, 3> retry_codes = {20429, 20500, 20503};

} // namespace

std::string signature(std::string_view auth_token, std::string_view url, const form& fields) {
  auto sorted = fields;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string data(url);
  for (auto& [k, v] : sorted) {
    data += k;
    data += v;
  }
  return base64_encode(hmac_sha1(auth_token, data));
}

bool signature_matches(std::string_view auth_token, std::string_view url, const form& fields,
                       std::string_view header) {
  if (auth_token.empty() || header.empty()) return false;
  return constant_time_equal(trim(header), signature(auth_token, url, fields));
}

segments count_segments(std::string_view text) {
  auto cps = code_points(text);
  segments s;
  std::size_t septets = 0, units = 0;
  for (auto cp : cps) {
    units += cp > 0xFFFF ? 2 : 1;
    if (gsm_basic.find(cp) != std::u32string_view::npos)
      septets += 1;
    else if (gsm_extension.find(cp) != std::u32string_view::npos)
      septets += 2;
    else
      s.unicode = true;
  }
  auto split = [](std::size_t n, std::size_t single, std::size_t each) {
    return n <= single ? 1 : static_cast<int>((n + each - 1) / each);
  };
  s.count = s.unicode ? split(units, 70, 67) : split(septets, 160, 153);
  return s;
}

std::optional<webhook> parse_webhook(const form& f, std::string_view account_sid,
                                     std::vector<issue>& issues) {
  const auto before = issues.size();
  auto require = [&](std::string_view name) -> const std::string* {
    auto v = field(f, name);
    if (!v || v->empty()) {
      issues.push_back({{std::string("body"), std::string(name)}, "Field required", "missing"});
      return nullptr;
    }
    if (!is_text(*v) || utf8_length(*v) > 4096) {
      issues.push_back({{std::string("body"), std::string(name)},
                        "not text of at most 4096 characters",
                        "value_error"});
      return nullptr;
    }
    return v;
  };
  for (auto& [k, v] : f)
    if (!is_text(k) || !is_text(v)) {
      issues.push_back({{std::string("body")}, "a field that is not UTF-8 text", "value_error"});
      return std::nullopt;
    }
  auto account = require("AccountSid");
  if (account && *account != account_sid)
    issues.push_back({{std::string("body"), std::string("AccountSid")},
                      "not the channel's account",
                      "value_error"});
  auto sid = field(f, "MessageSid");
  if (!sid) sid = field(f, "SmsSid");
  if (!sid || sid->empty() || utf8_length(*sid) > channel_rules::external_id_max)
    issues.push_back(
        {{std::string("body"), std::string("MessageSid")}, "Field required", "missing"});
  if (issues.size() != before) return std::nullopt;

  webhook out;
  auto status = field(f, "MessageStatus");
  if (!status) status = field(f, "SmsStatus");
  if (status && *status != "received" && *status != "receiving") {
    // A status callback of a message carecrm sent. Twilio's own queue (queued, accepted,
    // sending, scheduled) says nothing carecrm shows.
    std::optional<delivery> d;
    if (*status == "sent") d = delivery::sent;
    if (*status == "delivered") d = delivery::delivered;
    if (*status == "read") d = delivery::read;
    if (*status == "undelivered" || *status == "failed" || *status == "canceled")
      d = delivery::failed;
    if (!d) return out;
    status_update u;
    u.provider_message_id = *sid;
    u.status = *d;
    if (*d == delivery::failed) {
      std::string why = "twilio: " + *status;
      if (auto code = field(f, "ErrorCode"); code && !code->empty()) why += " " + *code;
      if (auto msg = field(f, "ErrorMessage"); msg && !msg->empty())
        why += " " + std::string(utf8_prefix(*msg, 500));
      u.error = std::move(why);
    }
    out.status = std::move(u);
    return out;
  }
  auto from = require("From");
  if (from && !is_e164(*from))
    issues.push_back(
        {{std::string("body"), std::string("From")}, "an E.164 phone number", "value_error.phone"});
  if (issues.size() != before) return std::nullopt;
  inbound_message m;
  m.external_message_id = *sid;
  m.contact.phone = *from;
  m.contact.external_id = *from;
  std::string text = field(f, "Body") ? std::string(trim(*field(f, "Body"))) : std::string();
  if (auto media = describe_media(f); !media.empty()) text += (text.empty() ? "" : " ") + media;
  {
    int count = 0;
    if (auto n = field(f, "NumMedia")) std::from_chars(n->data(), n->data() + n->size(), count);
    for (int i = 0; i < std::min<int>(count, media_per_message_max); ++i) {
      auto url = field(f, "MediaUrl" + std::to_string(i));
      auto type = field(f, "MediaContentType" + std::to_string(i));
      if (url && (url->starts_with("https://") || url->starts_with("http://")))
        m.media.push_back({*url, type ? *type : std::string(), "", std::nullopt});
    }
  }
  m.text = text.empty() ? std::string("(empty message)")
                        : std::string(utf8_prefix(text, channel_rules::text_max));
  out.message = std::move(m);
  return out;
}

adapter_plan plan_send(const channel& c, const outbound_message& m, std::string_view status_url) {
  adapter_plan plan;
  auto sid = config_string(c.config, "account_sid");
  auto token = config_string(c.config, "auth_token");
  auto from = config_string(c.config, "from_number");
  if (!sid || !token || !from) {
    plan.error = "not configured: the channel has no account_sid, auth_token or from_number";
    return plan;
  }
  std::optional<std::string> to;
  if (m.external_id && is_e164(*m.external_id)) to = m.external_id;
  if (!to && m.phone && is_e164(*m.phone)) to = m.phone;
  if (!to) {
    plan.error = "the contact has no phone number";
    return plan;
  }
  auto base = config_string(c.config, "api_base_url").value_or(std::string(default_base_url));
  while (!base.empty() && base.back() == '/') base.pop_back();
  form f = {{"To", *to}, {"From", *from}, {"Body", m.text}};
  if (!status_url.empty())
    f.emplace_back("StatusCallback", m.message_id > 0 ? std::string(status_url) +
                                                            "?message=" + message_ref(m.message_id)
                                                      : std::string(status_url));
  for (auto& file : m.files) f.emplace_back("MediaUrl", file.url); // an MMS
  adapter_request req;
  req.url = base + "/2010-04-01/Accounts/" + *sid + "/Messages.json";
  req.body = form_encode(f);
  req.headers.emplace_back("content-type", "application/x-www-form-urlencoded");
  req.headers.emplace_back("authorization", "Basic " + base64_encode(*sid + ":" + *token));
  plan.request = std::move(req);
  return plan;
}

std::optional<std::int64_t> status_callback_ref(std::string_view url) {
  auto q = url.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  auto query = url.substr(q + 1);
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    if (pair.starts_with("message=")) return message_ref_of(pair.substr(8));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

adapter_result read_send_response(int status, std::string_view body) {
  adapter_result r;
  boost::system::error_code ec;
  auto doc = parse_json(body, ec);
  auto o = ec ? nullptr : doc.if_object();
  if (status >= 200 && status < 300 && o) {
    if (auto sid = given(*o, "sid"); sid && sid->is_string() && !sid->get_string().empty() &&
                                     sid->get_string().size() <= channel_rules::external_id_max) {
      r.sent = true;
      r.provider_message_id = std::string(sv(sid->get_string()));
      return r;
    }
  }
  r.retry = status == 429 || status >= 500 || status < 200;
  if (o) {
    std::optional<std::int64_t> code;
    if (auto c = given(*o, "code")) code = as_integer(*c);
    auto msg = given(*o, "message");
    if (code || (msg && msg->is_string())) {
      r.error = "twilio:";
      if (code) r.error += " " + std::to_string(*code);
      if (msg && msg->is_string())
        r.error += " " + std::string(utf8_prefix(sv(msg->get_string()), 500));
      if (code && std::find(retry_codes.begin(), retry_codes.end(), *code) != retry_codes.end())
        r.retry = true;
      return r;
    }
  }
  r.retry = true;
  r.error = "twilio answered " + std::to_string(status);
  return r;
}

} // namespace crm::domain::twilio
