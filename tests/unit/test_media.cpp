// Unit tests for domain/media (docs/channels.md "Media"): which files are kept, and the requests
// that fetch a file from WhatsApp's Graph API (lookup, then download, both with the access
// token) and from Twilio (the media URL with the account's credentials, redirects followed with
// the credentials only to the same host).
#include "domain/media.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

namespace {

channel whatsapp() {
  channel c;
  c.type = channel_type::whatsapp;
  c.config = {{"phone_number_id", "123"},
              {"access_token", "EAAG-token"},
              {"api_base_url", "https://graph.example/"}};
  return c;
}

channel sms() {
  channel c;
  c.type = channel_type::sms;
  c.config = {{"account_sid", "AC00000000000000000000000000000001"}, {"auth_token", "tok"}};
  return c;
}

std::string header(const adapter_request& r, const std::string& name) {
  for (auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

} // namespace

TEST(media, keeps_images_pdf_and_audio_up_to_16_mib) {
  EXPECT_EQ(media::base_type(" Audio/OGG; codecs=opus"), "audio/ogg");
  EXPECT_EQ(media::refusal("image/jpeg", 1000), std::nullopt);
  EXPECT_EQ(media::refusal("application/pdf", media::max_bytes), std::nullopt);
  EXPECT_EQ(*media::refusal("application/pdf", media::max_bytes + 1),
            "media over 16 MiB (16777217 bytes) is not kept");
  EXPECT_EQ(*media::refusal("text/html", 10),
            "media of type text/html is not kept: images, PDF and audio are");
  EXPECT_TRUE(media::refusal("", 10));
  EXPECT_TRUE(media::refusal("image/svg+xml", 10)); // can carry script
}

TEST(media, a_whatsapp_file_is_looked_up_then_downloaded_with_the_token) {
  auto c = whatsapp();
  auto first = media::plan_first(c, "MEDIA1");
  ASSERT_TRUE(first.request);
  EXPECT_EQ(first.request->method, "GET");
  EXPECT_EQ(first.request->url, "https://graph.example/v19.0/MEDIA1");
  EXPECT_EQ(header(*first.request, "authorization"), "Bearer EAAG-token");
  auto second = media::next(c, 1, *first.request, 200, "application/json", "",
                            R"({"url": "https://lookaside.example/f?x=1", "mime_type": "image/png",
                                "file_size": 10})",
                            false);
  ASSERT_TRUE(second.request);
  EXPECT_EQ(second.request->url, "https://lookaside.example/f?x=1");
  EXPECT_EQ(header(*second.request, "authorization"), "Bearer EAAG-token");
  auto file = media::next(c, 2, *second.request, 200, "image/png", "", "PNGDATA", false);
  ASSERT_TRUE(file.data);
  EXPECT_EQ(*file.data, "PNGDATA");
  EXPECT_EQ(file.content_type, "image/png");
  // Larger than allowed by the lookup's own account: not downloaded.
  auto big = media::next(c, 1, *first.request, 200, "application/json", "",
                         R"({"url": "https://x.example/f", "file_size": 20000000})", false);
  EXPECT_FALSE(big.request);
  EXPECT_FALSE(big.retry);
  // Cut off at the limit while reading: refused.
  auto cut = media::next(c, 2, *second.request, 200, "image/png", "", "PNG", true);
  EXPECT_FALSE(cut.data);
  EXPECT_EQ(cut.error, "media over 16 MiB is not kept");
  // Throttling and server errors may pass later; a 404 will not.
  EXPECT_TRUE(media::next(c, 1, *first.request, 429, "", "", "", false).retry);
  EXPECT_TRUE(media::next(c, 1, *first.request, 503, "", "", "", false).retry);
  EXPECT_FALSE(media::next(c, 1, *first.request, 404, "", "", "", false).retry);
  EXPECT_FALSE(media::next(c, 1, *first.request, 200, "", "", "not json", false).request);
}

TEST(media, a_twilio_file_follows_redirects_with_credentials_only_to_the_same_host) {
  auto c = sms();
  auto first = media::plan_first(c, "https://api.twilio.com/2010-04-01/Accounts/AC1/Media/ME1");
  ASSERT_TRUE(first.request);
  EXPECT_EQ(header(*first.request, "authorization"),
            "Basic QUMwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMTp0b2s=");
  auto away = media::next(c, 1, *first.request, 307, "", "https://s3.example/ME1?sig=1", "", false);
  ASSERT_TRUE(away.request);
  EXPECT_EQ(away.request->url, "https://s3.example/ME1?sig=1");
  EXPECT_EQ(header(*away.request, "authorization"), "");
  auto same = media::next(c, 1, *first.request, 302, "", "https://api.twilio.com/other", "", false);
  ASSERT_TRUE(same.request);
  EXPECT_EQ(header(*same.request, "authorization"), header(*first.request, "authorization"));
  EXPECT_FALSE(media::next(c, 1, *first.request, 302, "", "ftp://x", "", false).request);
  EXPECT_FALSE(media::next(c, 5, *first.request, 302, "", "https://x.example/", "", false).request);
  // Another type has nothing to fetch.
  channel api;
  EXPECT_FALSE(media::plan_first(api, "x").request);
}

TEST(media, each_channel_type_sends_the_files_it_can) {
  std::vector<media_ref> pdf{{"", "application/pdf", "laudo.pdf", "%PDF"}};
  std::vector<media_ref> voice{{"", "audio/ogg", "voice.ogg", "OggS"}};
  EXPECT_EQ(media::cannot_send(channel_type::telegram, pdf, "x", false),
            "Telegram channels send text only");
  EXPECT_EQ(media::cannot_send(channel_type::telegram, {}, "x", false), std::nullopt);
  EXPECT_EQ(media::cannot_send(channel_type::whatsapp, pdf, "x", false), std::nullopt);
  EXPECT_TRUE(media::cannot_send(channel_type::whatsapp, pdf, "x", true));
  auto two = pdf;
  two.push_back(pdf.front());
  EXPECT_EQ(media::cannot_send(channel_type::whatsapp, two, "", false),
            "WhatsApp sends one file a message");
  EXPECT_EQ(media::cannot_send(channel_type::sms, two, "", false), std::nullopt);
  EXPECT_TRUE(media::cannot_send(channel_type::whatsapp, voice, "listen", false));
  EXPECT_EQ(media::cannot_send(channel_type::whatsapp, voice, "", false), std::nullopt);
  // The providers' limits: an MMS of 5 MB in all, a WhatsApp image of 5 MB.
  std::vector<media_ref> big{{"", "image/jpeg", "a.jpg", std::string(3 * 1024 * 1024, 'x')},
                             {"", "image/jpeg", "b.jpg", std::string(3 * 1024 * 1024, 'x')}};
  EXPECT_EQ(media::cannot_send(channel_type::sms, big, "", false),
            "an MMS carries at most 5 MB of files (Twilio's limit)");
  EXPECT_EQ(media::cannot_send(channel_type::email, big, "", false), std::nullopt);
  big.front().data = std::string(6 * 1024 * 1024, 'x');
  big.pop_back();
  EXPECT_EQ(media::cannot_send(channel_type::whatsapp, big, "", false),
            "WhatsApp takes images of at most 5 MB");
  big.front().content_type = "application/pdf";
  EXPECT_EQ(media::cannot_send(channel_type::whatsapp, big, "", false), std::nullopt);
  EXPECT_EQ(media::described(two), "[laudo.pdf] [laudo.pdf]");
  EXPECT_EQ(media::described({{"", "image/png", "", std::nullopt}}), "[image/png]");
}

TEST(media, a_link_token_names_one_file_and_reads_back_only_whole) {
  media::link_claim c{7, 1234, 2, 1'900'000'000'000'000};
  auto payload = media::link_payload(c);
  EXPECT_EQ(payload, "7.1234.2.1900000000000000");
  auto back = media::read_link_payload(payload);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->tenant, 7);
  EXPECT_EQ(back->message_id, 1234);
  EXPECT_EQ(back->n, 2);
  EXPECT_EQ(back->expires, c.expires);
  for (auto bad : {"7.1234.2", "7.1234.2.1.5", "7.x.2.1", "7.1234.10.1", "-7.1.1.1", "", "7..2.1"})
    EXPECT_FALSE(media::read_link_payload(bad)) << bad;
  auto token = media::link_token(payload, "k1:mac-bytes");
  auto parts = media::split_link_token(token);
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->payload, payload);
  EXPECT_EQ(parts->mac, "k1:mac-bytes");
  EXPECT_FALSE(media::split_link_token("no-dot"));
  EXPECT_FALSE(media::split_link_token("a.!!"));
  EXPECT_FALSE(media::split_link_token(std::string(2000, 'a') + ".b"));
}
