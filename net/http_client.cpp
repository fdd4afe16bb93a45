// The outbound HTTP/1.1 client: one exchange object per send(), living on the client's single
// io_context thread, so exchanges need no locking. Each exchange is resolve → SSRF check of
// every resolved address → connect to exactly those addresses → (TLS handshake) → write → read,
// all under one deadline. The response body is read into a fixed buffer of max_response_body
// bytes (buffer_body), so neither a huge Content-Length nor an endless body can grow memory.
#include "net/http_client.hpp"

#include "net/address_guard.hpp"

#include <pthread.h>

#include <cstdio>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace crm::net {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---- URL ---------------------------------------------------------------------------------

struct target_url {
  bool tls = false;
  std::string host; // IPv6 literals without their brackets
  bool ip_literal = false;
  std::uint16_t port = 0;
  std::string target;      // origin-form: path and query, at least "/"
  std::string host_header; // host[:port], the port only when not the scheme's default
};

bool is_alpha_num(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

char to_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), to_lower);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return to_lower(x) == to_lower(y);
         });
}

// http(s)://host[:port][/path][?query]. Userinfo and fragments are refused rather than
// dropped: a URL that means something else to a browser than to us is a configuration mistake.
// Returns why the URL is refused, or an empty string.
std::string parse_target(std::string_view url, target_url& out) {
  for (char c : url) {
    const auto u = static_cast<unsigned char>(c);
    // Spaces and control characters would end up verbatim in the request line.
    if (u <= 0x20 || u == 0x7f) return "invalid URL: contains a space or control character";
  }
  if (url.find('#') != std::string_view::npos) return "invalid URL: fragments are not allowed";
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return "invalid URL: expected http:// or https://";
  const auto scheme = lower(url.substr(0, scheme_end));
  if (scheme == "https")
    out.tls = true;
  else if (scheme != "http")
    return "invalid URL: scheme must be http or https";

  const auto rest = url.substr(scheme_end + 3);
  const auto authority_end = std::min(rest.find_first_of("/?"), rest.size());
  const auto authority = rest.substr(0, authority_end);
  const auto tail = rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos)
    return "invalid URL: credentials (user@) are not allowed";
  if (authority.empty()) return "invalid URL: no host";

  std::string_view port_text;
  bool has_port = false;
  bool v6 = false;
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return "invalid URL: unterminated IPv6 literal";
    out.host = lower(authority.substr(1, close - 1));
    boost::system::error_code ec;
    asio::ip::make_address_v6(out.host, ec);
    // A zone ("%eth0") is refused by this too: it only names link-local addresses.
    if (ec || out.host.find('%') != std::string::npos)
      return "invalid URL: bad IPv6 literal " + out.host;
    v6 = true;
    out.ip_literal = true;
    const auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "invalid URL: unexpected text after the IPv6 literal";
      has_port = true;
      port_text = after.substr(1);
    }
  } else {
    const auto colon = authority.find(':');
    out.host = lower(authority.substr(0, std::min(colon, authority.size())));
    if (colon != std::string_view::npos) {
      has_port = true;
      port_text = authority.substr(colon + 1);
    }
    if (out.host.empty()) return "invalid URL: no host";
    for (char c : out.host)
      if (!is_alpha_num(c) && c != '-' && c != '.' && c != '_')
        return "invalid URL: bad character in host (international names must be punycode)";
    boost::system::error_code ec;
    asio::ip::make_address_v4(out.host, ec);
    out.ip_literal = !ec;
  }

  const std::uint16_t default_port = out.tls ? 443 : 80;
  out.port = default_port;
  if (has_port) {
    if (port_text.empty() || port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(),
                     [](char c) { return c >= '0' && c <= '9'; }))
      return "invalid URL: bad port";
    unsigned long value = std::stoul(std::string(port_text));
    if (value == 0 || value > 65535) return "invalid URL: bad port";
    out.port = static_cast<std::uint16_t>(value);
  }

  out.host_header = v6 ? "[" + out.host + "]" : out.host;
  if (out.port != default_port) out.host_header += ":" + std::to_string(out.port);

  out.target = tail.empty() || tail.front() == '?' ? "/" : "";
  static constexpr std::string_view hex = "0123456789ABCDEF";
  for (char c : tail) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80) {
      out.target += c;
    } else { // raw UTF-8 (an IRI): percent-encoded, the only form a request line may carry
      out.target += '%';
      out.target += hex[u >> 4];
      out.target += hex[u & 0x0f];
    }
  }
  return {};
}

// ---- request checks ----------------------------------------------------------------------

