#include "http/secret_gate.hpp"

#include "persistence/pg_pool.hpp"

#include <vector>

namespace crm::http {

namespace {

// A refusal stands this long before the secret is read again; an unknown id, longer (a caller
// repeating unknown ids must not put a round trip per request in the queue commits wait in).
constexpr auto refresh_after = std::chrono::seconds(1);
constexpr auto unknown_for = std::chrono::seconds(5);
constexpr std::size_t max_entries = 20'000;

std::mutex registry_mutex;
std::vector<const secret_gate*>& registry() {
  static std::vector<const secret_gate*> all;
  return all;
}

} // namespace

secret_gate::secret_gate(const char* kind, lookup_fn lookup, std::chrono::seconds trust_match)
    : kind_(kind), lookup_(lookup),
      trust_match_(trust_match == std::chrono::seconds::max()
                       ? clock::duration::max()
                       : std::chrono::duration_cast<clock::duration>(trust_match)) {
  std::lock_guard lock(registry_mutex);
  registry().push_back(this);
}

void secret_gate::write_metrics(std::string& out) {
  out += "# HELP carecrm_webhook_gate_total Calls carrying a secret (inbound webhooks, API keys) "
         "judged before their tenant is woken: admitted, refused (wrong or missing secret) or "
         "unknown (no such id).\n"
         "# TYPE carecrm_webhook_gate_total counter\n";
  static constexpr const char* names[] = {"admitted", "refused", "unknown"};
  std::lock_guard lock(registry_mutex);
  for (auto* g : registry())
    for (int i = 0; i < 3; ++i)
      out += "carecrm_webhook_gate_total{kind=\"" + std::string(g->kind_) + "\",verdict=\"" +
             names[i] + "\"} " + std::to_string(g->counts_[i].load()) + "\n";
  out += "# HELP carecrm_owner_lookups_total Owners and secrets of the ids calls with a secret "
         "name, read from Postgres or found in memory.\n"
         "# TYPE carecrm_owner_lookups_total counter\n";
  for (auto* g : registry()) {
    out += "carecrm_owner_lookups_total{kind=\"" + std::string(g->kind_) +
           "\",source=\"postgres\"} " + std::to_string(g->from_db_.load()) + "\n";
    out += "carecrm_owner_lookups_total{kind=\"" + std::string(g->kind_) +
           "\",source=\"memory\"} " + std::to_string(g->from_memory_.load()) + "\n";
  }
}

secret_gate::admission secret_gate::judge(const std::optional<persistence::secret_owner>& owner,
                                          bool matches) {
  admission a;
  if (!owner) {
    a.v = verdict::unknown;
  } else if (matches) {
    a.v = verdict::admitted;
    a.tenant = owner->tenant_id;
    a.who = *owner;
  } else {
    a.v = verdict::refused;
  }
  counts_[static_cast<int>(a.v)].fetch_add(1, std::memory_order_relaxed);
  return a;
}

void secret_gate::admit(persistence::pg_pool& pool, std::int64_t id, accepts_fn accepts,
                        done_fn done) {
  std::optional<std::optional<persistence::secret_owner>> cached;
  bool fresh = false, trusted = false;
  {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(id); it != entries_.end()) {
      cached = it->second.owner;
      auto age = clock::now() - it->second.fetched;
      fresh = age < (cached->has_value() ? refresh_after : unknown_for);
      trusted = age < trust_match_;
    }
  }
  if (cached) {
    // A match is admitted at once while trusted; a refusal stands while the entry is fresh.
    bool matches = *cached && (*cached)->secret && accepts(**cached);
    if ((matches && trusted) || (!matches && fresh)) {
      from_memory_.fetch_add(1, std::memory_order_relaxed);
      return done(judge(*cached, matches));
    }
  }
  from_db_.fetch_add(1, std::memory_order_relaxed);
  pool.run<std::optional<persistence::secret_owner>>(
      [lookup = lookup_, id](persistence::pg_conn& c) { return lookup(c, id); },
      [this, id, accepts = std::move(accepts),
       done = std::move(done)](domain::outcome<std::optional<persistence::secret_owner>> r) {
        if (!r) return done(r.error());
        {
          std::lock_guard lock(mutex_);
          if (entries_.size() >= max_entries) entries_.clear();
          entries_[id] = entry{*r, clock::now()};
        }
        bool matches = *r && (*r)->secret && accepts(**r);
        done(judge(*r, matches));
      });
}

void secret_gate::forget_unknown() {
  std::lock_guard lock(mutex_);
  std::erase_if(entries_, [](auto& kv) { return !kv.second.owner; });
}

void secret_gate::forget(std::int64_t id) {
  std::lock_guard lock(mutex_);
  entries_.erase(id);
}

} // namespace crm::http
