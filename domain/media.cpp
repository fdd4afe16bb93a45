#include "domain/media.hpp"

#include "domain/crypto.hpp"
#include "domain/json_parse.hpp"
#include "domain/validation.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>

namespace crm::domain::media {
namespace {

namespace json = boost::json;

fetch_step failed(std::string why, bool retry) {
  fetch_step s;
  s.error = std::move(why);
  s.retry = retry;
  return s;
}

fetch_step get(std::string url, std::vector<std::pair<std::string, std::string>> headers) {
  fetch_step s;
  adapter_request r;
  r.method = "GET";
  r.url = std::move(url);
  r.headers = std::move(headers);
  s.request = std::move(r);
  return s;
}

std::string host_of(std::string_view url) {
  auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return {};
  auto rest = url.substr(scheme + 3);
  return std::string(rest.substr(0, rest.find_first_of("/?#")));
}

bool retryable(int status) {
  return status == 408 || status == 429 || status >= 500;
}

} // namespace

std::string base_type(std::string_view content_type) {
  return ascii_lower(trim(content_type.substr(0, content_type.find(';'))));
}

std::optional<std::string> refusal(std::string_view content_type, std::size_t size) {
  auto t = base_type(content_type);
  if (std::find(allowed_types.begin(), allowed_types.end(), t) == allowed_types.end())
    return "media of type " + (t.empty() ? std::string("(none)") : t) +
           " is not kept: images, PDF and audio are";
  if (size > max_bytes) return "media over 16 MiB (" + std::to_string(size) + " bytes) is not kept";
  return std::nullopt;
}

std::optional<std::string> cannot_send(channel_type type, const std::vector<media_ref>& files,
                                       std::string_view text, bool with_template) {
  if (files.empty()) return std::nullopt;
  if (type == channel_type::telegram) return "Telegram channels send text only";
  if (type == channel_type::sms) {
    std::size_t total = 0;
    for (auto& f : files) total += f.data ? f.data->size() : 0;
    if (total > mms_max_bytes) return "an MMS carries at most 5 MB of files (Twilio's limit)";
  }
  if (type != channel_type::whatsapp) return std::nullopt;
  if (base_type(files.front().content_type).starts_with("image/") && files.front().data &&
      files.front().data->size() > whatsapp_image_max_bytes)
    return "WhatsApp takes images of at most 5 MB";
  if (with_template) return "a WhatsApp template is sent without files";
  if (files.size() > 1) return "WhatsApp sends one file a message";
  if (base_type(files.front().content_type).starts_with("audio/") && !text.empty())
    return "a WhatsApp audio message carries no text: send the text as a message of its own";
  return std::nullopt;
}

std::string described(const std::vector<media_ref>& files) {
  std::string out;
  for (auto& f : files)
    out += (out.empty() ? "[" : " [") +
           (f.filename.empty() ? base_type(f.content_type) : f.filename) + "]";
  return out;
}

fetch_step plan_first(const channel& c, std::string_view source) {
  if (c.type == channel_type::whatsapp) {
    // GET /{version}/{media-id} with the access token gives the file's short-lived URL.
    auto token = config_string(c.config, "access_token");
    if (!token) return failed("not configured: the channel has no access_token", false);
    auto base = config_string(c.config, "api_base_url").value_or("https://graph.facebook.com");
    while (!base.empty() && base.back() == '/') base.pop_back();
    return get(base + "/" + config_string(c.config, "api_version").value_or("v19.0") + "/" +
                   std::string(source),
               {{"authorization", "Bearer " + *token}});
  }
  if (c.type == channel_type::sms) {
    auto sid = config_string(c.config, "account_sid");
    auto token = config_string(c.config, "auth_token");
    if (!sid || !token) return failed("not configured: the channel has no auth_token", false);
    return get(std::string(source),
               {{"authorization", "Basic " + base64_encode(*sid + ":" + *token)}});
  }
  return failed("this channel type has no media to fetch", false);
}

fetch_step next(const channel& c, int step, const adapter_request& sent, int status,
                std::string_view content_type, std::string_view location, std::string&& body,
                bool truncated) {
  if (step > 4) return failed("too many redirects", false);
  // A redirect (Twilio sends its media from elsewhere): followed, with the credentials only to
  // the same host.
  if (status == 301 || status == 302 || status == 303 || status == 307 || status == 308) {
    if (location.empty() || !(location.starts_with("https://") || location.starts_with("http://")))
      return failed("a redirect without a usable Location", false);
    std::vector<std::pair<std::string, std::string>> headers;
    if (host_of(location) == host_of(sent.url)) headers = sent.headers;
    return get(std::string(location), std::move(headers));
  }
  if (status < 200 || status > 299)
    return failed("the provider answered " + std::to_string(status), retryable(status));
  const bool lookup = c.type == channel_type::whatsapp && step == 1;
  if (lookup) {
    json::error_code ec;
    auto v = parse_json(body, ec);
    auto o = ec ? nullptr : v.if_object();
    auto url = o ? o->if_contains("url") : nullptr;
    if (!url || !url->is_string() ||
        !(url->get_string().starts_with("https://") || url->get_string().starts_with("http://")))
      return failed("the media lookup gave no url", false);
    if (auto size = o->if_contains("file_size");
        size && size->is_int64() && size->get_int64() > std::int64_t(max_bytes))
      return failed(
          "media over 16 MiB (" + std::to_string(size->get_int64()) + " bytes) is not kept", false);
    return get(std::string(url->get_string()), sent.headers);
  }
  if (truncated) return failed("media over 16 MiB is not kept", false);
  fetch_step s;
  s.content_type = base_type(content_type);
  s.data = std::move(body);
  return s;
}

std::string link_payload(const link_claim& c) {
  return std::to_string(c.tenant) + "." + std::to_string(c.message_id) + "." + std::to_string(c.n) +
         "." + std::to_string(c.expires);
}

std::optional<link_claim> read_link_payload(std::string_view payload) {
  std::array<std::int64_t, 4> v{};
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto dot = payload.find('.');
    // Four numbers, three dots: no more, no fewer.
    if ((i + 1 < v.size()) == (dot == std::string_view::npos)) return std::nullopt;
    auto part = payload.substr(0, dot);
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v[i]);
    if (part.empty() || ec != std::errc{} || end != part.data() + part.size() || v[i] < 0)
      return std::nullopt;
    if (dot != std::string_view::npos) payload.remove_prefix(dot + 1);
  }
  if (v[2] >= std::int64_t(per_message_max)) return std::nullopt;
  return link_claim{v[0], v[1], static_cast<int>(v[2]), v[3]};
}

std::string link_token(std::string_view payload, std::string_view mac) {
  return base64url_encode(payload) + "." + base64url_encode(mac);
}

std::optional<link_parts> split_link_token(std::string_view token) {
  auto dot = token.find('.');
  if (dot == std::string_view::npos || token.size() > 1024) return std::nullopt;
  auto payload = base64url_decode(token.substr(0, dot));
  auto mac = base64url_decode(token.substr(dot + 1));
  if (!payload || !mac || payload->empty() || mac->empty()) return std::nullopt;
  return link_parts{std::move(*payload), std::move(*mac)};
}

} // namespace crm::domain::media
