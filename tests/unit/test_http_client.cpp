// The outbound HTTP client against a tiny local server (127.0.0.1, port 0, one blocking thread):
// statuses as they are, no redirects, deadlines, refused destinations, bounded bodies, TLS
// verification, and exactly one callback per send, even when the client is destroyed.
#include "net/http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

using namespace crm::net;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Reads one request (head and Content-Length body); returns what was read, even if partial.
template <class SyncStream>
std::string read_request(SyncStream& s) {
  std::string data;
  boost::system::error_code ec;
  const auto head = asio::read_until(s, asio::dynamic_buffer(data), "\r\n\r\n", ec);
  if (ec) return data;
  const auto l = lower(data.substr(0, head));
  const auto at = l.find("\r\ncontent-length:");
  if (at != std::string::npos) {
    const auto length = std::stoul(l.substr(at + 17));
    if (data.size() < head + length)
      asio::read(s, asio::dynamic_buffer(data), asio::transfer_exactly(head + length - data.size()),
                 ec);
  }
  return data;
}

// Blocks until the peer closes (or 10 s pass, so that a failing test cannot hang the run).
void wait_for_close(tcp::socket& s) {
  timeval tv{10, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  while (::recv(s.native_handle(), buf, sizeof buf, 0) > 0) {
  }
}

// Accepts connections on 127.0.0.1 and hands each to `handler`, one after the other.
class test_server {
public:
  using handler = std::function<void(tcp::socket&)>;

  explicit test_server(handler h) : handler_(std::move(h)) {
    acceptor_.non_blocking(true); // polled, so that the destructor can stop the loop
    thread_ = std::thread([this] { run(); });
  }
  ~test_server() {
    stop_ = true;
    thread_.join();
  }

  std::string url(const std::string& path = "/") const {
    return "http://127.0.0.1:" + std::to_string(port()) + path;
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  int connections() const { return connections_; }
  std::string last_request() const {
    std::lock_guard lock(mutex_);
    return last_request_;
  }
  void record(std::string request) {
    std::lock_guard lock(mutex_);
    last_request_ = std::move(request);
  }

private:
  void run() {
    while (!stop_) {
      tcp::socket s(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(s, ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) {
        std::this_thread::sleep_for(2ms);
        continue;
      }
      if (ec) return;
      ++connections_;
      handler_(s);
    }
  }

  handler handler_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_{ioc_, {asio::ip::make_address("127.0.0.1"), 0}};
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  std::string last_request_;
  std::thread thread_;
};

void reply(tcp::socket& s, const std::string& response) {
  boost::system::error_code ec;
  asio::write(s, asio::buffer(response), ec);
  s.shutdown(tcp::socket::shutdown_send, ec);
  wait_for_close(s);
}

client_options local_options() {
  client_options o;
  o.allow_private = true;
  o.connect_timeout = 2000ms;
  o.response_timeout = 5000ms;
  return o;
}

client_response send_and_wait(http_client& client, client_request req) {
  std::promise<client_response> p;
  auto f = p.get_future();
  client.send(std::move(req), [&p](client_response r) { p.set_value(std::move(r)); });
  return f.get();
}

client_request get(std::string url) {
  client_request r;
  r.method = "GET";
  r.url = std::move(url);
  return r;
}

// ---- a self-signed certificate for "localhost", made at run time ---------------------------

struct test_certificate {
  std::string cert_pem;
  std::string key_pem;
};

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

test_certificate make_localhost_certificate() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "DNS:localhost");
  X509_add_ext(x, san, -1);
  X509_EXTENSION_free(san);
  X509_sign(x, key, EVP_sha256());

  test_certificate out;
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, x);
  out.cert_pem = bio_text(bio);
  BIO_free(bio);
  bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  out.key_pem = bio_text(bio);
  BIO_free(bio);
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

// Serves one TLS exchange per connection with the given certificate.
test_server::handler tls_hello(const test_certificate& cert) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->use_certificate_chain(asio::buffer(cert.cert_pem));
  ctx->use_private_key(asio::buffer(cert.key_pem), asio::ssl::context::pem);
  return [ctx](tcp::socket& s) {
    asio::ssl::stream<tcp::socket&> tls(s, *ctx);
    boost::system::error_code ec;
    tls.handshake(asio::ssl::stream_base::server, ec);
    if (ec) return;
    read_request(tls);
    const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecure";
    asio::write(tls, asio::buffer(response), ec);
    wait_for_close(s);
  };
}

} // namespace

