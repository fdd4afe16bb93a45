// Outbound HTTP/1.1 (http and https) for webhook deliveries and workflow http_request actions.
// Requests run asynchronously on the client's own thread (Boost.Beast, OpenSSL for TLS): no
// caller ever blocks. The destination is resolved, checked against the SSRF guard
// (net/address_guard.hpp) and the checked address is the one connected to. No redirect is
// followed: a 3xx is returned as it is. Beast stays inside http_client.cpp.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crm::net {

struct client_options {
  bool allow_private = false; // loopback, private, link-local destinations allowed
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds response_timeout{10000}; // default for the whole exchange
  std::size_t max_response_body = 64 * 1024;         // longer bodies are truncated
  std::string user_agent = "carecrm/1";
  // PEM CA certificates trusted beside the system store (an internal CA; tests). Invalid PEM
  // makes the constructor throw.
  std::string extra_ca_pem;
};

struct client_request {
  std::string method = "POST"; // GET POST PUT PATCH DELETE
  std::string url;             // http:// or https://
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{0}; // 0: the client's response_timeout
  std::size_t max_body = 0;             // the response body read at most (0: the client's)
};

struct client_response {
  // A response arrived (any status). False: `error` says why (refused address, DNS failure,
  // connection refused, timeout, TLS failure, malformed response).
  bool ok = false;
  int status = 0;
  std::string body;                   // at most max_body (or max_response_body) bytes
  bool truncated = false;             // the body went on past that
  std::string content_type, location; // those headers, when given
  std::string error;
  std::chrono::milliseconds elapsed{0};
};

class http_client {
public:
  explicit http_client(client_options opts);
  ~http_client(); // cancels what is in flight (their callbacks run with an error) and joins
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  // `done` runs exactly once, on the client's thread: it must only hand the result on.
  void send(client_request req, std::function<void(client_response)> done);

  const client_options& options() const { return opts_; }

private:
  struct impl;
  client_options opts_;
  std::unique_ptr<impl> impl_;
};

} // namespace crm::net
