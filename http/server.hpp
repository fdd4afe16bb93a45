// The HTTP/1.1 frontend: Boost.Beast listeners and sessions on an asio thread pool, with the
// limits and timeouts of contract §1. This header stays free of Beast and asio.
#pragma once
#include "actors/cluster.hpp"
#include "http/auth.hpp"
#include "net/trusted_proxies.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace crm::domain {
class revocation_list;
}

namespace crm::persistence {
class pg_pool;
}

namespace crm::http {

class router;
class http_metrics;
class tenant_placement;
class rate_limits;
class auditor;

struct server_limits {
  std::size_t body_limit = std::size_t{1024} * 1024;
  std::size_t header_limit = std::size_t{8} * 1024;
  double header_timeout = 10;
  double idle_timeout = 60;
  double body_timeout = 30;
  // Open connections at most; one more is answered 503 and closed (--max-connections).
  std::size_t max_connections = 4096;
  // One log line per answered request (--access-log; persistence/log.hpp).
  bool access_log = false;
  // Peers whose X-Forwarded-For names the client (--trusted-proxies).
  net::trusted_proxies proxies;
};

// Authentication inputs the session applies to `bearer` routes before their handler.
struct auth_inputs {
  std::string jwt_secret;
  const domain::revocation_list* revoked = nullptr;
  operator_access ops;          // operator_token and operator_metrics routes
  rate_limits* rates = nullptr; // none: no rate limits, no RateLimit headers
  auditor* audit = nullptr;     // sees every answer of an audited route (http/audit.hpp)
  tenant_placement* placement =
      nullptr; // in a cluster: where a tenant's requests run (placement.hpp)
  persistence::pg_pool* pool = nullptr; // API keys are looked up there (api_key_auth.hpp)
};

class server {
public:
  server(int threads, server_limits limits, auth_inputs auth, http_metrics& metrics);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds `address` ("host:port", port 0 for any) to `r`; returns the bound "host:port".
  // Throws std::runtime_error when the address cannot be bound.
  std::string listen(const std::string& address, const router& r);

  // A request another node forwarded here (http/placement.hpp): matched against `r` and
  // answered as one of this node's own, without rate limits (it was charged where it arrived)
  // and never forwarded again.
  void serve_forwarded(const router& r, actors::forwarded_request req,
                       actors::forwarded_reply reply);

  void start();          // runs the asio threads
  void stop_accepting(); // closes the listeners
  // Waits up to `seconds` for requests in flight to be answered; true if none remain.
  bool drain(double seconds);
  void stop(); // stops the asio threads

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace crm::http
