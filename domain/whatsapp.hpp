// The WhatsApp Cloud API as carecrm speaks it (contract §12, docs/channels.md "WhatsApp"): the
// webhook's signature and verification handshake, its payload read into messages and delivery
// statuses, the send request (free text or an approved template), the answer's error codes
// (retry or not), the 24-hour customer-service window and the template list. Pure: no I/O.
#pragma once
#include "domain/channel.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain::whatsapp {

inline constexpr std::string_view default_base_url = "https://graph.facebook.com";
inline constexpr std::string_view default_api_version = "v19.0";
// Outside this long after the contact's last message, only an approved template may be sent.
inline constexpr std::int64_t window_micros = 24LL * 3600 * 1'000'000;
// A template's name (lower-case letters, digits, _), its language code, its parameters.
inline constexpr std::size_t template_name_max = 512;
inline constexpr std::size_t template_language_max = 15;
inline constexpr std::size_t template_parameters_max = 20;
inline constexpr std::size_t template_parameter_max = 1024;

// ---- The webhook ------------------------------------------------------------------------

// Whether `header` (X-Hub-Signature-256: "sha256=<hex>") is the HMAC-SHA256 of `body` under
// `app_secret`; compared in constant time. Meta signs the raw bytes it sent.
bool signature_matches(std::string_view app_secret, std::string_view body, std::string_view header);
// The header value for `body`, as Meta computes it (tests and the benchmark sign with it).
std::string signature(std::string_view app_secret, std::string_view body);

// The subscription handshake (GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…):
// true when the mode is subscribe and the token is the channel's (constant time).
bool verification_accepted(std::string_view mode, std::string_view token,
                           std::string_view verify_token);

// What one webhook POST carries for the channel's number: messages (contact by wa_id, with the
// profile name), delivery statuses, and how many entries were for something else (another
// number of the app, an unknown field, a status carecrm does not track).
struct webhook_batch {
  std::vector<inbound_message> messages;
  std::vector<status_update> statuses;
  std::size_t ignored = 0;
};
// `phone_number_id`: the channel's; changes for other numbers are counted as ignored. Not
// JSON, or not the shape Meta documents → nothing and issues (loc starting with "body").
// Messages other than text (media, location, a reaction...) are kept with a text that says what
// they were and the provider's media id ("[image] caption (media 1234)"), so staff see them.
std::optional<webhook_batch> parse_webhook(std::string_view body, std::string_view phone_number_id,
                                           std::vector<issue>& issues);

// ---- Sending ----------------------------------------------------------------------------

// An approved template with its body parameters, in order ({{1}}, {{2}}, ...).
struct template_message {
  std::string name;
  std::string language; // "pt_BR", "en_US", "es"
  std::vector<std::string> parameters;
};
// Reads a request's `template` object ({"name", "language", "parameters"?}) at `loc`.
std::optional<template_message>
parse_template(const boost::json::value& v, std::vector<loc_part> loc, std::vector<issue>& issues);
std::string template_to_json(const template_message& t);
std::optional<template_message> template_from_json(std::string_view text);
// How a template message reads in the conversation for staff: "[template name (language)]
// p1 | p2".
std::string template_text(const template_message& t);

// POST {base}/{version}/{phone_number_id}/messages with the access token: text, or the
// template when `tpl` is set. `to`: the contact's WhatsApp id (digits), else the phone without
// its "+".
adapter_plan plan_send(const channel& c, const outbound_message& m,
                       const std::optional<template_message>& tpl);
// The answer: {"messages": [{"id": "wamid..."}]} is sent; an error says whether another
// attempt may succeed (429, 5xx and the throttling and temporary codes) or not (a bad token, a
// number that is not on WhatsApp, the window closed, a template that does not exist...).
adapter_result read_send_response(int status, std::string_view body);

// True when a free-text message to a contact whose last message came at `last_inbound` (0:
// never) may not be sent at `now`.
bool outside_window(std::int64_t last_inbound, std::int64_t now);

// GET {base}/{version}/{business_account_id}/message_templates: the request, or why there is
// none (no business_account_id configured).
adapter_plan plan_list_templates(const channel& c);
// The provider's answer as carecrm lists it: {"items": [{"name", "language", "status",
// "category", "body", "parameters"}]} (parameters: how many {{n}} the body has); or an error.
outcome<std::string> read_templates(int status, std::string_view body);

} // namespace crm::domain::whatsapp
