// The gateway and the forwarder of a cluster node (actors/cluster.hpp, docs/cluster.md).
//
// The forwarder is one actor per node: it connects to other nodes' gateways through the
// middleman actor (asynchronously: no scheduler thread waits on a connect), monitors each, and
// keeps the requests in flight by id. Deadlines are a periodic sweep, not a CAF request timeout
// per message (docs/STACK-NOTES: those cost throughput and memory in 0.17).
#include "actors/cluster.hpp"
#include "actors/system.hpp"

#include "persistence/log.hpp"

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <map>
#include <stdexcept>

namespace crm::actors {

// `sent`: the request may have reached the other node (it went away or was too slow after it was
// sent), so it must not be sent again; else it never left this node.
forwarded_response unavailable(const std::string& why, bool sent = true) {
  forwarded_response r;
  r.status = 503;
  // Marks an answer made here, not by the other node: the caller may ask Postgres who owns the
  // tenant now and try once more (http/placement.cpp).
  r.headers = {"Content-Type",        "application/json",      "Retry-After", "1",
               forward_failed_header, sent ? "sent" : "unsent"};
  // The contract's error body (http::error_response: actors/ cannot reach it).
  r.body = R"({"detail":")" + why + R"(","code":"SERVICE_UNAVAILABLE"})";
  return r;
}

// The way back to the client, called once; if every copy is dropped unanswered (the forwarder
// stopped with the request queued or in flight) it answers 503 itself.
class reply_once {
public:
  reply_once() = default;
  explicit reply_once(forwarded_reply f) : s_(std::make_shared<state>(std::move(f))) {}
  void operator()(forwarded_response r) const {
    if (s_ && !s_->fired.exchange(true)) s_->fn(std::move(r));
  }

private:
  struct state {
    explicit state(forwarded_reply f) : fn(std::move(f)) {}
    ~state() {
      if (!fired.exchange(true)) fn(unavailable("this node stopped before the owner answered"));
    }
    forwarded_reply fn;
    std::atomic<bool> fired{false};
  };
  std::shared_ptr<state> s_;
};

struct forward_job {
  std::string host;
  int port = 0;
  forwarded_request req;
  std::chrono::steady_clock::time_point deadline;
  reply_once done;
};

struct in_flight {
  reply_once done;
  std::chrono::steady_clock::time_point started, deadline;
  std::string key;
};

// What the forwarder and the threads that forward share: the gateways connected (host:port ->
// gateway) and the requests in flight. A request to a connected gateway is sent from the
// caller's thread with the forwarder as its sender (caf::send_as), so only the answer goes
// through the forwarder's mailbox: one thread hand-off fewer each way (docs/cluster.md).
struct link_state {
  std::mutex mutex;
  std::map<std::string, caf::actor> gateways;
  std::map<std::uint64_t, in_flight> flights;
  std::uint64_t next_id = 0;

  // Registers a flight and returns its id (with `mutex` held by the caller).
  std::uint64_t fly(std::string key, std::chrono::steady_clock::time_point deadline,
                    reply_once done) {
    auto id = ++next_id;
    flights.emplace(
        id, in_flight{std::move(done), std::chrono::steady_clock::now(), deadline, std::move(key)});
    return id;
  }
  // The flights to `key` (all with an empty key) whose deadline is before `until`, removed.
  std::vector<in_flight> take(const std::string* key, std::chrono::steady_clock::time_point until) {
    std::vector<in_flight> out;
    std::lock_guard lock(mutex);
    for (auto it = flights.begin(); it != flights.end();) {
      if ((key && it->second.key != *key) || it->second.deadline > until) {
        ++it;
        continue;
      }
      out.push_back(std::move(it->second));
      it = flights.erase(it);
    }
    return out;
  }
};

} // namespace crm::actors

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::actors::forward_job> : std::true_type {};
} // namespace caf

