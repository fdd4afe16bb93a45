// Listener and session, after Beast's advanced server: a strand per connection, keep-alive,
// an idle timeout between requests, a header timeout from the first byte of a request, a body
// timeout, and the size limits (413, 431). The session hands each request to the router and
// writes the response the handler posts back, never blocking an asio thread.
#include "http/server.hpp"

#include "http/audit.hpp"

#include "http/rate_limits.hpp"

#include "domain/crypto.hpp"
#include "http/api_key_auth.hpp"
#include "http/auth.hpp"
#include "http/metrics.hpp"
#include "http/placement.hpp"
#include "http/router.hpp"
#include "http/totp_routes.hpp"
#include "persistence/log.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace crm::http {
namespace {

std::chrono::steady_clock::duration seconds_to(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

struct shared_context {
  server_limits limits;
  auth_inputs auth;
  http_metrics& metrics;
  asio::io_context& ioc;
  std::atomic<std::int64_t> in_flight{0};
  std::string id_prefix = domain::hex_encode(domain::random_token(6)).substr(0, 8);
  std::atomic<std::uint64_t> next_id{0};
};

// The body limit of the route `method` and `target` match (its own, when larger than the
// configured one), never chosen by looking for words in the raw target.
std::uint64_t body_limit_of(const router& r, std::uint64_t configured, verb method,
                            std::string_view target) {
  request probe;
  set_target(probe, target);
  auto m = r.match(method, probe.path);
  if (m.result != router::outcome::found || m.matched->body_limit <= configured) return configured;
  return m.matched->body_limit;
}

bool acceptable_request_id(std::string_view v) {
  if (v.empty() || v.size() > 128) return false;
  for (char c : v)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

// Where a request came from. A session charges it to the rate limits (and keeps the RateLimit
// headers for its answer); a request another node forwarded was charged there.
class origin {
public:
  virtual ~origin() = default;
  // The 429 failure when a limit is reached.
  virtual std::optional<domain::failure> charge(rate_class c, const principal* who) = 0;
};

// A request another node forwarded: charged here, where its tenant runs, to the client the
// forwarding node named; the RateLimit headers travel back with the answer.
class forwarded_origin final : public origin {
public:
  forwarded_origin(shared_context& ctx, std::string client)
      : ctx_(ctx), client_(std::move(client)) {}
  std::optional<domain::failure> charge(rate_class c, const principal* who) override {
    if (!ctx_.auth.rates) return std::nullopt;
    auto v = ctx_.auth.rates->charge(c, who, client_);
    std::lock_guard lock(mutex_);
    headers_ = std::move(v.headers);
    return std::move(v.refused);
  }
  std::vector<std::pair<std::string, std::string>> headers() {
    std::lock_guard lock(mutex_);
    return headers_;
  }

private:
  shared_context& ctx_;
  std::string client_;
  std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> headers_;
};

void run_handler(shared_context& ctx, const exchange_ptr& ex, const route& rt);
void authenticated(shared_context& ctx, const std::shared_ptr<origin>& op, const exchange_ptr& ex,
                   const route& rt, bool forwarded);

// Authentication, roles, rate limits and input checks of the matched route, then (in a
// cluster, on the node holding the tenant's lease: http/placement.hpp) its handler.
void dispatch(shared_context& ctx, const std::shared_ptr<origin>& op, const exchange_ptr& ex,
              router::match_result& m, bool forwarded = false) {
  origin& o = *op;
  if (m.result != router::outcome::found) {
    if (auto refused = o.charge(rate_class::address, nullptr)) return ex->fail(*refused);
  }
  if (m.result == router::outcome::not_found) {
    ex->fail(domain::failure::of(domain::errc::not_found, "not found"));
    return;
  }
  if (m.result == router::outcome::method_not_allowed) {
    auto r = error_response(domain::errc::method_not_allowed, "method not allowed");
    r.headers.emplace_back("Allow", m.allow);
    ex->respond(std::move(r));
    return;
  }
  const route& rt = *m.matched;
  ex->params = std::move(m.params);
  ex->matched = &rt;
  ex->audit = ctx.auth.audit;
  ex->forwarded = forwarded;
  if (rt.auth == access::operator_token || rt.auth == access::operator_metrics) {
    bool token = rt.auth == access::operator_token || ctx.auth.ops.metrics_need_token;
    if (auto f = authorize_operator(ex->req, ctx.auth.ops, token)) {
      ex->fail(*f);
      return;
    }
  }
  if (rt.auth == access::operator_page) {
    if (auto f = authorize_operator(ex->req, ctx.auth.ops, true)) {
      if (f->code != domain::errc::invalid_credentials) return ex->fail(*f);
      ex->operator_signed_in = false;
    }
  }
  if (rt.auth == access::bearer) {
    auto token = bearer_token(ex->req);
    if (token && ctx.auth.pool && is_api_key(*token)) {
      if (recall_api_key(*ctx.auth.revoked, *token, ex->who))
        return authenticated(ctx, op, ex, rt, forwarded);
      // Its owner is looked up through the gate, perhaps on a database thread; the request
      // goes on back on an asio thread, which remembers the key.
      authenticate_api_key(
          *ctx.auth.pool, *ctx.auth.revoked, *token,
          [&ctx, op, ex, &rt, forwarded](std::optional<domain::failure> f, principal who) {
            asio::post(ctx.ioc, [&ctx, op, ex, &rt, forwarded, f = std::move(f),
                                 who = std::move(who)]() mutable {
              if (f) {
                if (auto refused = op->charge(rate_class::address, nullptr))
                  return ex->fail(*refused);
                return ex->fail(*f);
              }
              if (auto t = bearer_token(ex->req)) remember_api_key(*t, who);
              ex->who = std::move(who);
              authenticated(ctx, op, ex, rt, forwarded);
            });
          });
      return;
    }
    if (auto f = authenticate(ex->req, ctx.auth.jwt_secret, *ctx.auth.revoked, ex->who)) {
      // Without a valid token the request counts against its source address.
      if (auto refused = o.charge(rate_class::address, nullptr)) return ex->fail(*refused);
      ex->fail(*f);
      return;
    }
    authenticated(ctx, op, ex, rt, forwarded);
    return;
  }
  // Open routes count against the source address where the request arrived.
  if (rt.auth == access::open && !forwarded)
    if (auto refused = o.charge(rt.limit, nullptr)) return ex->fail(*refused);
  if (auto bad = non_text_input(ex->req)) {
    ex->fail(domain::failure::invalid({std::move(*bad)}));
    return;
  }
  run_handler(ctx, ex, rt);
}

// The rest of dispatch for a request whose principal is known: its rate limits, its role, its
// input, then its handler (in a cluster, where its tenant runs).
void authenticated(shared_context& ctx, const std::shared_ptr<origin>& op, const exchange_ptr& ex,
                   const route& rt, bool forwarded) {
  // In a cluster the node that runs the request charges it (below): a request forwarded to
  // its tenant's owner is charged there, once, never here and again there.
  if (!ctx.auth.placement)
    if (auto refused = op->charge(rate_class::user, &ex->who)) return ex->fail(*refused);
  if (!domain::allows(ex->who.role, rt.perm)) {
    ex->fail(domain::failure::of(domain::errc::insufficient_permissions,
                                 "your role does not allow this operation"));
    return;
  }
  if (ex->who.enroll_only && !open_to_enrollment(rt)) {
    ex->fail(domain::failure::of(domain::errc::insufficient_permissions,
                                 "your tenant requires two-factor sign-in: set it up with POST "
                                 "/api/v1/auth/totp/setup and /enable, then sign in again"));
    return;
  }
  if (auto bad = non_text_input(ex->req)) {
    ex->fail(domain::failure::invalid({std::move(*bad)}));
    return;
  }
  if (ctx.auth.placement) {
    // At once when this node holds the tenant; later (from a database thread, after the
    // lease was acquired) back on an asio thread; or forwarded to the owner.
    auto run = [&ctx, op, ex, &rt] {
      if (auto refused = op->charge(rate_class::user, &ex->who)) return ex->fail(*refused);
      run_handler(ctx, ex, rt);
    };
    ctx.auth.placement->route(ex, ex->who.tenant_id, forwarded, run,
                              [&ctx, run] { asio::post(ctx.ioc, run); });
    return;
  }
  run_handler(ctx, ex, rt);
}

void run_handler(shared_context& ctx, const exchange_ptr& ex, const route& rt) {
  try {
    if (ex->audit) {
      // Who and where, for the actors that audit this request's changes in their
      // transactions and disclose sensitive values only to the roles that may see them:
      // every callback made while the handler runs keeps it.
      domain::audit_scope scope(audit_context_of(*ex, rt.auth == access::bearer));
      rt.handler(ex);
    } else {
      rt.handler(ex);
    }
  } catch (const std::exception& e) {
    log_error("handler {} {} threw: {}", to_string(rt.method), rt.path, e.what());
    ex->fail(domain::failure::of(domain::errc::internal, "internal error"));
  }
}

class session : public std::enable_shared_from_this<session>, public origin {
public:
  // `open`: the connections of the listener that accepted this one (each listener has its own
  // --max-connections budget, so a flood of the API never locks operators out of /metrics).
  session(tcp::socket&& socket, shared_context& ctx, const router& r,
          std::shared_ptr<std::atomic<std::size_t>> open)
      : stream_(std::move(socket)), ctx_(ctx), router_(r), open_(std::move(open)) {
    open_->fetch_add(1, std::memory_order_relaxed);
    ctx_.metrics.connections.fetch_add(1, std::memory_order_relaxed);
  }
  ~session() {
    open_->fetch_sub(1, std::memory_order_relaxed);
    ctx_.metrics.connections.fetch_sub(1, std::memory_order_relaxed);
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->await_request(); });
  }

private:
  // Between requests: wait for the first bytes under the idle timeout.
  void await_request() {
    if (buffer_.size() > 0) {
      read_header();
      return;
    }
    stream_.expires_after(seconds_to(ctx_.limits.idle_timeout));
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->read_header();
                            });
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(ctx_.limits.header_limit));
    // The largest limit any route has; admit_body() applies the route's own once the target
    // is known. The header is parsed alone (not eager) so that no body byte is taken before.
    parser_->body_limit(
        std::max<std::uint64_t>(ctx_.limits.body_limit, router_.largest_body_limit()));
    parser_->eager(false);
    // Most requests arrive whole in one read: parse what is buffered without another
    // asynchronous operation, and go to the socket only for what is missing.
    if (buffer_.size() > 0) {
      beast::error_code ec;
      auto used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec && ec != bhttp::error::need_more) return on_read_error(ec);
      if (parser_->is_header_done()) {
        if (!admit_body()) return;
        if (!parser_->is_done() && buffer_.size() > 0) {
          used = parser_->put(buffer_.data(), ec);
          buffer_.consume(used);
          if (ec && ec != bhttp::error::need_more) return on_read_error(ec);
        }
        if (parser_->is_done()) return on_request();
        return read_body();
      }
    }
    stream_.expires_after(seconds_to(ctx_.limits.header_timeout));
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) {
                               if (ec) return self->on_read_error(ec);
                               if (!self->admit_body()) return;
                               self->read_body();
                             });
  }

  // After the header: the matched route's body limit (route::body_limit, e.g. knowledge
  // documents), else the configured one; 413 (false) when the declared length is over.
  bool admit_body() {
    auto& req = parser_->get();
    std::uint64_t limit =
        body_limit_of(router_, ctx_.limits.body_limit, parse_verb(req.method_string()),
                      std::string_view(req.target().data(), req.target().size()));
    if (auto len = parser_->content_length(); len && *len > limit) {
      on_read_error(bhttp::error::body_limit);
      return false;
    }
    parser_->body_limit(limit);
    parser_->eager(true);
    return true;
  }

  void read_body() {
    stream_.expires_after(seconds_to(ctx_.limits.body_timeout));
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec) return self->on_read_error(ec);
                        self->on_request();
                      });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == bhttp::error::header_limit) {
      reply_error(431, "request line and headers are too large", "REQUEST_HEADER_FIELDS_TOO_LARGE");
    } else if (ec == bhttp::error::body_limit) {
      reply_error(413, "request body is too large", "PAYLOAD_TOO_LARGE");
    } else if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout ||
               ec == asio::error::connection_reset || ec == asio::error::eof ||
               ec == asio::error::operation_aborted) {
      close();
    } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category()) {
      reply_error(400, "malformed HTTP request", "BAD_REQUEST");
    } else {
      close();
    }
  }

  void reply_error(int status, std::string_view detail, std::string_view code) {
    response r;
    r.status = status;
    r.body = "{\"detail\":\"" + std::string(detail) + "\",\"code\":\"" + std::string(code) + "\"}";
    r.close = true;
    started_ = std::chrono::steady_clock::now();
    slot_ = ctx_.metrics.unmatched(verb::other);
    route_ = nullptr;
    method_ = verb::other;
    keep_alive_ = false;
    request_id_ = ctx_.id_prefix + "-" + std::to_string(ctx_.next_id++);
    ++ctx_.in_flight;
    client_.clear();                      // no request was read: the peer is all we know
    charge(rate_class::address, nullptr); // for the headers; the error is answered anyway
    write(std::move(r));
  }

  void on_request() {
    started_ = std::chrono::steady_clock::now();
    auto msg = parser_->release();
    parser_.reset();
    keep_alive_ = msg.keep_alive();

    request req;
    req.method = parse_verb(msg.method_string());
    set_target(req, std::string_view(msg.target().data(), msg.target().size()));
    req.headers.reserve(8);
    for (auto& f : msg) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    req.body = std::move(msg.body());
    auto rid = req.header("x-request-id");
    req.request_id = (rid && acceptable_request_id(*rid))
                         ? std::string(*rid)
                         : ctx_.id_prefix + "-" + std::to_string(ctx_.next_id++);
    request_id_ = req.request_id;
    if (remote_.empty()) {
      boost::system::error_code ignored;
      auto ep = stream_.socket().remote_endpoint(ignored);
      if (!ignored) remote_ = ep.address().to_string();
    }
    // Behind a trusted proxy the client is who X-Forwarded-For says (net/trusted_proxies.hpp).
    req.remote = ctx_.limits.proxies.empty()
                     ? remote_
                     : ctx_.limits.proxies.client_of(remote_, req.header("x-forwarded-for"));
    client_ = req.remote;

    ++ctx_.in_flight;
    auto m = router_.match(req.method, req.path);
    slot_ = m.result == router::outcome::found ? ctx_.metrics.slot_of(router_, m.matched->index)
                                               : ctx_.metrics.unmatched(req.method);
    route_ = m.result == router::outcome::found ? m.matched : nullptr;
    method_ = req.method;
    auto ex = std::make_shared<exchange>(std::move(req), [self = shared_from_this()](response r) {
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(r)]() mutable { self->write(std::move(r)); });
    });
    dispatch(ex, m);
  }

  void dispatch(const exchange_ptr& ex, router::match_result& m) {
    rate_headers_.clear();
    http::dispatch(ctx_, std::static_pointer_cast<origin>(shared_from_this()), ex, m);
  }

  // origin
  std::optional<domain::failure> charge(rate_class c, const principal* who) override {
    rate_headers_.clear();
    if (!ctx_.auth.rates) return std::nullopt;
    if (remote_.empty()) {
      boost::system::error_code ignored;
      auto ep = stream_.socket().remote_endpoint(ignored);
      if (!ignored) remote_ = ep.address().to_string();
    }
    // The client: the peer, or who a trusted proxy says it is (on_request).
    auto v = ctx_.auth.rates->charge(c, who, client_.empty() ? remote_ : client_);
    rate_headers_ = std::move(v.headers);
    return std::move(v.refused);
  }

  void write(response r) {
    tenant_ = r.tenant_id;
    user_ = r.user_id;
    if (r.stream) return write_stream(std::move(r));
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>();
    res->version(11);
    res->result(static_cast<unsigned>(r.status));
    if (!r.content_type.empty()) res->set(bhttp::field::content_type, r.content_type);
    res->set("X-Request-Id", request_id_);
    for (auto& [k, v] : rate_headers_) res->set(k, v);
    for (auto& [k, v] : r.headers) res->set(k, v);
    res->body() = std::move(r.body);
    bool keep = keep_alive_ && !r.close;
    res->keep_alive(keep);
    res->prepare_payload();
    auto status = r.status;
    stream_.expires_after(std::chrono::seconds(30));
    bhttp::async_write(
        stream_, *res,
        [self = shared_from_this(), res, keep, status](beast::error_code ec, std::size_t) {
          self->finish(status, !ec && keep);
        });
  }

  // Header first, then one HTTP chunk per piece the source yields, then the last chunk.
  void write_stream(response r) {
    auto res = std::make_shared<bhttp::response<bhttp::empty_body>>();
    res->version(11);
    res->result(static_cast<unsigned>(r.status));
    if (!r.content_type.empty()) res->set(bhttp::field::content_type, r.content_type);
    res->set("X-Request-Id", request_id_);
    for (auto& [k, v] : rate_headers_) res->set(k, v);
    for (auto& [k, v] : r.headers) res->set(k, v);
    res->chunked(true);
    res->keep_alive(keep_alive_ && !r.close);
    auto sr = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*res);
    stream_.expires_after(std::chrono::seconds(30));
    bhttp::async_write_header(stream_, *sr,
                              [self = shared_from_this(), res, sr, source = std::move(r.stream),
                               status = r.status](beast::error_code ec, std::size_t) mutable {
                                if (ec) return self->finish(status, false);
                                self->next_chunk(std::move(source), status, res->keep_alive());
                              });
  }

  void next_chunk(chunk_source source, int status, bool keep) {
    auto self = shared_from_this();
    source([self, source, status, keep](chunk piece) mutable {
      asio::post(self->stream_.get_executor(), [self, source = std::move(source), status, keep,
                                                piece = std::move(piece)]() mutable {
        self->stream_.expires_after(std::chrono::seconds(30));
        if (auto end = std::get_if<stream_end>(&piece)) {
          if (*end == stream_end::broken) return self->finish(status, false);
          asio::async_write(self->stream_, bhttp::make_chunk_last(),
                            [self, status, keep](beast::error_code ec, std::size_t) {
                              self->finish(status, !ec && keep);
                            });
          return;
        }
        auto data = std::make_shared<std::string>(std::move(std::get<std::string>(piece)));
        if (data->empty()) return self->next_chunk(std::move(source), status, keep);
        asio::async_write(self->stream_, bhttp::make_chunk(asio::buffer(*data)),
                          [self, data, source = std::move(source), status,
                           keep](beast::error_code ec, std::size_t) mutable {
                            if (ec) return self->finish(status, false);
                            self->next_chunk(std::move(source), status, keep);
                          });
      });
    });
  }

  void finish(int status, bool keep) {
    auto elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    ctx_.metrics.record(slot_, status, elapsed);
    if (ctx_.limits.access_log)
      log_access({request_id_, to_string(method_), route_ ? std::string_view(route_->path) : "",
                  remote_, tenant_, user_, status, elapsed});
    --ctx_.in_flight;
    if (!keep) return status == 413 || status == 431 ? linger() : close();
    refused_in_a_row_ = status == 429 ? refused_in_a_row_ + 1 : 0;
    if (refused_in_a_row_ >= 2) return pause_reading();
    await_request();
  }

  // A connection whose requests keep being refused with 429 (a client ignoring Retry-After)
  // has its next request read later: 10 ms after the second refusal in a row, doubling up to
  // 1 s. Each refusal still costs parsing, a token check and an answer: unpaced, one flooding
  // client's refusals took the cores from every other tenant (benchmarks/flood). A client that
  // waits as told never meets the pause.
  void pause_reading() {
    auto shift = std::min(refused_in_a_row_ - 2, 7);
    auto delay = std::chrono::milliseconds(std::min(10 << shift, 1000));
    if (!pause_) pause_.emplace(stream_.get_executor());
    pause_->expires_after(delay);
    pause_->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->close();
      self->await_request();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  // Answered before the request was read to its end (413, 431): closing with unread bytes in
  // the receive buffer makes the kernel reset the connection, and the client may lose the
  // answer it has not read yet. So stop sending, read and discard what the client is still
  // sending (at most 16 MiB, at most 2 s), then close (RFC 9112 §9.6).
  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    discard(0);
  }

  void discard(std::size_t total) {
    if (total > 16 * 1024 * 1024) return close();
    stream_.async_read_some(asio::buffer(drain_buffer_), [self = shared_from_this(), total](
                                                             beast::error_code ec, std::size_t n) {
      if (ec) return self->close();
      self->discard(total + n);
    });
  }

  std::array<char, 16 * 1024> drain_buffer_{};

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  shared_context& ctx_;
  const router& router_;
  bool keep_alive_ = true;
  std::string request_id_;
  std::string remote_; // the peer's address, read once per connection
  std::vector<std::pair<std::string, std::string>> rate_headers_; // of the current request
  std::string client_; // the current request's client (req.remote)
  std::size_t slot_ = 0;
  const route* route_ = nullptr; // of the current request, for the access line
  verb method_ = verb::other;
  std::int64_t tenant_ = 0;
  std::int64_t user_ = 0;
  int refused_in_a_row_ = 0; // answers of 429 in a row on this connection
  std::optional<asio::steady_timer> pause_;
  std::chrono::steady_clock::time_point started_;
  std::shared_ptr<std::atomic<std::size_t>> open_;
};

