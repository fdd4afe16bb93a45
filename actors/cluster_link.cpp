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

#include <map>

namespace crm::actors {

forwarded_response unavailable(const std::string& why) {
  forwarded_response r;
  r.status = 503;
  r.headers = {"Content-Type", "application/json", "Retry-After", "1"};
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

struct in_flight {
  reply_once done;
  std::chrono::steady_clock::time_point started, deadline;
  std::string key;
  void answer(forwarded_response r) { done(std::move(r)); }
};

struct forwarder_state {
  runtime::impl* rt = nullptr;
  std::map<std::string, caf::actor> gateways;                 // host:port -> gateway
  std::map<std::string, std::vector<forward_job>> connecting; // waiting for a connect
  std::map<std::uint64_t, in_flight> flights;
  std::uint64_t next_id = 0;
  static inline const char* name = "cluster_forwarder";
};

void send_job(caf::stateful_actor<forwarder_state>* self, const caf::actor& gw, forward_job j) {
  auto& st = self->state;
  auto id = ++st.next_id;
  auto& f = st.flights[id];
  f.done = std::move(j.done);
  f.started = std::chrono::steady_clock::now();
  f.deadline = j.deadline;
  f.key = j.host + ":" + std::to_string(j.port);
  auto& r = j.req;
  self->send(gw, fwd_atom::value, id, std::move(r.method), std::move(r.target),
             std::move(r.headers), std::move(r.body), std::move(r.remote), std::move(r.request_id));
}

void fail_key(forwarder_state& st, const std::string& key, const std::string& why) {
  for (auto it = st.flights.begin(); it != st.flights.end();) {
    if (it->second.key != key) {
      ++it;
      continue;
    }
    ++st.rt->forwards_failed;
    it->second.answer(unavailable(why));
    it = st.flights.erase(it);
  }
}

caf::behavior forwarder(caf::stateful_actor<forwarder_state>* self, runtime::impl* rt) {
  self->state.rt = rt;
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto it = st.gateways.begin(); it != st.gateways.end(); ++it) {
      if (it->second.address() != dm.source) continue;
      log_warn("cluster: lost the connection to the gateway at {}", it->first);
      fail_key(st, it->first, "the node owning this tenant went away; retry");
      st.gateways.erase(it);
      break;
    }
  });
  self->delayed_send(self, std::chrono::milliseconds(250), sweep_atom::value);
  return {
      [self](forward_job& j) {
        auto& st = self->state;
        auto key = j.host + ":" + std::to_string(j.port);
        if (auto it = st.gateways.find(key); it != st.gateways.end())
          return send_job(self, it->second, std::move(j));
        auto& waiting = st.connecting[key];
        waiting.push_back(std::move(j));
        if (waiting.size() > 1) return;
        auto host = waiting.front().host;
        auto port = static_cast<std::uint16_t>(waiting.front().port);
        self->request(self->system().middleman().actor_handle(), std::chrono::seconds(5),
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
                      j.done(unavailable("the node owning this tenant has no gateway; retry"));
                    }
                    return;
                  }
                  auto gw = caf::actor_cast<caf::actor>(p);
                  self->monitor(gw);
                  st.gateways[key] = gw;
                  for (auto& j : jobs) send_job(self, gw, std::move(j));
                },
                [self, key](caf::error& e) {
                  auto& st = self->state;
                  log_warn("cluster: cannot reach the gateway at {}: {}", key,
                           self->system().render(e));
                  auto jobs = std::move(st.connecting[key]);
                  st.connecting.erase(key);
                  for (auto& j : jobs) {
                    ++st.rt->forwards_failed;
                    j.done(unavailable("the node owning this tenant cannot be reached; retry"));
                  }
                });
      },
      [self](fwd_reply_atom, std::uint64_t id, int status, std::vector<std::string>& headers,
             std::string& body) {
        auto& st = self->state;
        auto it = st.flights.find(id);
        if (it == st.flights.end()) return; // answered 503 already (deadline)
        ++st.rt->forwards_ok;
        st.rt->forward_nanos +=
            static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::steady_clock::now() - it->second.started)
                                           .count());
        it->second.answer({status, std::move(headers), std::move(body)});
        st.flights.erase(it);
      },
      [self](forget_atom, const std::string& key) {
        auto& st = self->state;
        fail_key(st, key, "the node owning this tenant went away; retry");
        if (auto it = st.gateways.find(key); it != st.gateways.end()) {
          self->demonitor(it->second);
          st.gateways.erase(it);
        }
      },
      [self](sweep_atom) {
        auto& st = self->state;
        auto now = std::chrono::steady_clock::now();
        for (auto it = st.flights.begin(); it != st.flights.end();) {
          if (it->second.deadline > now) {
            ++it;
            continue;
          }
          ++st.rt->forwards_failed;
          it->second.answer(unavailable("the node owning this tenant did not answer in time"));
          it = st.flights.erase(it);
        }
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
        (*handler)(forwarded_request{std::move(method), std::move(target), std::move(headers),
                                     std::move(body), std::move(remote), std::move(request_id)},
                   [back, id, rt](forwarded_response r) {
                     ++rt->forwards_served;
                     caf::anon_send(back, fwd_reply_atom::value, id, r.status, std::move(r.headers),
                                    std::move(r.body));
                   });
      },
  };
}

} // namespace

int publish_gateway(runtime& rt, const std::string& host, int port, forward_handler handler) {
  auto& impl = rt.internals();
  impl.gateway =
      impl.system->spawn(gateway, &impl, std::make_shared<forward_handler>(std::move(handler)));
  auto bound = impl.system->middleman().publish(impl.gateway, static_cast<std::uint16_t>(port),
                                                host.empty() ? nullptr : host.c_str(), true);
  if (!bound)
    throw std::runtime_error("cluster: cannot publish the gateway on " + host + ":" +
                             std::to_string(port) + ": " + impl.system->render(bound.error()));
  impl.forwarder = impl.system->spawn(forwarder, &impl);
  return *bound;
}

void forward_to(runtime& rt, const std::string& host, int port, forwarded_request req,
                std::chrono::milliseconds deadline, forwarded_reply done) {
  auto& impl = rt.internals();
  if (!impl.forwarder) return done(unavailable("this node forwards to no other node"));
  caf::anon_send(impl.forwarder, forward_job{host, port, std::move(req),
                                             std::chrono::steady_clock::now() + deadline,
                                             reply_once(std::move(done))});
}

void forget_gateway(runtime& rt, const std::string& host, int port) {
  auto& impl = rt.internals();
  if (impl.forwarder)
    caf::anon_send(impl.forwarder, forget_atom::value, host + ":" + std::to_string(port));
}

forwarding_stats forwarding(runtime& rt) {
  auto& impl = rt.internals();
  return {impl.forwards_ok.load(), impl.forwards_failed.load(),
          static_cast<double>(impl.forward_nanos.load()) / 1e9, impl.forwards_served.load()};
}

} // namespace crm::actors
