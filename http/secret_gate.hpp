// Inbound webhooks (a workflow's, a channel's) and API keys carry a secret, not a token. The gate
// checks it before the tenant is woken (issue 31): a caller with a wrong secret, or naming an id
// that does not exist, costs a look-up in memory, or at most one Postgres round trip per id a
// second, never the tenant's actors. It keeps each id's owner and secret (a workflow's opened, a
// channel's keyed hash) in a small cross-tenant cache. A cached secret that a call does not
// match is read again once it is a second old, so a secret changed on another node is in force
// here within a second; the tenant's actor checks the current one again all the same.
#pragma once
#include "domain/failure.hpp"
#include "persistence/secret_owners.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace crm::persistence {
class pg_pool;
} // namespace crm::persistence

namespace crm::http {

class secret_gate {
public:
  using lookup_fn = std::optional<persistence::secret_owner> (*)(persistence::pg_conn&,
                                                                 std::int64_t);
  // Whether the call's credentials match the owner's secret (false when it has none).
  using accepts_fn = std::function<bool(const persistence::secret_owner&)>;
  enum class verdict : std::uint8_t { admitted, refused, unknown };
  struct admission {
    verdict v = verdict::unknown;
    std::int64_t tenant = 0;       // admitted
    persistence::secret_owner who; // admitted: the owner as read (an API key's role, expiry)
  };
  using done_fn = std::function<void(domain::outcome<admission>)>;

  // `kind` labels carecrm_webhook_gate_total{kind, verdict} and
  // carecrm_owner_lookups_total{kind, source}.
  // `trust_match`: how long a cached owner a call matched admits the next calls before it is
  // read again (forever for webhooks, whose tenant's actor checks the secret again; seconds for
  // API keys, so a key revoked on another node stops here too).
  secret_gate(const char* kind, lookup_fn lookup,
              std::chrono::seconds trust_match = std::chrono::seconds::max());

  // `done` runs on the caller's thread when the cache answers, else on a pool thread.
  void admit(persistence::pg_pool& pool, std::int64_t id, accepts_fn accepts, done_fn done);
  void forget(std::int64_t id); // after a change of the id's secret on this node
  void forget_unknown();        // after a create on this node

  static void write_metrics(std::string& out);

private:
  using clock = std::chrono::steady_clock;
  struct entry {
    std::optional<persistence::secret_owner> owner; // nothing: no such id
    clock::time_point fetched;
  };
  admission judge(const std::optional<persistence::secret_owner>& owner, bool matches);

  const char* kind_;
  lookup_fn lookup_;
  clock::duration trust_match_;
  std::mutex mutex_;
  std::unordered_map<std::int64_t, entry> entries_;
  std::atomic<std::uint64_t> counts_[3] = {};
  std::atomic<std::uint64_t> from_db_{0}, from_memory_{0};
};

// `reply` of a create, first forgetting the ids `g` holds as unknown.
template <class Callback>
Callback forgetting_unknown(secret_gate& g, Callback reply) {
  return Callback([&g, reply](auto r) {
    if (r) g.forget_unknown();
    reply(std::move(r));
  });
}

// `reply` of a change of `id`'s secret (an update, a rotation, a delete), first forgetting what
// `g` holds of `id` (whatever the outcome: the next call reads it again).
template <class Callback>
Callback forgetting(secret_gate& g, std::int64_t id, Callback reply) {
  return Callback([&g, id, reply](auto r) {
    g.forget(id);
    reply(std::move(r));
  });
}

} // namespace crm::http