class listener : public std::enable_shared_from_this<listener> {
public:
  listener(asio::io_context& ioc, const tcp::endpoint& ep, shared_context& ctx, const router& r)
      : ioc_(ioc), acceptor_(asio::make_strand(ioc)), ctx_(ctx), router_(r) {
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(asio::socket_base::max_listen_connections);
  }

  tcp::endpoint local() const { return acceptor_.local_endpoint(); }

  void run() { accept(); }

  void close() {
    asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ec;
      self->acceptor_.close(ec);
    });
  }

private:
  void accept() {
    acceptor_.async_accept(asio::make_strand(ioc_), [self = shared_from_this()](
                                                        beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (ec) {
        // Out of file descriptors (or another transient failure): accepting again at once
        // would spin; try again shortly.
        log_warn("accept failed: {}", ec.message());
        auto timer = std::make_shared<asio::steady_timer>(self->acceptor_.get_executor());
        timer->expires_after(std::chrono::milliseconds(100));
        timer->async_wait([self, timer](beast::error_code) { self->accept(); });
        return;
      }
      if (self->open_->load(std::memory_order_relaxed) >= self->ctx_.limits.max_connections) {
        // Counted before the answer is on its way: a client that reads it and then scrapes the
        // metrics finds it counted.
        self->ctx_.metrics.connections_refused.fetch_add(1, std::memory_order_relaxed);
        refuse(std::move(socket));
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<session>(std::move(socket), self->ctx_, self->router_, self->open_)
            ->start();
      }
      self->accept();
    });
  }

  // Over the connection cap: a fixed 503 and the connection closed, costing no session.
  static void refuse(tcp::socket socket) {
    static constexpr std::string_view busy =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Retry-After: 1\r\nConnection: close\r\nContent-Length: 80\r\n\r\n"
        R"({"detail":"too many open connections, retry later","code":"SERVICE_UNAVAILABLE"})";
    auto sock = std::make_shared<tcp::socket>(std::move(socket));
    asio::async_write(*sock, asio::buffer(busy.data(), busy.size()),
                      [sock](beast::error_code, std::size_t) {
                        beast::error_code ignored;
                        sock->shutdown(tcp::socket::shutdown_both, ignored);
                        sock->close(ignored);
                      });
  }

  asio::io_context& ioc_;
  tcp::acceptor acceptor_;
  shared_context& ctx_;
  const router& router_;
  std::shared_ptr<std::atomic<std::size_t>> open_ = std::make_shared<std::atomic<std::size_t>>(0);
};

