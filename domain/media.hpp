// Media of messages (contract §12, docs/channels.md "Media"): images, PDF and audio a patient
// sends, kept with the message and served to staff at GET /messages/{id}/attachments/{n}. A
// provider's message names its media (WhatsApp: a media id, looked up through the Graph API;
// Twilio: a URL; e-mail: the file in the forwarded form); carecrm fetches and checks each one
// (≤ 16 MiB, an allowed type) after the message is stored. Pure: the requests and the rules.
#pragma once
#include "domain/channel.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace crm::domain::media {

inline constexpr std::size_t max_bytes = 16 * 1024 * 1024;
inline constexpr std::size_t per_message_max = media_per_message_max;
// The types kept: images, PDF, audio (as providers name them).
inline constexpr std::array<std::string_view, 13> allowed_types{
    "image/jpeg", "image/png",  "image/webp", "image/gif", "application/pdf",
    "audio/ogg",  "audio/mpeg", "audio/mp4",  "audio/aac", "audio/amr",
    "audio/wav",  "audio/webm", "audio/x-m4a"};

// "audio/ogg; codecs=opus" → "audio/ogg", lower case.
std::string base_type(std::string_view content_type);
// Why a file of this type and size is not kept (nothing: it is).
std::optional<std::string> refusal(std::string_view content_type, std::size_t size);

// The providers' own limits on files sent (their documentation): Twilio's MMS of 5 MB in all,
// WhatsApp's images of 5 MB (its audio and documents take the 16 MiB kept here).
inline constexpr std::size_t mms_max_bytes = 5 * 1024 * 1024;
inline constexpr std::size_t whatsapp_image_max_bytes = 5 * 1024 * 1024;

// Why a channel of `type` cannot send these files with this text (nothing: it can). Telegram
// channels send text only; WhatsApp sends one file a message, not beside a template, and an
// audio file carries no caption (its text must go as a message of its own); the providers'
// limits above.
std::optional<std::string> cannot_send(channel_type type, const std::vector<media_ref>& files,
                                       std::string_view text, bool with_template);

// What staff read for a message sent with files and no text: "[exame.pdf] [foto.jpg]".
std::string described(const std::vector<media_ref>& files);

// How a message's media is fetched from its provider, one request at a time: `plan_first` for
// the reference the message carried; after each answer `next` says what follows (another
// request, the file, or why it failed and whether another attempt may succeed).
struct fetch_step {
  std::optional<adapter_request> request; // the next request
  std::optional<std::string> data;        // the file (with content_type)
  std::string content_type;
  std::string error; // neither: why not
  bool retry = false;
};
fetch_step plan_first(const channel& c, std::string_view source);
// `step` counts the requests made (1 after the first answer).
fetch_step next(const channel& c, int step, const adapter_request& sent, int status,
                std::string_view content_type, std::string_view location, std::string&& body,
                bool truncated);

// A provider fetches a file carecrm sends (WhatsApp's media link, Twilio's MediaUrl) at a
// capability URL, GET /api/v1/media/{token}: the token names the file and when it stops
// working, signed with the server's keys (secret_keys::hash under link_purpose, bound to the
// tenant). Minted for each send attempt.
inline constexpr std::string_view link_purpose = "media_link";
inline constexpr std::int64_t link_lifetime_us = 3600LL * 1'000'000;
struct link_claim {
  std::int64_t tenant = 0;
  std::int64_t message_id = 0;
  int n = 0;
  std::int64_t expires = 0; // µs
};
std::string link_payload(const link_claim& c); // "tenant.message.n.expires"
std::optional<link_claim> read_link_payload(std::string_view payload);
// base64url(payload) "." base64url(mac)
std::string link_token(std::string_view payload, std::string_view mac);
struct link_parts {
  std::string payload;
  std::string mac;
};
std::optional<link_parts> split_link_token(std::string_view token);

} // namespace crm::domain::media
