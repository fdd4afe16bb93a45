// The gateway and the forwarder of a cluster node (actors/cluster.hpp, docs/cluster.md).
//
// The forwarder is one actor per node: it connects to other nodes' gateways through the
// middleman actor (asynchronously: no scheduler thread waits on a connect), monitors each, and
// keeps the requests in flight by id. Deadlines are a periodic sweep, not a CAF request timeout
// per message (docs/STACK-NOTES: those cost throughput and memory in 0.17).
//
// A link that drops does not fail the requests on it: the forwarder connects again and sends
// them again under the same ids, and the owner's gateway answers each id once (it runs a request
// the first time it sees its id and keeps the answer for the copies that follow). CAF 0.17 drops
// both connections when two nodes dial each other at the same moment (each closes the one it
// dialled as redundant, having kept the other's), so without this a write in flight then was
// answered 503 although nothing was wrong with either node.
#include "actors/cluster.hpp"
#include "actors/system.hpp"

#include "persistence/log.hpp"
#include "persistence/log_limiter.hpp"

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <map>
#include <optional>
#include <random>
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

// How often a request is sent again after its link dropped, and the longest pause before a try
// (random below it, doubling from 50 ms: two nodes that lost their link at once do not dial each
// other at the same moment again).
constexpr int max_resends = 4;

struct forward_job {
  std::string key; // the gateway's host:port
  forwarded_request req;
  std::chrono::steady_clock::time_point deadline;
  reply_once done;
  std::uint64_t id = 0; // set when sent before: the same id again, so the owner runs it once
  int resends = 0;
};

struct in_flight {
  reply_once done;
  std::chrono::steady_clock::time_point started, deadline;
  std::string key;       // the gateway's host:port
  forwarded_request req; // kept to send again if the link drops
  int resends = 0;
};

std::string gateway_key(const std::string& host, int port) {
  return host + ":" + std::to_string(port);
}

// What the forwarder and the threads that forward share: the gateways connected (host:port ->
// gateway) and the requests in flight. A request to a connected gateway is sent from the
// caller's thread with the forwarder as its sender (caf::send_as), so only the answer goes
// through the forwarder's mailbox: one thread hand-off fewer each way (docs/cluster.md).
struct link_state {
  std::mutex mutex;
  std::map<std::string, caf::actor> gateways;
  std::map<std::uint64_t, in_flight> flights; // by id: the first is the oldest in flight
  std::uint64_t next_id = 0;

  // Registers a flight (under `id` when it was sent before) and returns its id, with `mutex`
  // held by the caller.
  std::uint64_t fly(const forward_job& j, reply_once done) {
    auto id = j.id != 0 ? j.id : ++next_id;
    flights.emplace(id, in_flight{std::move(done), std::chrono::steady_clock::now(), j.deadline,
                                  j.key, j.req, j.resends});
    return id;
  }
  // Every id below this one is answered or given up (with `mutex` held): the owner forgets them.
  std::uint64_t floor() const { return flights.empty() ? next_id + 1 : flights.begin()->first; }
  // The flights to `key` (all with no key) whose deadline is before `until`, removed.
  std::vector<std::pair<std::uint64_t, in_flight>>
  take(const std::string* key, std::chrono::steady_clock::time_point until) {
    std::vector<std::pair<std::uint64_t, in_flight>> out;
    std::lock_guard lock(mutex);
    for (auto it = flights.begin(); it != flights.end();) {
      if ((key && it->second.key != *key) || it->second.deadline > until) {
        ++it;
        continue;
      }
      out.emplace_back(it->first, std::move(it->second));
      it = flights.erase(it);
    }
    return out;
  }
};

} // namespace crm::actors

namespace caf {
template <>
struct allowed_unsafe_message_type<crm::actors::forward_job> : std::true_type {};
template <>
struct allowed_unsafe_message_type<std::vector<crm::actors::forward_job>> : std::true_type {};
} // namespace caf

