// Node-to-node requests of a cluster over CAF's network layer (docs/cluster.md): each node
// publishes a gateway actor through the middleman; a node that receives a request for a tenant
// owned elsewhere forwards it to the owner's gateway, which answers it as if it had arrived
// there, and the answer returns the same way. Plain types only: callers never see CAF.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace crm::actors {

class runtime;
struct cluster_tls;

// Throws std::invalid_argument naming what is wrong when the files of `tls` cannot serve mutual
// TLS: one missing or unreadable, a key that is not the certificate's, a certificate the CA did
// not sign or that is not valid now.
void check_cluster_tls(const cluster_tls& tls);

struct forwarded_request {
  std::string method;
  std::string target;
  std::vector<std::string> headers; // name, value, name, value, ...
  std::string body;
  std::string remote;     // the client's address, for the owner's audit rows
  std::string request_id; // kept end to end
};

struct forwarded_response {
  int status = 503;
  std::vector<std::string> headers; // name, value, ... (Content-Type included)
  std::string body;
};

using forwarded_reply = std::function<void(forwarded_response)>;

// On an answer `forward_to` made itself, never on one the other node sent: "unsent" when the
// request never left this node (the node could not be reached: safe to send elsewhere), "sent"
// when it may have reached it (it went away or was too slow: not to be sent again).
inline constexpr const char* forward_failed_header = "X-Carecrm-Forward-Failed";
using forward_handler = std::function<void(forwarded_request, forwarded_reply)>;

// Publishes this node's gateway at host:port (port 0: any free one) and returns the port bound;
// every request forwarded to it goes to `handler`. Throws when the port cannot be bound. Only
// for a runtime made with a cluster.
int publish_gateway(runtime& rt, const std::string& host, int port, forward_handler handler);

// Sends `req` to the gateway at host:port. `done` (called on an actor thread) gets its answer,
// or a 503 when that node cannot be reached, goes away, or does not answer within `deadline`.
void forward_to(runtime& rt, const std::string& host, int port, forwarded_request req,
                std::chrono::milliseconds deadline, forwarded_reply done);

// The node at host:port is gone (declared dead, left, restarted elsewhere): requests in flight
// to it are answered 503 at once, saying `why`, and its connection is dropped.
void forget_gateway(runtime& rt, const std::string& host, int port, std::string why);

// Runs `f` on an actor thread after `delay` (a held request's next look; CAF's delayed
// messages, so no thread sleeps). Only for a runtime whose gateway is published.
void after(runtime& rt, std::chrono::milliseconds delay, std::function<void()> f);

struct forwarding_stats {
  std::uint64_t forwarded = 0; // answered by the other node
  std::uint64_t failed = 0;    // unreachable, gone or too slow: answered 503 here
  double seconds = 0;          // total time of the answered ones
  std::uint64_t served = 0;    // forwarded here by other nodes and answered
  std::uint64_t resent = 0;    // sent again on a new connection after the link dropped
  std::uint64_t repeated = 0;  // copies sent here again, answered without running twice
};
forwarding_stats forwarding(runtime& rt);

} // namespace crm::actors