bool is_token(std::string_view s) {
  static constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return is_alpha_num(c) || extra.find(c) != std::string_view::npos;
  });
}

bool is_field_value(std::string_view s) {
  // CR and LF would let a configured header value inject headers or a second request.
  return std::none_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

std::string ms_text(milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

// ---- exchange ----------------------------------------------------------------------------

class exchange;

// A connection to a destination: plain or TLS.
struct connection {
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  steady::time_point idle_since{};
  char probe = 0; // what an idle connection's watch reads into

  tcp::socket& socket() { return tls ? beast::get_lowest_layer(*tls).socket() : plain->socket(); }
};
using connection_ptr = std::shared_ptr<connection>;

// Connections kept open after an exchange whose response allowed it (keep-alive), by
// destination (scheme, host as named, port): a webhook receiver called a thousand times a second
// is connected to once, not a thousand times. The address was checked by the SSRF guard when the
// connection was made; a pooled connection is never handed to another host name. While idle,
// each is watched by a read: anything the server sends then (its close, most often) ends it.
class connection_pool {
public:
  static constexpr std::size_t max_idle_per_destination = 64;
  // Shorter than the keep-alive timeouts servers commonly use (Node's is 5 s): a connection the
  // server closes meanwhile is rarely picked, and if it is, the request goes on a new one.
  static constexpr std::chrono::seconds max_idle{4};

  connection_ptr take(const std::string& key, steady::time_point now) {
    auto it = idle_.find(key);
    if (it == idle_.end()) return nullptr;
    auto& list = it->second;
    while (!list.empty()) {
      auto c = std::move(list.back());
      list.pop_back();
      boost::system::error_code ignored;
      if (now - c->idle_since < max_idle) {
        c->socket().cancel(ignored); // its watch ends with operation_aborted
        return c;
      }
      c->socket().close(ignored);
    }
    return nullptr;
  }

  void give(const std::string& key, connection_ptr c, steady::time_point now) {
    auto& list = idle_[key];
    boost::system::error_code ignored;
    if (list.size() >= max_idle_per_destination) { // the oldest goes
      list.front()->socket().close(ignored);
      list.erase(list.begin());
    }
    c->idle_since = now;
    list.push_back(c);
    c->socket().async_read_some(asio::buffer(&c->probe, 1),
                                [this, key, weak = std::weak_ptr<connection>(c)](
                                    boost::system::error_code ec, std::size_t) {
                                  if (ec == asio::error::operation_aborted)
                                    return; // taken, or the client is ending
                                  auto c = weak.lock();
                                  if (!c) return;
                                  auto it = idle_.find(key);
                                  if (it == idle_.end()) return;
                                  auto& list = it->second;
                                  auto at = std::find(list.begin(), list.end(), c);
                                  if (at == list.end())
                                    return; // taken meanwhile: its exchange finds out
                                  list.erase(at);
                                  boost::system::error_code ignored;
                                  c->socket().close(ignored);
                                });
  }

  void clear() {
    for (auto& [key, list] : idle_)
      for (auto& c : list) {
        boost::system::error_code ignored;
        c->socket().close(ignored);
      }
    idle_.clear();
  }

private:
  std::unordered_map<std::string, std::vector<connection_ptr>> idle_;
};

// What the client's thread knows of the exchanges in flight, so that the destructor can end
// them, and its idle connections. Touched only on that thread.
struct registry {
  bool stopping = false;
  std::uint64_t next_id = 0;
  std::unordered_map<std::uint64_t, std::weak_ptr<exchange>> live;
  connection_pool pool;
};

class exchange : public std::enable_shared_from_this<exchange> {
public:
  exchange(asio::io_context& ioc, asio::ssl::context& tls, registry& reg,
           const client_options& opts, client_request req, target_url url,
           std::function<void(client_response)> done, steady::time_point started)
      : reg_(reg), opts_(opts), req_(std::move(req)), url_(std::move(url)), done_(std::move(done)),
        started_(started),
        timeout_(req_.timeout.count() > 0 ? req_.timeout : opts.response_timeout),
        body_max_(req_.max_body > 0 ? req_.max_body : opts.max_response_body), id_(reg.next_id++),
        ioc_(ioc), tls_context_(tls), resolver_(ioc), deadline_(ioc) {
    key_ = std::string(url_.tls ? "https://" : "http://") + url_.host + ":" +
           std::to_string(url_.port);
  }

  void start(bhttp::verb method) {
    if (reg_.stopping) return fail("client stopped");
    reg_.live.emplace(id_, weak_from_this());
    build_request(method);

    deadline_.expires_at(started_ + timeout_);
    deadline_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->fail("timed out after " + ms_text(self->timeout_));
    });

    conn_ = reg_.pool.take(key_, steady::now());
    if (conn_) {
      reused_ = true;
      return write();
    }
    connect_anew();
  }

  void stop() { fail("client stopped"); }

private:
  // A new connection: resolve, check, connect (and the TLS handshake).
  void connect_anew() {
    reused_ = false;
    conn_ = std::make_shared<connection>();
    if (url_.tls)
      conn_->tls.emplace(ioc_, tls_context_);
    else
      conn_->plain.emplace(ioc_);
    auto flags = tcp::resolver::numeric_service;
    if (url_.ip_literal) flags |= tcp::resolver::numeric_host;
    resolver_.async_resolve(
        url_.host, std::to_string(url_.port), flags,
        [self = shared_from_this()](boost::system::error_code ec, tcp::resolver::results_type r) {
          self->on_resolve(ec, r);
        });
  }

  template <class F>
  void with_stream(F&& f) {
    if (conn_->tls)
      f(*conn_->tls);
    else
      f(*conn_->plain);
  }

  beast::tcp_stream& tcp_layer() {
    return conn_->tls ? beast::get_lowest_layer(*conn_->tls) : *conn_->plain;
  }

  // A pooled connection the server closed while it was idle fails before any response: the
  // request goes once more on a new connection (the server never read it).
  bool retry_on_new_connection(boost::system::error_code ec) {
    if (!reused_ || (parser_ && parser_->is_header_done())) return false;
    if (ec != bhttp::error::end_of_stream && ec != asio::error::connection_reset &&
        ec != asio::error::broken_pipe && ec != asio::error::eof &&
        ec != asio::ssl::error::stream_truncated)
      return false;
    boost::system::error_code ignored;
    tcp_layer().socket().close(ignored);
    buffer_.clear();
    parser_.reset();
    connect_anew();
    return true;
  }

  void build_request(bhttp::verb method) {
    request_.method(method);
    request_.target(url_.target);
    request_.version(11);
    request_.set(bhttp::field::user_agent, opts_.user_agent);
    for (auto& [name, value] : req_.headers) {
      // Framing and the destination are ours: they must match the body sent and the address
      // checked.
      if (iequals(name, "host") || iequals(name, "content-length") ||
          iequals(name, "transfer-encoding") || iequals(name, "connection"))
        continue;
      if (iequals(name, "user-agent") || iequals(name, "content-type"))
        request_.set(name, value);
      else
        request_.insert(name, value);
    }
    request_.set(bhttp::field::host, url_.host_header);
    request_.keep_alive(true); // HTTP/1.1's default, said for servers that need it
    if (!req_.body.empty() && request_.find(bhttp::field::content_type) == request_.end())
      request_.set(bhttp::field::content_type, "application/json");
    request_.body() = std::move(req_.body);
    request_.prepare_payload();
  }

  void on_resolve(boost::system::error_code ec, const tcp::resolver::results_type& results) {
    if (finished_) return;
    if (ec || results.empty()) return fail("could not resolve host " + url_.host);
    // Every address is checked, and the connect below uses these very results: a name that
    // resolves differently a moment later (DNS rebinding) cannot slip a private address in.
    if (!opts_.allow_private) {
      for (const auto& entry : results) {
        const auto address = entry.endpoint().address().to_string();
        if (is_restricted_address(address))
          return fail("destination address " + address +
                      " is not allowed (private, loopback or link-local)");
      }
    }
    auto& stream = tcp_layer();
    // The overall deadline covers a connect that would outlast it.
    if (opts_.connect_timeout < timeout_) stream.expires_after(opts_.connect_timeout);
    stream.async_connect(
        results, [self = shared_from_this()](boost::system::error_code ec, const tcp::endpoint&) {
          self->on_connect(ec);
        });
  }

  void on_connect(boost::system::error_code ec) {
    if (finished_) return;
    if (ec == beast::error::timeout)
      return fail("connect timed out after " + ms_text(opts_.connect_timeout));
    if (ec == asio::error::connection_refused) return fail("connection refused");
    if (ec) return fail("connect failed: " + ec.message());
    tcp_layer().expires_never(); // the deadline timer bounds the rest
    if (!conn_->tls) return write();

    // SNI carries names only, never address literals (RFC 6066).
    auto& tls = *conn_->tls;
    if (!url_.ip_literal && !SSL_set_tlsext_host_name(tls.native_handle(), url_.host.c_str()))
      return fail("TLS handshake failed: cannot set the server name");
    tls.set_verify_mode(asio::ssl::verify_peer);
    tls.set_verify_callback(asio::ssl::host_name_verification(url_.host));
    tls.async_handshake(
        asio::ssl::stream_base::client,
        [self = shared_from_this()](boost::system::error_code ec) { self->on_handshake(ec); });
  }

  void on_handshake(boost::system::error_code ec) {
    if (finished_) return;
    if (ec) {
      std::string why = "TLS handshake failed: " + ec.message();
      const long verify = SSL_get_verify_result(conn_->tls->native_handle());
      // host_name_verification refuses through the verify callback, which OpenSSL records
      // as "unspecified"; name the real reason.
      if (verify == X509_V_ERR_UNSPECIFIED)
        why += " (the certificate is not valid for " + url_.host + ")";
      else if (verify != X509_V_OK)
        why += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
      return fail(why);
    }
    write();
  }

  void write() {
    with_stream([this](auto& stream) {
      bhttp::async_write(stream, request_,
                         [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                           self->on_write(ec);
                         });
    });
  }

  void on_write(boost::system::error_code ec) {
    if (finished_) return;
    if (ec && retry_on_new_connection(ec)) return;
    if (ec) return fail("sending the request failed: " + ec.message());
    read_response();
  }

  // A fresh parser per response: an interim 1xx is followed by the real one.
  void read_response() {
    // Not zeroed: only what the parser writes is read (zeroing 64 KiB an exchange was a
    // quarter of the CPU of webhook deliveries).
    if (!body_) body_ = std::make_unique_for_overwrite<char[]>(body_max_);
    parser_.emplace();
    parser_->header_limit(32 * 1024);
    parser_->body_limit(boost::none); // the size of body_ is the limit: the rest is left unread
    if (request_.method() == bhttp::verb::head) parser_->skip(true);
    parser_->get().body().data = body_.get();
    parser_->get().body().size = body_max_;
    read();
  }

  void read() {
    with_stream([this](auto& stream) {
      bhttp::async_read_some(stream, buffer_, *parser_,
                             [self = shared_from_this()](boost::system::error_code ec,
                                                         std::size_t) { self->on_read(ec); });
    });
  }

  void on_read(boost::system::error_code ec) {
    if (finished_) return;
    if (ec == bhttp::error::need_buffer) ec = {}; // body_ is full; checked below
    // A TLS peer that closes without close_notify ends a body delimited by the close as much
    // as a plain one does (Beast handles only the plain eof).
    if (ec == asio::ssl::error::stream_truncated && parser_->is_header_done() &&
        !parser_->is_done()) {
      ec = {};
      parser_->put_eof(ec);
    }
    if (ec && retry_on_new_connection(ec)) return;
    if (ec == bhttp::error::end_of_stream) return fail("connection closed without a response");
    if (ec) return fail("reading the response failed: " + ec.message());
    if (parser_->is_header_done()) {
      const auto status = parser_->get().result_int();
      // 100 Continue, 103 Early Hints: interim, the final response follows. (101 is final: we
      // never ask for an upgrade, so a server sending it is answering wrongly.)
      if (status >= 100 && status < 200 && status != 101 && parser_->is_done())
        return read_response();
      if (parser_->is_done() || parser_->get().body().size == 0) return succeed();
    }
    read();
  }

  void succeed() {
    client_response r;
    r.ok = true;
    r.status = static_cast<int>(parser_->get().result_int());
    r.body.assign(body_.get(), body_max_ - parser_->get().body().size);
    r.truncated = !parser_->is_done();
    auto& head = parser_->get();
    if (auto it = head.find(bhttp::field::content_type); it != head.end())
      r.content_type = std::string(it->value());
    if (auto it = head.find(bhttp::field::location); it != head.end())
      r.location = std::string(it->value());
    // Read to its end, nothing after it, and the server keeps it open: kept for the next
    // request to this destination.
    if (parser_->is_done() && parser_->get().keep_alive() && buffer_.size() == 0 &&
        !reg_.stopping) {
      resolver_.cancel();
      deadline_.cancel();
      reg_.pool.give(key_, std::move(conn_), steady::now());
    }
    finish(std::move(r));
  }

  void fail(std::string why) {
    client_response r;
    r.error = std::move(why);
    finish(std::move(r));
  }

  // The one way out: whatever completes first (the response, an error, the deadline, the
  // client's destructor) wins, and the handlers still pending find finished_ set.
  void finish(client_response r) {
    if (finished_) return;
    finished_ = true;
    reg_.live.erase(id_);
    resolver_.cancel();
    deadline_.cancel();
    if (conn_) tcp_layer().close();
    r.elapsed = std::chrono::duration_cast<milliseconds>(steady::now() - started_);
    auto done = std::move(done_);
    if (done) done(std::move(r));
  }

  registry& reg_;
  const client_options& opts_;
  client_request req_;
  target_url url_;
  std::function<void(client_response)> done_;
  steady::time_point started_;
  milliseconds timeout_;
  std::size_t body_max_; // the response body read at most
  std::uint64_t id_;
  bool finished_ = false;

  asio::io_context& ioc_;
  asio::ssl::context& tls_context_;
  std::string key_;     // the destination, for the pool
  bool reused_ = false; // conn_ came from the pool
  tcp::resolver resolver_;
  asio::steady_timer deadline_;
  connection_ptr conn_;
  bhttp::request<bhttp::string_body> request_;
  beast::flat_buffer buffer_;
  std::unique_ptr<char[]> body_; // max_response_body bytes, written by the parser
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser_;
};