namespace crm::actors {
namespace {

// Across nodes: a forwarded request and its answer (built-in types only, no announcement).
using fwd_atom = caf::atom_constant<caf::atom("fwd")>;
using fwd_reply_atom = caf::atom_constant<caf::atom("fwdreply")>;
using sweep_atom = caf::atom_constant<caf::atom("fwdsweep")>;
using forget_atom = caf::atom_constant<caf::atom("fwdforget")>;
using later_atom = caf::atom_constant<caf::atom("fwdlater")>;

void send_request(const caf::actor& from, const caf::actor& gw, std::uint64_t id,
                  forwarded_request& r) {
  caf::send_as(from, gw, fwd_atom::value, id, std::move(r.method), std::move(r.target),
               std::move(r.headers), std::move(r.body), std::move(r.remote),
               std::move(r.request_id));
}

// Sends `req` at once, from `from`'s address, when the gateway at `key` is connected; false
// (nothing taken) when it is not yet.
bool send_if_connected(link_state& link, const caf::actor& from, const std::string& key,
                       std::chrono::steady_clock::time_point until, reply_once& done,
                       forwarded_request& req) {
  std::unique_lock lock(link.mutex);
  auto it = link.gateways.find(key);
  if (it == link.gateways.end()) return false;
  auto gw = it->second;
  auto id = link.fly(key, until, std::move(done));
  lock.unlock();
  send_request(from, gw, id, req);
  return true;
}

struct forwarder_state {
  runtime::impl* rt = nullptr;
  std::shared_ptr<link_state> link;
  std::map<std::string, std::vector<forward_job>> connecting; // waiting for a connect
  static inline const char* name = "cluster_forwarder";
};

void fail(runtime::impl& rt, std::vector<in_flight> flights, const std::string& why) {
  for (auto& f : flights) {
    ++rt.forwards_failed;
    f.done(unavailable(why));
  }
}

void fail_key(forwarder_state& st, const std::string& key, const std::string& why) {
  fail(*st.rt, st.link->take(&key, std::chrono::steady_clock::time_point::max()), why);
}

caf::behavior forwarder(caf::stateful_actor<forwarder_state>* self, runtime::impl* rt,
                        std::shared_ptr<link_state> link) {
  self->state.rt = rt;
  self->state.link = std::move(link);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    std::string key;
    {
      std::lock_guard lock(st.link->mutex);
      for (auto it = st.link->gateways.begin(); it != st.link->gateways.end(); ++it) {
        if (it->second.address() != dm.source) continue;
        key = it->first;
        st.link->gateways.erase(it);
        break;
      }
    }
    if (key.empty()) return;
    log_warn("cluster: lost the connection to the gateway at {}", key);
    fail_key(st, key, "the node owning this tenant went away; retry");
  });
  self->delayed_send(self, std::chrono::milliseconds(250), sweep_atom::value);
  return {
      [self](forward_job& j) {
        auto& st = self->state;
        auto key = j.host + ":" + std::to_string(j.port);
        // Connected since forward_to looked.
        if (send_if_connected(*st.link, self, key, j.deadline, j.done, j.req)) return;
        auto& waiting = st.connecting[key];
        waiting.push_back(std::move(j));
        if (waiting.size() > 1) return;
        auto host = waiting.front().host;
        auto port = static_cast<std::uint16_t>(waiting.front().port);
        self->request(self->system().openssl_manager().actor_handle(), std::chrono::seconds(5),
                      caf::connect_atom::value, host, port)
            .then(
                [self, key](const caf::node_id&, caf::strong_actor_ptr& p,
                            const std::set<std::string>&) {
                  auto& st = self->state;
                  auto jobs = std::move(st.connecting[key]);
                  st.connecting.erase(key);
                  if (!p) {
                    for (auto& j : jobs) {
                      ++st.rt->forwards_failed;
                      j.done(
                          unavailable("the node owning this tenant has no gateway; retry", false));
                    }
                    return;
                  }
                  auto gw = caf::actor_cast<caf::actor>(p);
                  self->monitor(gw);
                  std::vector<std::uint64_t> ids;
                  {
                    std::lock_guard lock(st.link->mutex);
                    st.link->gateways[key] = gw;
                    for (auto& j : jobs)
                      ids.push_back(st.link->fly(key, j.deadline, std::move(j.done)));
                  }
                  for (std::size_t i = 0; i < jobs.size(); ++i)
                    send_request(self, gw, ids[i], jobs[i].req);
                },
                [self, key](caf::error& e) {
                  auto& st = self->state;
                  log_warn("cluster: cannot reach the gateway at {}: {}", key,
                           self->system().render(e));
                  auto jobs = std::move(st.connecting[key]);
                  st.connecting.erase(key);
                  for (auto& j : jobs) {
                    ++st.rt->forwards_failed;
                    j.done(
                        unavailable("the node owning this tenant cannot be reached; retry", false));
                  }
                });
      },
      [self](fwd_reply_atom, std::uint64_t id, int status, std::vector<std::string>& headers,
             std::string& body) {
        auto& st = self->state;
        in_flight f;
        {
          std::lock_guard lock(st.link->mutex);
          auto it = st.link->flights.find(id);
          if (it == st.link->flights.end()) return; // answered 503 already (deadline)
          // An answer counts only from the gateway the request went to: another peer that
          // guessed an id cannot answer for it.
          auto gw = st.link->gateways.find(it->second.key);
          if (gw == st.link->gateways.end() ||
              gw->second.address() != caf::actor_cast<caf::actor_addr>(self->current_sender())) {
            log_warn("cluster: an answer to request {} came from a node it was not sent to "
                     "(ignored)",
                     id);
            return;
          }
          f = std::move(it->second);
          st.link->flights.erase(it);
        }
        ++st.rt->forwards_ok;
        st.rt->forward_nanos +=
            static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::steady_clock::now() - f.started)
                                           .count());
        f.done({status, std::move(headers), std::move(body)});
      },
      [self](forget_atom, const std::string& key) {
        auto& st = self->state;
        {
          std::lock_guard lock(st.link->mutex);
          if (auto it = st.link->gateways.find(key); it != st.link->gateways.end()) {
            self->demonitor(it->second);
            st.link->gateways.erase(it);
          }
        }
        fail_key(st, key, "the node owning this tenant went away; retry");
      },
      [](later_atom, std::function<void()>& f) { f(); },
      [self](sweep_atom) {
        auto& st = self->state;
        fail(*st.rt, st.link->take(nullptr, std::chrono::steady_clock::now()),
             "the node owning this tenant did not answer in time");
        self->delayed_send(self, std::chrono::milliseconds(250), sweep_atom::value);
      },
  };
}

