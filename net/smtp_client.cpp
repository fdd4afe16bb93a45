// libcurl's SMTP and MIME under a small queue of threads (net/smtp_client.hpp).
#include "net/smtp_client.hpp"

#include "net/address_guard.hpp"

#include <curl/curl.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>

namespace crm::net {
namespace {

std::once_flag curl_once;

// A header value on one line: CR and LF (header injection) become spaces.
std::string one_line(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c == '\r' || c == '\n') c = ' ';
  return out;
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

std::string base64(std::string_view in) {
  static constexpr char table[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    auto n = (static_cast<unsigned char>(in[i]) << 16) |
             (static_cast<unsigned char>(in[i + 1]) << 8) | static_cast<unsigned char>(in[i + 2]);
    out += table[(n >> 18) & 63];
    out += table[(n >> 12) & 63];
    out += table[(n >> 6) & 63];
    out += table[n & 63];
  }
  if (i < in.size()) {
    auto n = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += table[(n >> 18) & 63];
    out += table[(n >> 12) & 63];
    out += i + 1 < in.size() ? table[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string mailbox(std::string_view name, std::string_view address) {
  if (name.empty()) return "<" + one_line(address) + ">";
  std::string shown = mime_header_text(one_line(name));
  // A plain name with specials is quoted (RFC 5322 display-name).
  if (is_ascii(name) && shown.find_first_of("()<>[]:;@\\,.\"") != std::string::npos) {
    std::string quoted = "\"";
    for (char c : shown) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    shown = quoted + "\"";
  }
  return shown + " <" + one_line(address) + ">";
}

std::string rfc5322_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S +0000", &tm);
  return buf;
}

// Refuses to connect to an address the SSRF guard restricts (unless allowed).
curl_socket_t open_checked(void* clientp, curlsocktype, struct curl_sockaddr* a) {
  const bool allow_private = *static_cast<bool*>(clientp);
  char ip[INET6_ADDRSTRLEN] = {0};
  if (a->family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a->addr)->sin_addr, ip, sizeof ip);
  else if (a->family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a->addr)->sin6_addr, ip, sizeof ip);
  if (!allow_private && is_restricted_address(ip)) return CURL_SOCKET_BAD;
  return socket(a->family, a->socktype, a->protocol);
}

struct easy_handle {
  CURL* h = curl_easy_init();
  curl_slist* rcpt = nullptr;
  curl_slist* headers = nullptr;
  curl_mime* mime = nullptr;
  ~easy_handle() {
    if (mime) curl_mime_free(mime);
    if (headers) curl_slist_free_all(headers);
    if (rcpt) curl_slist_free_all(rcpt);
    if (h) curl_easy_cleanup(h);
  }
};

void add_text_part(curl_mime* mime, const std::string& body, const char* type) {
  auto* part = curl_mime_addpart(mime);
  curl_mime_data(part, body.data(), body.size());
  curl_mime_type(part, type);
  curl_mime_encoder(part, "quoted-printable");
}

smtp_result send_now(const smtp_options& opts, const smtp_message& m) {
  smtp_result r;
  easy_handle e;
  if (!e.h) {
    r.retry = true;
    r.error = "smtp: cannot start libcurl";
    return r;
  }
  bool allow_private = opts.allow_private;
  std::string url = (m.security == smtp_security::tls ? "smtps://" : "smtp://") + m.host + ":" +
                    std::to_string(m.port);
  curl_easy_setopt(e.h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e.h, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
  curl_easy_setopt(e.h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e.h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opts.connect_timeout.count()));
  curl_easy_setopt(e.h, CURLOPT_TIMEOUT_MS, static_cast<long>(opts.timeout.count()));
  curl_easy_setopt(e.h, CURLOPT_OPENSOCKETFUNCTION, &open_checked);
  curl_easy_setopt(e.h, CURLOPT_OPENSOCKETDATA, &allow_private);
  curl_easy_setopt(e.h, CURLOPT_USE_SSL,
                   m.security == smtp_security::none ? static_cast<long>(CURLUSESSL_NONE)
                                                     : static_cast<long>(CURLUSESSL_ALL));
  if (!opts.ca_file.empty()) curl_easy_setopt(e.h, CURLOPT_CAINFO, opts.ca_file.c_str());
  if (!m.username.empty()) {
    curl_easy_setopt(e.h, CURLOPT_USERNAME, m.username.c_str());
    curl_easy_setopt(e.h, CURLOPT_PASSWORD, m.password.c_str());
  }
  std::string from = "<" + one_line(m.from) + ">";
  std::string to = "<" + one_line(m.to) + ">";
  curl_easy_setopt(e.h, CURLOPT_MAIL_FROM, from.c_str());
  e.rcpt = curl_slist_append(e.rcpt, to.c_str());
  curl_easy_setopt(e.h, CURLOPT_MAIL_RCPT, e.rcpt);

  std::vector<std::string> lines = {
      "Date: " + rfc5322_now(),
      "From: " + mailbox(m.from_name, m.from),
      "To: " + mailbox(m.to_name, m.to),
      "Subject: " + mime_header_text(one_line(m.subject)),
      "Message-ID: " + one_line(m.message_id),
  };
  if (!m.in_reply_to.empty()) lines.push_back("In-Reply-To: " + one_line(m.in_reply_to));
  if (!m.references.empty()) lines.push_back("References: " + one_line(m.references));
  for (auto& l : lines) e.headers = curl_slist_append(e.headers, l.c_str());
  curl_easy_setopt(e.h, CURLOPT_HTTPHEADER, e.headers);

  e.mime = curl_mime_init(e.h);
  if (m.html.empty() && m.attachments.empty()) {
    add_text_part(e.mime, m.text, "text/plain; charset=UTF-8");
  } else {
    // multipart/mixed of a multipart/alternative (text, html) and the attachments.
    curl_mime* body = e.mime;
    if (!m.html.empty()) {
      curl_mime* alt = curl_mime_init(e.h);
      add_text_part(alt, m.text, "text/plain; charset=UTF-8");
      add_text_part(alt, m.html, "text/html; charset=UTF-8");
      auto* part = curl_mime_addpart(body);
      curl_mime_subparts(part, alt);
      curl_mime_type(part, "multipart/alternative");
    } else {
      add_text_part(body, m.text, "text/plain; charset=UTF-8");
    }
    for (auto& a : m.attachments) {
      auto* part = curl_mime_addpart(body);
      curl_mime_data(part, a.data.data(), a.data.size());
      curl_mime_type(part, a.content_type.c_str());
      curl_mime_filename(part, a.filename.c_str());
      curl_mime_encoder(part, "base64");
    }
  }
  curl_easy_setopt(e.h, CURLOPT_MIMEPOST, e.mime);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(e.h, CURLOPT_ERRORBUFFER, errbuf);

  auto rc = curl_easy_perform(e.h);
  long code = 0;
  curl_easy_getinfo(e.h, CURLINFO_RESPONSE_CODE, &code);
  if (rc == CURLE_OK) {
    r.sent = true;
    return r;
  }
  r.error = "smtp: " + std::string(errbuf[0] ? errbuf : curl_easy_strerror(rc));
  if (code) r.error += " (server answered " + std::to_string(code) + ")";
  switch (rc) {
  case CURLE_LOGIN_DENIED:
  case CURLE_USE_SSL_FAILED:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_URL_MALFORMAT:
  case CURLE_UNSUPPORTED_PROTOCOL: r.retry = false; break;
  default:
    // A permanent refusal (5xx: no such mailbox, relaying denied) is not tried again; a
    // temporary one (4xx), a timeout or a lost connection is.
    r.retry = code < 500;
    break;
  }
  return r;
}

} // namespace

std::string mime_header_text(std::string_view utf8) {
  if (is_ascii(utf8)) return std::string(utf8);
  return "=?UTF-8?B?" + base64(utf8) + "?=";
}

struct smtp_client::impl {
  smtp_options opts;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::pair<smtp_message, std::function<void(smtp_result)>>> queue;
  bool stopping = false;
  std::vector<std::thread> threads;

  void run() {
    for (;;) {
      std::pair<smtp_message, std::function<void(smtp_result)>> job;
      {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      job.second(send_now(opts, job.first));
    }
  }
};

smtp_client::smtp_client(smtp_options opts) : impl_(std::make_unique<impl>()) {
  std::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  impl_->opts = std::move(opts);
  for (int i = 0; i < std::max(1, impl_->opts.threads); ++i)
    impl_->threads.emplace_back([this] { impl_->run(); });
}

smtp_client::~smtp_client() {
  std::deque<std::pair<smtp_message, std::function<void(smtp_result)>>> left;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
    left.swap(impl_->queue);
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->threads) t.join();
  for (auto& [m, done] : left) done({false, true, "smtp: the service is stopping"});
}

void smtp_client::send(smtp_message m, std::function<void(smtp_result)> done) {
  {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->stopping && impl_->queue.size() < impl_->opts.queue_limit) {
      impl_->queue.emplace_back(std::move(m), std::move(done));
      impl_->cv.notify_one();
      return;
    }
  }
  done({false, true, "smtp: too many messages waiting to be sent"});
}

} // namespace crm::net
