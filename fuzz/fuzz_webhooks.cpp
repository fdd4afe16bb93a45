// Inbound webhook bodies: the generic channel API body, Telegram updates, WhatsApp's webhook,
// a multipart form (Mailgun's) and e-mail threading headers, a workflow webhook's Standard
// Webhooks signature check with its JSON body, and what providers answer when carecrm fetches a
// file (a media lookup, a redirect) or ask for one (a media link's token).
#include "domain/channel.hpp"
#include "domain/email.hpp"
#include "domain/json_nul.hpp"
#include "domain/media.hpp"
#include "domain/whatsapp.hpp"
#include "domain/workflow.hpp"

#include <boost/json/parse.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  std::vector<crm::domain::issue> issues;
  (void)crm::domain::parse_api_inbound(body, issues);
  bool ignored = false;
  issues.clear();
  (void)crm::domain::parse_telegram_update(body, ignored, issues);
  issues.clear();
  (void)crm::domain::whatsapp::parse_webhook(body, "1069", issues);
  if (auto parts = crm::domain::email::parse_multipart(body, "XyZ")) {
    issues.clear();
    (void)crm::domain::email::parse_inbound(parts->fields, parts->files, issues);
  }
  (void)crm::domain::email::answered_conversation(body, body);
  if (auto parts = crm::domain::media::split_link_token(body))
    (void)crm::domain::media::read_link_payload(parts->payload);
  (void)crm::domain::media::read_link_payload(body);
  {
    crm::domain::channel wa;
    wa.type = crm::domain::channel_type::whatsapp;
    wa.config = {{"access_token", "t"}};
    auto first = crm::domain::media::plan_first(wa, "MEDIA1");
    if (first.request) {
      (void)crm::domain::media::next(wa, 1, *first.request, 200, body, body, std::string(body),
                                     false);
      (void)crm::domain::media::next(wa, 1, *first.request, 302, body, body, std::string(body),
                                     false);
    }
    (void)crm::domain::media::refusal(body, size);
  }
  // Headers from the first line ("id ts sig"), the body after it.
  auto nl = body.find('\n');
  auto head = body.substr(0, nl);
  auto s1 = head.find(' '), s2 = head.find(' ', s1 == std::string_view::npos ? s1 : s1 + 1);
  auto id = head.substr(0, s1);
  auto ts = s1 == std::string_view::npos ? std::string_view{} : head.substr(s1 + 1, s2 - s1 - 1);
  auto sig = s2 == std::string_view::npos ? std::string_view{} : head.substr(s2 + 1);
  auto rest = nl == std::string_view::npos ? std::string_view{} : body.substr(nl + 1);
  (void)crm::domain::verify_standard_webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", id, ts, sig,
                                             rest, 1'700'000'000);
  boost::json::error_code ec;
  auto v = boost::json::parse(rest, ec);
  if (!ec) (void)crm::domain::nul_location(rest, v);
  return 0;
}