caf::behavior gateway(caf::event_based_actor* self, runtime::impl* rt,
                      std::shared_ptr<forward_handler> handler) {
  return {
      [self, rt, handler](fwd_atom, std::uint64_t id, std::string& method, std::string& target,
                          std::vector<std::string>& headers, std::string& body, std::string& remote,
                          std::string& request_id) {
        auto back = caf::actor_cast<caf::actor>(self->current_sender());
        // Answered as the gateway (not anonymously): the forwarder checks who answers.
        auto me = caf::actor_cast<caf::actor>(self);
        (*handler)(forwarded_request{std::move(method), std::move(target), std::move(headers),
                                     std::move(body), std::move(remote), std::move(request_id)},
                   [back, me, id, rt](forwarded_response r) {
                     ++rt->forwards_served;
                     caf::send_as(me, back, fwd_reply_atom::value, id, r.status,
                                  std::move(r.headers), std::move(r.body));
                   });
      },
  };
}

std::string openssl_errors() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += out.empty() ? "" : "; ";
    out += buf;
  }
  return out;
}

} // namespace

void check_cluster_tls(const cluster_tls& tls) {
  ERR_clear_error();
  auto fail = [](const std::string& what) {
    auto why = openssl_errors();
    throw std::invalid_argument(what + (why.empty() ? "" : " (" + why + ")"));
  };
  if (tls.certificate.empty() || tls.key.empty() || tls.ca.empty())
    throw std::invalid_argument("cluster TLS needs a certificate, its key and the cluster's CA");
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  if (!ctx) fail("cluster TLS: cannot make an OpenSSL context");
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.certificate.c_str()) != 1)
    fail("cluster-cert: cannot read a certificate from " + tls.certificate);
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key.c_str(), SSL_FILETYPE_PEM) != 1)
    fail("cluster-key: cannot use " + tls.key + " as the key of " + tls.certificate);
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    fail("cluster-key: cannot use " + tls.key + " as the key of " + tls.certificate);
  if (SSL_CTX_load_verify_locations(ctx.get(), tls.ca.c_str(), nullptr) != 1)
    fail("cluster-ca: cannot read a CA certificate from " + tls.ca);
  // This node's own certificate must pass the check every peer makes of it.
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx.get(), &chain);
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> check(X509_STORE_CTX_new(),
                                                                        X509_STORE_CTX_free);
  if (!check || X509_STORE_CTX_init(check.get(), SSL_CTX_get_cert_store(ctx.get()),
                                    SSL_CTX_get0_certificate(ctx.get()), chain) != 1)
    fail("cluster TLS: cannot check the certificate");
  if (X509_verify_cert(check.get()) != 1)
    throw std::invalid_argument(
        "cluster-cert: " + tls.certificate + " does not verify against cluster-ca " + tls.ca +
        ": " + X509_verify_cert_error_string(X509_STORE_CTX_get_error(check.get())));
  ERR_clear_error();
}

