// SMS through Twilio's Messages API as carecrm speaks it (contract §12, docs/channels.md "SMS"):
// the request signature of its webhooks (X-Twilio-Signature), an incoming message or a status
// callback read from the form Twilio posts, the send (a form POST with basic auth), its answer
// (retry or not), and how many segments a text takes (GSM-7 or UCS-2). Pure: no I/O.
#pragma once
#include "domain/channel.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crm::domain::twilio {

inline constexpr std::string_view default_base_url = "https://api.twilio.com";
// An account SID: "AC" and 32 hexadecimal digits.
inline constexpr std::size_t account_sid_length = 34;

// A posted form's fields, decoded, in the order sent.
using form = std::vector<std::pair<std::string, std::string>>;

// Twilio's X-Twilio-Signature: base64 of HMAC-SHA1, under the auth token, of the URL Twilio
// called followed by each POST field's name and value, sorted by name.
std::string signature(std::string_view auth_token, std::string_view url, const form& fields);
bool signature_matches(std::string_view auth_token, std::string_view url, const form& fields,
                       std::string_view header);

// How a text travels as SMS: in GSM-7 (160 characters, 153 a segment when split; the extension
// table's characters count twice) unless a character is outside it, then UCS-2 (70 UTF-16 units,
// 67 a segment).
struct segments {
  int count = 1;
  bool unicode = false;
};
segments count_segments(std::string_view text);

// What Twilio posted to the channel's webhook: an incoming message (SMS or MMS), or a status
// callback of a message carecrm sent, or something else (acknowledged, not stored).
struct webhook {
  std::optional<inbound_message> message;
  std::optional<status_update> status;
};
// `account_sid`: the channel's; a post for another account is refused (issues). Missing
// MessageSid or From → issues (loc ["body", field]).
std::optional<webhook> parse_webhook(const form& fields, std::string_view account_sid,
                                     std::vector<issue>& issues);

// POST {base}/2010-04-01/Accounts/{sid}/Messages.json, form-encoded To, From, Body and
// StatusCallback (`status_url`, the channel's webhook, with ?message= carecrm's id of the
// message so that its reports name it: after_unknown_send), with basic auth.
adapter_plan plan_send(const channel& c, const outbound_message& m, std::string_view status_url);
// 201 {"sid": "SM..."} is sent; an error {"code", "message"} says whether another attempt may
// succeed (429, 5xx, 20429) or not (a bad number, an unverified sender, bad credentials...).
adapter_result read_send_response(int status, std::string_view body);
// carecrm's id of the message a status callback is for, from the URL Twilio called (the
// ?message= plan_send put in its StatusCallback); nothing for a URL without one.
std::optional<std::int64_t> status_callback_ref(std::string_view url);

} // namespace crm::domain::twilio