tcp::endpoint parse_endpoint(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error("listen address needs host:port: " + address);
  auto host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  beast::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("invalid listen address: " + address);
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (...) {
    throw std::runtime_error("invalid listen port: " + address);
  }
  if (port < 0 || port > 65535) throw std::runtime_error("invalid listen port: " + address);
  return {addr, static_cast<unsigned short>(port)};
}

} // namespace

struct server::impl {
  impl(int n, server_limits l, auth_inputs a, http_metrics& m)
      : threads(n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
        ioc(threads), work(asio::make_work_guard(ioc)), ctx{l, std::move(a), m, ioc} {}

  int threads;
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  shared_context ctx;
  std::vector<std::shared_ptr<listener>> listeners;
  std::vector<std::thread> pool;
};

server::server(int threads, server_limits limits, auth_inputs auth, http_metrics& metrics)
    : impl_(std::make_unique<impl>(threads, limits, std::move(auth), metrics)) {}

server::~server() {
  stop();
}

std::string server::listen(const std::string& address, const router& r) {
  auto ep = parse_endpoint(address);
  std::shared_ptr<listener> l;
  try {
    l = std::make_shared<listener>(impl_->ioc, ep, impl_->ctx, r);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot listen on " + address + ": " + e.what());
  }
  impl_->listeners.push_back(l);
  auto bound = l->local();
  return bound.address().to_string() + ":" + std::to_string(bound.port());
}

void server::start() {
  for (auto& l : impl_->listeners) l->run();
  for (int i = 0; i < impl_->threads; ++i)
    impl_->pool.emplace_back([this] {
      name_this_thread("crm.http");
      // A handler that throws is logged and the thread goes back to serving.
      while (!run_guarded("an HTTP server thread", [this] { impl_->ioc.run(); })) {
      }
    });
}

namespace {

// Reads a streamed answer to its end (a forwarded request's answer travels as one message);
// nothing when it broke off.
void collect(chunk_source source, std::shared_ptr<std::string> body,
             std::function<void(std::optional<std::string>)> done) {
  auto next = source;
  next([source = std::move(source), body = std::move(body),
        done = std::move(done)](chunk piece) mutable {
    if (auto end = std::get_if<stream_end>(&piece))
      return done(*end == stream_end::complete ? std::optional(std::move(*body)) : std::nullopt);
    *body += std::get<std::string>(piece);
    collect(std::move(source), std::move(body), std::move(done));
  });
}

} // namespace

void server::serve_forwarded(const router& r, actors::forwarded_request in,
                             actors::forwarded_reply reply) {
  asio::post(impl_->ioc, [this, &r, in = std::move(in), reply = std::move(reply)]() mutable {
    request req;
    req.method = parse_verb(in.method);
    set_target(req, in.target);
    for (std::size_t i = 0; i + 1 < in.headers.size(); i += 2)
      req.headers.emplace_back(std::move(in.headers[i]), std::move(in.headers[i + 1]));
    req.body = std::move(in.body);
    req.remote = std::move(in.remote);
    req.request_id = std::move(in.request_id);
    auto m = r.match(req.method, req.path);
    // A forwarded body is held to the same limit as one read from a client (a peer is not
    // trusted to have checked it).
    bool too_large =
        req.body.size() > body_limit_of(r, impl_->ctx.limits.body_limit, req.method, req.target);
    auto o = std::make_shared<forwarded_origin>(impl_->ctx, req.remote);
    auto ex = std::make_shared<exchange>(std::move(req), [reply, o](response res) {
      actors::forwarded_response out;
      out.status = res.status;
      if (!res.content_type.empty()) out.headers = {"Content-Type", res.content_type};
      for (auto& [k, v] : o->headers()) {
        out.headers.push_back(k);
        out.headers.push_back(std::move(v));
      }
      for (auto& [k, v] : res.headers) {
        out.headers.push_back(k);
        out.headers.push_back(std::move(v));
      }
      if (!res.stream) {
        out.body = std::move(res.body);
        return reply(std::move(out));
      }
      collect(std::move(res.stream), std::make_shared<std::string>(),
              [reply, out = std::move(out)](std::optional<std::string> body) mutable {
                if (!body) {
                  // Nothing of it was sent yet: the whole answer becomes the failure.
                  auto err = error_response(domain::failure::of(domain::errc::service_unavailable,
                                                                "the answer broke off; retry"));
                  out.status = err.status;
                  out.headers = {"Content-Type", err.content_type};
                  out.body = std::move(err.body);
                } else {
                  out.body = std::move(*body);
                }
                reply(std::move(out));
              });
    });
    if (too_large)
      return ex->fail(
          domain::failure::of(domain::errc::payload_too_large, "request body over the limit"));
    dispatch(impl_->ctx, o, ex, m, true);
  });
}

void server::stop_accepting() {
  for (auto& l : impl_->listeners) l->close();
}

bool server::drain(double seconds) {
  auto deadline = std::chrono::steady_clock::now() + seconds_to(seconds);
  while (impl_->ctx.in_flight.load() > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void server::stop() {
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->pool)
    if (t.joinable()) t.join();
  impl_->pool.clear();
}

} // namespace crm::http
