// What the handlers share: configuration and the process's long-lived components. Built once
// in app/main.cpp (the composition root) and passed to each family of routes.
#pragma once
#include <atomic>

namespace crm::config {
struct settings;
}
namespace crm::actors {
class runtime;
}
namespace crm::persistence {
class pg_pool;
class redis_client;
class revocation_store;
class login_throttle;
} // namespace crm::persistence
namespace crm::net {
class worker_pool;
}

namespace crm::http {

class http_metrics;
class auditor;
class tenant_placement;

struct services {
  const config::settings& cfg;
  actors::runtime& rt;
  persistence::pg_pool& pool;
  persistence::redis_client& redis;
  persistence::revocation_store& revocations;
  persistence::login_throttle& throttle;
  net::worker_pool& hashing; // CPU work off the network threads: Argon2id, PDF text
  http_metrics& metrics;
  auditor& audit;                              // the audit trail's HTTP side (http/audit.hpp)
  tenant_placement* placement = nullptr;       // in a cluster (http/placement.hpp)
  const std::atomic<bool>* stopping = nullptr; // set at SIGTERM: /readyz answers 503
};

} // namespace crm::http