// ---- responses ---------------------------------------------------------------------------

TEST(http_client, returns_status_and_body_and_sends_the_callers_headers) {
  test_server server([&](tcp::socket& s) {
    server.record(read_request(s));
    reply(s, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello");
  });
  http_client client(local_options());
  client_request req;
  req.url = server.url("/hooks/in?x=1");
  req.headers = {{"webhook-id", "msg_42"}};
  req.body = R"({"type":"contact.created"})";
  const auto r = send_and_wait(client, req);

  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(r.error.empty());
  const auto seen = server.last_request();
  EXPECT_EQ(seen.rfind("POST /hooks/in?x=1 HTTP/1.1\r\n", 0), 0u) << seen;
  EXPECT_NE(seen.find("webhook-id: msg_42\r\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("Host: 127.0.0.1:" + std::to_string(server.port()) + "\r\n"),
            std::string::npos)
      << seen;
  EXPECT_NE(seen.find("User-Agent: carecrm/1\r\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("Content-Type: application/json\r\n"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("Connection: close"), std::string::npos) << seen; // kept alive
  EXPECT_NE(seen.find("\r\n\r\n{\"type\":\"contact.created\"}"), std::string::npos) << seen;
}

TEST(http_client, keeps_a_content_type_set_by_the_caller) {
  test_server server([&](tcp::socket& s) {
    server.record(read_request(s));
    reply(s, "HTTP/1.1 204 No Content\r\n\r\n");
  });
  http_client client(local_options());
  client_request req;
  req.url = server.url();
  req.headers = {{"Content-Type", "text/plain"}};
  req.body = "plain";
  const auto r = send_and_wait(client, req);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 204);
  const auto seen = server.last_request();
  EXPECT_NE(seen.find("Content-Type: text/plain\r\n"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("application/json"), std::string::npos) << seen;
}

TEST(http_client, sends_the_next_request_to_a_destination_on_the_kept_alive_connection) {
  std::atomic<int> served{0};
  test_server server([&](tcp::socket& s) {
    for (int i = 0; i < 3; ++i) {
      if (read_request(s).empty()) return;
      ++served; // before the answer: the client may check the count as soon as it has it
      boost::system::error_code ec;
      asio::write(s, asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")),
                  ec);
    }
    wait_for_close(s);
  });
  http_client client(local_options());
  for (int i = 0; i < 3; ++i) {
    const auto r = send_and_wait(client, get(server.url()));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.body, "ok");
  }
  EXPECT_EQ(served, 3);
  EXPECT_EQ(server.connections(), 1);
}

TEST(http_client, a_kept_connection_the_server_closed_is_replaced_and_the_request_still_sent) {
  // The server answers one request a connection, keep-alive, then closes it: the client's
  // pooled connection is dead when the next request comes (its idle watch may or may not have
  // seen the close by then); the request must go on a new connection either way.
  test_server server([](tcp::socket& s) {
    if (read_request(s).empty()) return;
    boost::system::error_code ec;
    asio::write(s, asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")), ec);
    s.close(ec);
  });
  http_client client(local_options());
  for (int i = 0; i < 4; ++i) {
    const auto r = send_and_wait(client, get(server.url()));
    ASSERT_TRUE(r.ok) << "request " << i << ": " << r.error;
    EXPECT_EQ(r.body, "ok");
  }
  EXPECT_EQ(server.connections(), 4);
}

TEST(http_client, reports_a_410_as_a_response) {
  test_server server([](tcp::socket& s) {
    read_request(s);
    reply(s, "HTTP/1.1 410 Gone\r\nContent-Length: 4\r\n\r\ngone");
  });
  http_client client(local_options());
  const auto r = send_and_wait(client, get(server.url()));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 410);
  EXPECT_EQ(r.body, "gone");
}

TEST(http_client, skips_an_interim_100_continue_and_returns_the_final_response) {
  test_server server([](tcp::socket& s) {
    read_request(s);
    reply(s, "HTTP/1.1 100 Continue\r\n\r\n"
             "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok");
  });
  http_client client(local_options());
  client_request req;
  req.url = server.url();
  req.body = "{}";
  const auto r = send_and_wait(client, req);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, "ok");
}

TEST(http_client, does_not_follow_a_redirect) {
  test_server elsewhere([](tcp::socket& s) {
    read_request(s);
    reply(s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  });
  test_server server([&](tcp::socket& s) {
    read_request(s);
    reply(s,
          "HTTP/1.1 302 Found\r\nLocation: " + elsewhere.url() + "\r\nContent-Length: 0\r\n\r\n");
  });
  http_client client(local_options());
  const auto r = send_and_wait(client, get(server.url()));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 302);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(elsewhere.connections(), 0);
}

TEST(http_client, reads_a_body_delimited_by_the_connection_close) {
  test_server server([](tcp::socket& s) {
    read_request(s);
    reply(s, "HTTP/1.1 200 OK\r\n\r\nuntil the end");
  });
  http_client client(local_options());
  const auto r = send_and_wait(client, get(server.url()));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, "until the end");
}

TEST(http_client, truncates_a_body_longer_than_max_response_body) {
  test_server server([](tcp::socket& s) {
    read_request(s);
    boost::system::error_code ec;
    asio::write(s, asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")),
                ec);
    asio::write(s, asio::buffer(std::string(100000, 'x')), ec);
    wait_for_close(s);
  });
  auto opts = local_options();
  opts.max_response_body = 1000;
  http_client client(opts);
  const auto r = send_and_wait(client, get(server.url()));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, std::string(1000, 'x'));
}