std::optional<bhttp::verb> allowed_method(std::string_view name) {
  const auto verb = bhttp::string_to_verb(name);
  switch (verb) {
  case bhttp::verb::get:
  case bhttp::verb::head:
  case bhttp::verb::post:
  case bhttp::verb::put:
  case bhttp::verb::patch:
  case bhttp::verb::delete_:
  case bhttp::verb::options: return verb;
  default: return std::nullopt;
  }
}

// Why the request cannot be sent as given, or an empty string.
std::string check_request(const client_request& req, std::optional<bhttp::verb>& method) {
  std::string upper(req.method);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](char c) {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
  });
  method = allowed_method(upper);
  if (!method) return "unsupported method " + req.method;
  for (const auto& [name, value] : req.headers) {
    if (!is_token(name)) return "invalid header name \"" + name + "\"";
    if (!is_field_value(value)) return "invalid value for header " + name;
  }
  return {};
}

} // namespace

// ---- client ------------------------------------------------------------------------------

struct http_client::impl {
  explicit impl(const client_options& opts)
      : work(asio::make_work_guard(ioc)), tls(asio::ssl::context::tls_client) {
    // tls_client rather than tlsv12_client: the latter also caps the version at 1.2.
    SSL_CTX_set_min_proto_version(tls.native_handle(), TLS1_2_VERSION);
    tls.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_compression);
    tls.set_default_verify_paths();
    tls.set_verify_mode(asio::ssl::verify_peer);
    if (!opts.extra_ca_pem.empty()) tls.add_certificate_authority(asio::buffer(opts.extra_ca_pem));
    thread = std::thread([this] {
      pthread_setname_np(pthread_self(), "crm.outbound"); // crm_net does not link the log
      // A completion handler that throws must not end outbound HTTP for the whole process.
      for (;;) {
        try {
          ioc.run();
          return;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "error outbound HTTP thread: a handler threw: %s\n", e.what());
        }
      }
    });
  }

  asio::io_context ioc{1};
  asio::executor_work_guard<asio::io_context::executor_type> work;
  asio::ssl::context tls;
  registry reg; // on the client's thread only
  std::thread thread;
};