namespace crm::actors {
namespace {

// Across nodes: a forwarded request and its answer (built-in types only, no announcement).
using fwd_atom = caf::atom_constant<caf::atom("fwd")>;
using fwd_reply_atom = caf::atom_constant<caf::atom("fwdreply")>;
using sweep_atom = caf::atom_constant<caf::atom("fwdsweep")>;
using forget_atom = caf::atom_constant<caf::atom("fwdforget")>;
using later_atom = caf::atom_constant<caf::atom("fwdlater")>;
using resend_atom = caf::atom_constant<caf::atom("fwdresend")>;

// The request goes with the lowest id its forwarder still waits for (the owner forgets the
// answers below it) and how long the forwarder waits for this one (the owner keeps its answer
// as long).
void send_request(const caf::actor& from, const caf::actor& gw, std::uint64_t id,
                  std::uint64_t floor, std::chrono::steady_clock::time_point deadline,
                  forwarded_request& r) {
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
  caf::send_as(from, gw, fwd_atom::value, id, floor, static_cast<std::int64_t>(wait),
               std::move(r.method), std::move(r.target), std::move(r.headers), std::move(r.body),
               std::move(r.remote), std::move(r.request_id));
}

// Sends `j` at once, from `from`'s address, when its gateway is connected; false (nothing taken)
// when it is not yet.
bool send_if_connected(link_state& link, const caf::actor& from, forward_job& j) {
  std::unique_lock lock(link.mutex);
  auto it = link.gateways.find(j.key);
  if (it == link.gateways.end()) return false;
  auto gw = it->second;
  auto id = link.fly(j, std::move(j.done));
  auto floor = link.floor();
  lock.unlock();
  send_request(from, gw, id, floor, j.deadline, j.req);
  return true;
}

struct forwarder_state {
  runtime::impl* rt = nullptr;
  std::shared_ptr<link_state> link;
  std::map<std::string, std::vector<forward_job>> connecting; // waiting for a connect
  std::minstd_rand jitter{std::random_device{}()};
  // "cannot reach the gateway at <address>": once per 10 s per address, however many
  // requests fail meanwhile.
  log_limiter unreachable{std::chrono::seconds(10)};
  static inline const char* name = "cluster_forwarder";
};
using forwarder_actor = caf::stateful_actor<forwarder_state>;

void fail(runtime::impl& rt, std::vector<std::pair<std::uint64_t, in_flight>> flights,
          const std::string& why) {
  for (auto& f : flights) {
    ++rt.forwards_failed;
    f.second.done(unavailable(why));
  }
}

void fail_key(forwarder_state& st, const std::string& key, const std::string& why) {
  fail(*st.rt, st.link->take(&key, std::chrono::steady_clock::time_point::max()), why);
}

// Answers the jobs that waited for a connect that failed: those sent before may have reached
// the owner ("sent"), the others never left.
void give_up(forwarder_state& st, std::vector<forward_job>& jobs, const std::string& why) {
  for (auto& j : jobs) {
    ++st.rt->forwards_failed;
    j.done(unavailable(why, j.id != 0));
  }
}

// Connects to the job's gateway if no connect is under way, then sends every job that waited.
void connect_and_send(forwarder_actor* self, forward_job j) {
  auto& st = self->state;
  // Connected since the caller looked.
  if (send_if_connected(*st.link, self, j)) return;
  auto key = j.key;
  auto& waiting = st.connecting[key];
  waiting.push_back(std::move(j));
  if (waiting.size() > 1) return;
  auto colon = key.rfind(':');
  auto host = key.substr(0, colon);
  auto port = static_cast<std::uint16_t>(std::stoi(key.substr(colon + 1)));
  self->request(self->system().openssl_manager().actor_handle(), std::chrono::seconds(5),
                caf::connect_atom::value, host, port)
      .then(
          [self, key](const caf::node_id&, caf::strong_actor_ptr& p, const std::set<std::string>&) {
            auto& st = self->state;
            auto jobs = std::move(st.connecting[key]);
            st.connecting.erase(key);
            if (!p) return give_up(st, jobs, "the node owning this tenant has no gateway; retry");
            if (auto failed = st.unreachable.clear(key))
              log_info("cluster: reached the gateway at {} again after {} failed attempts", key,
                       failed);
            auto gw = caf::actor_cast<caf::actor>(p);
            self->monitor(gw);
            std::vector<std::uint64_t> ids;
            std::uint64_t floor = 0;
            {
              std::lock_guard lock(st.link->mutex);
              st.link->gateways[key] = gw;
              for (auto& j : jobs) ids.push_back(st.link->fly(j, std::move(j.done)));
              floor = st.link->floor();
            }
            for (std::size_t i = 0; i < jobs.size(); ++i)
              send_request(self, gw, ids[i], floor, jobs[i].deadline, jobs[i].req);
          },
          [self, key](caf::error& e) {
            auto& st = self->state;
            std::uint64_t held_back = 0;
            if (st.unreachable.admit(key, held_back))
              log_warn("cluster: cannot reach the gateway at {}: {}{}", key,
                       self->system().render(e),
                       held_back ? " (and " + std::to_string(held_back) +
                                       " times since the last line like this)"
                                 : std::string());
            auto jobs = std::move(st.connecting[key]);
            st.connecting.erase(key);
            give_up(st, jobs, "the node owning this tenant cannot be reached; retry");
          });
}

caf::behavior forwarder(forwarder_actor* self, runtime::impl* rt,
                        std::shared_ptr<link_state> link) {
  self->state.rt = rt;
  self->state.link = std::move(link);
  // The link to a gateway dropped: its requests go again on a new one, after a pause.
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
    auto flights = st.link->take(&key, std::chrono::steady_clock::time_point::max());
    log_warn("cluster: lost the connection to the gateway at {} ({} requests in flight)", key,
             flights.size());
    std::vector<forward_job> again;
    int resends = 0;
    for (auto& [id, f] : flights) {
      if (f.resends >= max_resends) {
        ++st.rt->forwards_failed;
        f.done(unavailable("the connection to the node holding this tenant dropped; retry"));
        continue;
      }
      resends = std::max(resends, f.resends + 1);
      again.push_back(forward_job{std::move(f.key), std::move(f.req), f.deadline, std::move(f.done),
                                  id, f.resends + 1});
    }
    if (again.empty()) return;
    st.rt->forwards_resent += again.size();
    auto most = 50 << (resends - 1);
    auto pause = std::uniform_int_distribution<int>(most / 5, most)(st.jitter);
    self->delayed_send(self, std::chrono::milliseconds(pause), resend_atom::value,
                       std::move(again));
  });
  self->delayed_send(self, std::chrono::milliseconds(250), sweep_atom::value);
  return {
      [self](forward_job& j) { connect_and_send(self, std::move(j)); },
      [self](resend_atom, std::vector<forward_job>& jobs) {
        for (auto& j : jobs) connect_and_send(self, std::move(j));
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
      [self](forget_atom, const std::string& key, const std::string& why) {
        auto& st = self->state;
        {
          std::lock_guard lock(st.link->mutex);
          if (auto it = st.link->gateways.find(key); it != st.link->gateways.end()) {
            self->demonitor(it->second);
            st.link->gateways.erase(it);
          }
        }
        fail_key(st, key, why);
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

// What a gateway remembers of the requests it was sent, by sender and id, so that a copy sent
// again after a dropped link is answered without running it twice.
struct served_key {
  caf::node_id node;
  caf::actor_id from = 0;
  std::uint64_t id = 0;
  bool operator<(const served_key& o) const {
    return std::tie(node, from, id) < std::tie(o.node, o.from, o.id);
  }
};
struct served {
  std::chrono::steady_clock::time_point until; // the sender gives up then
  caf::actor back;                             // where the answer goes: the latest copy's sender
  std::optional<forwarded_response> answer;
};
struct served_book {
  std::mutex mutex;
  std::map<served_key, served> requests;

  // Forgets the answers of `sender` below `floor` (it has them) and, now and then, every answer
  // whose sender gave up waiting.
  void prune(const served_key& sender, std::uint64_t floor) {
    requests.erase(requests.lower_bound({sender.node, sender.from, 0}),
                   requests.lower_bound({sender.node, sender.from, floor}));
  }
  void expire(std::chrono::steady_clock::time_point now) {
    std::lock_guard lock(mutex);
    for (auto it = requests.begin(); it != requests.end();)
      it = it->second.until < now ? requests.erase(it) : std::next(it);
  }
};

void answer(const caf::actor& me, const caf::actor& back, std::uint64_t id, forwarded_response r) {
  caf::send_as(me, back, fwd_reply_atom::value, id, r.status, std::move(r.headers),
               std::move(r.body));
}

caf::behavior gateway(caf::event_based_actor* self, runtime::impl* rt,
                      std::shared_ptr<forward_handler> handler) {
  auto book = std::make_shared<served_book>();
  self->delayed_send(self, std::chrono::seconds(1), sweep_atom::value);
  return {
      [self, rt, handler, book](fwd_atom, std::uint64_t id, std::uint64_t floor, std::int64_t wait,
                                std::string& method, std::string& target,
                                std::vector<std::string>& headers, std::string& body,
                                std::string& remote, std::string& request_id) {
        auto sender = self->current_sender();
        if (!sender) return;
        auto back = caf::actor_cast<caf::actor>(sender);
        // Answered as the gateway (not anonymously): the forwarder checks who answers.
        auto me = caf::actor_cast<caf::actor>(self);
        served_key key{sender->node(), sender->id(), id};
        {
          std::unique_lock lock(book->mutex);
          book->prune(key, floor);
          auto [it, fresh] = book->requests.try_emplace(key);
          it->second.back = back;
          if (!fresh) {
            // A copy sent again: answered once the first is (or now, if it was).
            ++rt->forwards_repeated;
            if (!it->second.answer) return;
            auto r = *it->second.answer;
            lock.unlock();
            return answer(me, back, id, std::move(r));
          }
          it->second.until = std::chrono::steady_clock::now() +
                             std::chrono::milliseconds(std::max<std::int64_t>(wait, 0)) +
                             std::chrono::seconds(1);
        }
        (*handler)(forwarded_request{std::move(method), std::move(target), std::move(headers),
                                     std::move(body), std::move(remote), std::move(request_id)},
                   [book, key, back, me, id, rt](forwarded_response r) {
                     ++rt->forwards_served;
                     auto to = back;
                     {
                       std::lock_guard lock(book->mutex);
                       if (auto it = book->requests.find(key); it != book->requests.end()) {
                         to = it->second.back;
                         it->second.answer = r;
                       }
                     }
                     answer(me, to, id, std::move(r));
                   });
      },
      [self, book](sweep_atom) {
        book->expire(std::chrono::steady_clock::now());
        self->delayed_send(self, std::chrono::seconds(1), sweep_atom::value);
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
  forward_job j{gateway_key(host, port), std::move(req),
                std::chrono::steady_clock::now() + deadline, reply_once(std::move(done))};
  if (send_if_connected(*impl.link, impl.forwarder, j)) return;
  // Not connected yet: the forwarder connects, then sends.
  caf::anon_send(impl.forwarder, std::move(j));
}

void forget_gateway(runtime& rt, const std::string& host, int port, std::string why) {
  auto& impl = rt.internals();
  if (impl.forwarder)
    caf::anon_send(impl.forwarder, forget_atom::value, gateway_key(host, port), std::move(why));
}

void after(runtime& rt, std::chrono::milliseconds delay, std::function<void()> f) {
  auto& impl = rt.internals();
  if (!impl.forwarder) return f();
  caf::delayed_anon_send(impl.forwarder, delay, later_atom::value, std::move(f));
}

forwarding_stats forwarding(runtime& rt) {
  auto& impl = rt.internals();
  return {impl.forwards_ok.load(),
          impl.forwards_failed.load(),
          static_cast<double>(impl.forward_nanos.load()) / 1e9,
          impl.forwards_served.load(),
          impl.forwards_resent.load(),
          impl.forwards_repeated.load()};
}

} // namespace crm::actors