TEST(http_client, stops_reading_a_huge_declared_body_once_the_limit_is_reached) {
  // 10 GB announced, 64 KiB sent, then silence: the client must neither reserve the announced
  // size nor wait for the rest.
  test_server server([](tcp::socket& s) {
    read_request(s);
    boost::system::error_code ec;
    asio::write(
        s, asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n")), ec);
    asio::write(s, asio::buffer(std::string(64 * 1024, 'y')), ec);
    wait_for_close(s);
  });
  auto opts = local_options();
  opts.max_response_body = 4096;
  http_client client(opts);
  const auto r = send_and_wait(client, get(server.url()));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), 4096u);
  EXPECT_LT(r.elapsed, 3000ms);
}

// ---- failures ----------------------------------------------------------------------------

TEST(http_client, times_out_when_the_server_never_answers) {
  test_server server([](tcp::socket& s) {
    read_request(s);
    wait_for_close(s);
  });
  http_client client(local_options());
  auto req = get(server.url());
  req.timeout = 300ms;
  const auto r = send_and_wait(client, req);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "timed out after 300 ms");
  EXPECT_GE(r.elapsed, 300ms);
  EXPECT_LT(r.elapsed, 2000ms);
}

TEST(http_client, reports_a_refused_connection) {
  unsigned short port = 0;
  {
    asio::io_context ioc;
    tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  } // closed: nothing listens there any more
  http_client client(local_options());
  const auto r = send_and_wait(client, get("http://127.0.0.1:" + std::to_string(port) + "/"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "connection refused");
}

TEST(http_client, refuses_a_loopback_destination_unless_private_is_allowed) {
  test_server server([](tcp::socket& s) {
    read_request(s);
    reply(s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  });
  auto opts = local_options();
  opts.allow_private = false;
  http_client client(opts);
  const auto r = send_and_wait(client, get(server.url()));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error,
            "destination address 127.0.0.1 is not allowed (private, loopback or link-local)");
  const auto by_name =
      send_and_wait(client, get("http://localhost:" + std::to_string(server.port()) + "/"));
  EXPECT_FALSE(by_name.ok);
  EXPECT_NE(by_name.error.find("is not allowed"), std::string::npos) << by_name.error;
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(server.connections(), 0); // refused before any connect
}

TEST(http_client, reports_a_host_that_does_not_resolve) {
  http_client client(local_options());
  const auto r = send_and_wait(client, get("http://example.invalid/"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "could not resolve host example.invalid");
}

TEST(http_client, refuses_malformed_urls_methods_and_headers_without_connecting) {
  http_client client(local_options());
  for (const char* url :
       {"ftp://example.com/", "http://user:pw@127.0.0.1:1/", "http://127.0.0.1:1/#top",
        "http:///path", "http://[::1/", "http://127.0.0.1:99999/", "http://127.0.0.1:1/a b",
        "example.com/path", "http://exa mple.com/"}) {
    const auto r = send_and_wait(client, get(url));
    EXPECT_FALSE(r.ok) << url;
    EXPECT_EQ(r.error.rfind("invalid URL", 0), 0u) << url << ": " << r.error;
  }
  auto bad_method = get("http://127.0.0.1:1/");
  bad_method.method = "CONNECT";
  EXPECT_EQ(send_and_wait(client, bad_method).error, "unsupported method CONNECT");
  auto injected = get("http://127.0.0.1:1/");
  injected.headers = {{"X-A", "1\r\nX-B: 2"}};
  EXPECT_EQ(send_and_wait(client, injected).error, "invalid value for header X-A");
}

// ---- lifetime ----------------------------------------------------------------------------

TEST(http_client, destructor_calls_done_once_for_a_request_in_flight) {
  test_server server([](tcp::socket& s) {
    read_request(s);
    wait_for_close(s);
  });
  std::atomic<int> calls{0};
  std::string error;
  {
    http_client client(local_options());
    client.send(get(server.url()), [&](client_response r) {
      ++calls;
      error = r.error;
    });
    for (int i = 0; i < 200 && server.connections() == 0; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(server.connections(), 1);
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(error, "client stopped");
}

TEST(http_client, destructor_leaves_no_request_without_its_callback) {
  std::atomic<int> calls{0};
  {
    http_client client(local_options());
    for (int i = 0; i < 20; ++i)
      client.send(get("http://127.0.0.1:1/"), [&](client_response) { ++calls; });
  }
  EXPECT_EQ(calls, 20);
}

// ---- TLS ---------------------------------------------------------------------------------

TEST(http_client, https_succeeds_with_a_trusted_certificate_for_the_host) {
  const auto cert = make_localhost_certificate();
  test_server server(tls_hello(cert));
  auto opts = local_options();
  opts.extra_ca_pem = cert.cert_pem;
  http_client client(opts);
  const auto r =
      send_and_wait(client, get("https://localhost:" + std::to_string(server.port()) + "/"));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "secure");
}

TEST(http_client, https_refuses_an_untrusted_certificate) {
  const auto cert = make_localhost_certificate();
  test_server server(tls_hello(cert));
  http_client client(local_options()); // the system store only
  const auto r =
      send_and_wait(client, get("https://localhost:" + std::to_string(server.port()) + "/"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error.rfind("TLS handshake failed: ", 0), 0u) << r.error;
  EXPECT_NE(r.error.find("self-signed certificate"), std::string::npos) << r.error;
}

TEST(http_client, https_refuses_a_certificate_for_another_host) {
  const auto cert = make_localhost_certificate(); // for "localhost", not "127.0.0.1"
  test_server server(tls_hello(cert));
  auto opts = local_options();
  opts.extra_ca_pem = cert.cert_pem;
  http_client client(opts);
  const auto r = send_and_wait(client, get(server.url().replace(0, 4, "https")));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error.rfind("TLS handshake failed: ", 0), 0u) << r.error;
  EXPECT_NE(r.error.find("not valid for 127.0.0.1"), std::string::npos) << r.error;
}