int publish_gateway(runtime& rt, const std::string& host, int port, forward_handler handler) {
  auto& impl = rt.internals();
  impl.gateway =
      impl.system->spawn(gateway, &impl, std::make_shared<forward_handler>(std::move(handler)));
  // Over TLS: a peer that shows no certificate signed by the cluster's CA is refused in the
  // handshake, before any BASP message (actors/runtime.cpp loads the OpenSSL module).
  auto bound = caf::openssl::publish(impl.gateway, static_cast<std::uint16_t>(port),
                                     host.empty() ? nullptr : host.c_str(), true);
  if (!bound)
    throw std::runtime_error("cluster: cannot publish the gateway on " + host + ":" +
                             std::to_string(port) + ": " + impl.system->render(bound.error()));
  impl.link = std::make_shared<link_state>();
  impl.forwarder = impl.system->spawn(forwarder, &impl, impl.link);
  return *bound;
}

void forward_to(runtime& rt, const std::string& host, int port, forwarded_request req,
                std::chrono::milliseconds deadline, forwarded_reply done) {
  auto& impl = rt.internals();
  if (!impl.forwarder) return done(unavailable("this node forwards to no other node", false));
  auto until = std::chrono::steady_clock::now() + deadline;
  reply_once once(std::move(done));
  if (send_if_connected(*impl.link, impl.forwarder, host + ":" + std::to_string(port), until, once,
                        req))
    return;
  // Not connected yet: the forwarder connects, then sends.
  caf::anon_send(impl.forwarder, forward_job{host, port, std::move(req), until, std::move(once)});
}

void forget_gateway(runtime& rt, const std::string& host, int port) {
  auto& impl = rt.internals();
  if (impl.forwarder)
    caf::anon_send(impl.forwarder, forget_atom::value, host + ":" + std::to_string(port));
}

void after(runtime& rt, std::chrono::milliseconds delay, std::function<void()> f) {
  auto& impl = rt.internals();
  if (!impl.forwarder) return f();
  caf::delayed_anon_send(impl.forwarder, delay, later_atom::value, std::move(f));
}

forwarding_stats forwarding(runtime& rt) {
  auto& impl = rt.internals();
  return {impl.forwards_ok.load(), impl.forwards_failed.load(),
          static_cast<double>(impl.forward_nanos.load()) / 1e9, impl.forwards_served.load()};
}

} // namespace crm::actors
