#include "http/owner_directory.hpp"

#include "persistence/pg_pool.hpp"

#include <vector>

namespace crm::http {
namespace {

std::mutex registry_mutex;
std::vector<const owner_directory*>& registry() {
  static std::vector<const owner_directory*> all;
  return all;
}

} // namespace

owner_directory::owner_directory(const char* kind, lookup_fn lookup,
                                 std::chrono::seconds missing_ttl)
    : kind_(kind), lookup_(lookup), missing_ttl_(missing_ttl) {
  std::lock_guard lock(registry_mutex);
  registry().push_back(this);
}

void owner_directory::write_metrics(std::string& out) {
  out += "# HELP carecrm_owner_lookups_total Owners of webhook-reached ids, found by Postgres or "
         "in memory (known owners and ids recently missing).\n"
         "# TYPE carecrm_owner_lookups_total counter\n";
  std::lock_guard lock(registry_mutex);
  for (auto* d : registry()) {
    out += "carecrm_owner_lookups_total{kind=\"" + std::string(d->kind_) +
           "\",source=\"postgres\"} " + std::to_string(d->from_db_.load()) + "\n";
    out += "carecrm_owner_lookups_total{kind=\"" + std::string(d->kind_) +
           "\",source=\"memory\"} " + std::to_string(d->from_memory_.load()) + "\n";
  }
}

void owner_directory::find(persistence::pg_pool& pool, std::int64_t id, done_fn done) {
  std::optional<std::optional<std::int64_t>> known;
  {
    std::lock_guard lock(mutex_);
    if (auto it = owners_.find(id); it != owners_.end()) {
      known.emplace(it->second);
    } else if (auto gone = missing_.find(id); gone != missing_.end()) {
      if (clock::now() < gone->second)
        known.emplace(std::nullopt);
      else
        missing_.erase(gone);
    }
  }
  if (known) {
    from_memory_.fetch_add(1, std::memory_order_relaxed);
    return done(std::move(*known));
  }
  from_db_.fetch_add(1, std::memory_order_relaxed);
  pool.run<std::optional<std::int64_t>>(
      [lookup = lookup_, id](persistence::pg_conn& c) { return lookup(c, id); },
      [this, id, done = std::move(done)](domain::outcome<std::optional<std::int64_t>> r) {
        if (r) remember(id, *r);
        done(std::move(r));
      });
}

void owner_directory::forget_missing() {
  std::lock_guard lock(mutex_);
  missing_.clear();
}

void owner_directory::remember(std::int64_t id, std::optional<std::int64_t> owner) {
  std::lock_guard lock(mutex_);
  if (owner) {
    if (owners_.size() >= 100'000) owners_.clear();
    owners_[id] = *owner;
    return;
  }
  if (missing_.size() >= 100'000) {
    auto now = clock::now();
    std::erase_if(missing_, [now](auto& kv) { return kv.second <= now; });
    if (missing_.size() >= 100'000) missing_.clear();
  }
  missing_[id] = clock::now() + missing_ttl_;
}

} // namespace crm::http
