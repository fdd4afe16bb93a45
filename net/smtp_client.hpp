// Outbound e-mail over SMTP (docs/channels.md "E-mail"), with libcurl: its SMTP client speaks
// STARTTLS (or implicit TLS) and AUTH, and its MIME API builds the message (UTF-8 text and HTML
// alternatives, attachments), so no SMTP or MIME is written by hand here. A send blocks in
// libcurl, so it runs on the client's own threads: no caller ever blocks. The server's address
// is checked against the SSRF guard (net/address_guard.hpp) as the socket is opened.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crm::net {

struct smtp_options {
  bool allow_private = false; // loopback and private servers allowed (tests, a local relay)
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds timeout{60000}; // the whole exchange
  std::string ca_file; // PEM CA certificates to trust instead of the system's (an internal CA)
  int threads = 2;
  std::size_t queue_limit = 1000;
};

enum class smtp_security : std::uint8_t { starttls, tls, none };

struct smtp_attachment {
  std::string filename;
  std::string content_type;
  std::string data;
};

struct smtp_message {
  std::string host;
  int port = 587;
  smtp_security security = smtp_security::starttls;
  std::string username; // empty: no AUTH
  std::string password;
  std::string from;      // the envelope sender and From's address
  std::string from_name; // From's display name (UTF-8)
  std::string to;
  std::string to_name;
  std::string subject;    // UTF-8
  std::string text;       // the text/plain part
  std::string html;       // the text/html alternative, if any
  std::string message_id; // "<...@...>"
  std::string in_reply_to;
  std::string references;
  std::vector<smtp_attachment> attachments;
};

struct smtp_result {
  bool sent = false;
  bool retry = false; // not sent: whether another attempt may succeed
  std::string error;
};

class smtp_client {
public:
  explicit smtp_client(smtp_options opts);
  ~smtp_client(); // finishes the sends in flight, refuses the queued ones, joins
  smtp_client(const smtp_client&) = delete;
  smtp_client& operator=(const smtp_client&) = delete;

  // `done` runs exactly once, on one of the client's threads: it must only hand the result on.
  void send(smtp_message m, std::function<void(smtp_result)> done);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// RFC 2047 encoded-word for a header value that is not plain ASCII ("=?UTF-8?B?...?="); ASCII
// text as it is.
std::string mime_header_text(std::string_view utf8);

} // namespace crm::net