http_client::http_client(client_options opts)
    : opts_(std::move(opts)), impl_(std::make_unique<impl>(opts_)) {}

http_client::~http_client() {
  asio::post(impl_->ioc, [this] {
    impl_->reg.stopping = true;
    impl_->reg.pool.clear();
    // A copy: each stop() removes its exchange from the registry.
    const auto live = impl_->reg.live;
    for (const auto& [id, weak] : live)
      if (auto ex = weak.lock()) ex->stop();
  });
  // Without the guard, run() returns once the cancelled operations have completed.
  impl_->work.reset();
  impl_->thread.join();
}

void http_client::send(client_request req, std::function<void(client_response)> done) {
  const auto started = steady::now();
  asio::post(impl_->ioc, [this, started, req = std::move(req), done = std::move(done)]() mutable {
    target_url url;
    std::optional<bhttp::verb> method;
    auto why = parse_target(req.url, url);
    if (why.empty()) why = check_request(req, method);
    if (!why.empty()) {
      client_response r;
      r.error = std::move(why);
      r.elapsed = std::chrono::duration_cast<milliseconds>(steady::now() - started);
      if (done) done(std::move(r));
      return;
    }
    auto ex = std::make_shared<exchange>(impl_->ioc, impl_->tls, impl_->reg, opts_, std::move(req),
                                         std::move(url), std::move(done), started);
    ex->start(*method);
  });
}

} // namespace crm::net
