#include "actors/system.hpp"

#include "actors/cluster.hpp"
#include "actors/meters.hpp"
#include "cluster/membership.hpp"
#include "persistence/group_committer.hpp"
#include "persistence/log.hpp"

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include <malloc.h>

#include <algorithm>
#include <mutex>
#include <thread>

namespace crm::actors {

const char* child_name(child_kind k) {
#define CRM_CHILD_NAME(name) #name,
  static constexpr const char* names[] = {CRM_TENANT_CHILDREN(CRM_CHILD_NAME)};
#undef CRM_CHILD_NAME
  auto i = static_cast<std::size_t>(k);
  return i < child_count ? names[i] : "unknown";
}

runtime::impl::impl(runtime_options o, persistence::pg_pool& p)
    : opts(o), pool(p),
      committer(std::make_shared<persistence::group_committer>(
          p, o.commits_in_flight, &group_commits().transactions, &group_commits().latency)) {
  auto threads = opts.threads > 0
                     ? opts.threads
                     : static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  cfg.set("scheduler.max-threads", threads);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  // After the short spin, a worker with nothing to do blocks on its condition variable and is
  // woken by the next enqueue, instead of polling with 50 us sleeps: on two cores each sleep is
  // a context switch on the request path (measured: about +15 % GET requests/s; RESULTS.md).
  cfg.set("work-stealing.moderate-poll-attempts", 0);
  // A cluster's nodes talk through CAF's network layer over mutual TLS (actors/cluster_link.cpp):
  // a peer's certificate must be signed by the cluster's CA, on both sides of each connection.
  if (opts.cluster) {
    check_cluster_tls(opts.tls); // CAF reads the files per connection and throws there
    cfg.load<caf::io::middleman>();
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = opts.tls.certificate;
    cfg.openssl_key = opts.tls.key;
    cfg.openssl_cafile = opts.tls.ca;
  }
  system = std::make_unique<caf::actor_system>(cfg);
  housekeeping = std::thread([this] {
    name_this_thread("crm.housekeep");
    std::unique_lock lock(housekeeping_mutex);
    int trims = 0;
    while (!housekeeping_stop) {
      housekeeping_cv.wait_for(lock, std::chrono::seconds(2));
      // A passivated tenant's children free their state shortly after the supervisor is
      // removed, some of it only once their last messages are answered: trim on two ticks.
      if (trim_wanted.exchange(false)) trims = 2;
      if (trims > 0) {
        --trims;
        lock.unlock();
        malloc_trim(0);
        lock.lock();
      }
    }
  });
}

void runtime::impl::route(std::int64_t tid, child_kind k, caf::message m) {
  {
    std::shared_lock lock(mutex);
    if (auto it = tenants.find(tid); it != tenants.end()) {
      caf::anon_send(it->second.supervisor, route_atom::value, static_cast<int>(k), std::move(m));
      return;
    }
    if (shut_down) return; // the callbacks in `m` answer 503 as it is destroyed
  }
  if (opts.cluster && !opts.cluster->book().holds(tid)) {
    // Only the holder of the lease runs the tenant. Known to be held elsewhere: `m` answers
    // 503 as it is destroyed (requests are forwarded before they get here). Else acquire it.
    if (opts.cluster->book().owner_elsewhere(tid)) return;
    bool first = false;
    {
      std::unique_lock lock(mutex);
      if (shut_down) return;
      auto& waiting = acquiring[tid];
      first = waiting.empty();
      waiting.emplace_back(k, std::move(m));
    }
    if (first)
      opts.cluster->acquire(tid, [this, tid](cluster::owner_outcome r) {
        acquired(tid, r && r->node == opts.cluster->book().node_id());
      });
    return;
  }
  std::unique_lock lock(mutex);
  auto it = tenants.find(tid);
  if (it == tenants.end()) {
    if (shut_down) return;
    tenant_env env{tid, &pool, committer.get(), std::make_shared<tenant_stats>(), this};
    entry e{spawn_tenant_supervisor(*system, env), env.stats};
    it = tenants.emplace(tid, std::move(e)).first;
  }
  caf::anon_send(it->second.supervisor, route_atom::value, static_cast<int>(k), std::move(m));
}

void runtime::impl::acquired(std::int64_t tid, bool here) {
  std::vector<std::pair<child_kind, caf::message>> waiting;
  {
    std::unique_lock lock(mutex);
    auto it = acquiring.find(tid);
    if (it == acquiring.end()) return;
    waiting = std::move(it->second);
    acquiring.erase(it);
  }
  if (!here) return; // dropped: each callback answers 503
  for (auto& [k, m] : waiting) route(tid, k, std::move(m));
}

bool runtime::impl::passivate(std::int64_t tid, const caf::actor& who) {
  std::vector<std::function<void()>> waiting;
  {
    std::unique_lock lock(mutex);
    auto it = tenants.find(tid);
    if (it == tenants.end() || it->second.supervisor != who) return false;
    tenants.erase(it);
    passivations.fetch_add(1, std::memory_order_relaxed);
    trim_wanted = true;
    auto [from, to] = stopped_waiters.equal_range(tid);
    for (auto w = from; w != to; ++w) waiting.push_back(std::move(w->second));
    stopped_waiters.erase(from, to);
  }
  for (auto& f : waiting) f();
  return true;
}

runtime::runtime(runtime_options opts, persistence::pg_pool& pool)
    : impl_(std::make_unique<impl>(opts, pool)) {
  impl_->owner = this;
}

runtime::~runtime() {
  shutdown();
  {
    std::lock_guard lock(impl_->housekeeping_mutex);
    impl_->housekeeping_stop = true;
  }
  impl_->housekeeping_cv.notify_all();
  if (impl_->housekeeping.joinable()) impl_->housekeeping.join();
  impl_->system.reset();
}

void runtime::shutdown() {
  std::vector<caf::actor> sups;
  {
    std::unique_lock lock(impl_->mutex);
    if (impl_->shut_down) return;
  }
  stop_automation(*impl_);
  {
    std::unique_lock lock(impl_->mutex);
    impl_->shut_down = true;
    for (auto& [tid, e] : impl_->tenants) sups.push_back(e.supervisor);
    impl_->tenants.clear();
  }
  for (auto& s : sups) caf::anon_send(s, stop_atom::value);
  sups.clear();
  for (auto* a : {&impl_->gateway, &impl_->forwarder})
    if (*a) caf::anon_send_exit(*a, caf::exit_reason::user_shutdown);
  impl_->system->await_all_actors_done();
}

bool runtime::fail_child(std::int64_t tenant, std::string_view child) {
  int kind = -1;
  for (std::size_t k = 0; k < child_count; ++k)
    if (child == child_name(static_cast<child_kind>(k))) kind = static_cast<int>(k);
  if (kind < 0) return false;
  std::shared_lock lock(impl_->mutex);
  auto it = impl_->tenants.find(tenant);
  if (it == impl_->tenants.end()) return false;
  caf::anon_send(it->second.supervisor, fail_atom::value, kind);
  return true;
}

std::shared_ptr<const contacts_view> runtime::impl::contacts_view_of(std::int64_t tid) const {
  std::shared_ptr<tenant_stats> stats;
  {
    std::shared_lock lock(mutex);
    auto it = tenants.find(tid);
    if (it == tenants.end()) return nullptr;
    stats = it->second.stats;
  }
  stats->last_view_read.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                              std::memory_order_relaxed);
  return stats->contacts;
}

void runtime::evict(const std::vector<std::int64_t>& tenants) {
  std::shared_lock lock(impl_->mutex);
  for (auto tid : tenants)
    if (auto it = impl_->tenants.find(tid); it != impl_->tenants.end())
      caf::anon_send(it->second.supervisor, evict_atom::value);
}

void runtime::when_stopped(std::int64_t tenant, std::function<void()> then) {
  {
    std::unique_lock lock(impl_->mutex);
    if (impl_->tenants.count(tenant)) {
      impl_->stopped_waiters.emplace(tenant, std::move(then));
      return;
    }
  }
  then();
}

std::uint64_t runtime::passivations() const {
  return impl_->passivations.load(std::memory_order_relaxed);
}

bool runtime::is_live(std::int64_t tenant) const {
  std::shared_lock lock(impl_->mutex);
  return impl_->tenants.count(tenant) > 0;
}

std::size_t runtime::live_tenants() const {
  std::shared_lock lock(impl_->mutex);
  return impl_->tenants.size();
}

std::string runtime::actors_json(std::string_view search, std::size_t limit) const {
  struct shown {
    std::int64_t tenant_id;
    const tenant_stats* stats;
    std::int64_t mailbox;   // the supervisor's and its children's
    std::uint64_t messages; // handled by its children
  };
  std::shared_lock lock(impl_->mutex);
  std::vector<shown> tenants;
  tenants.reserve(impl_->tenants.size());
  for (auto& [tid, e] : impl_->tenants) {
    if (!search.empty() && std::to_string(tid).find(search) == std::string::npos) continue;
    shown t{tid, e.stats.get(), e.stats->supervisor_mailbox.load(), 0};
    for (std::size_t k = 0; k < child_count; ++k) {
      t.mailbox += e.stats->mailbox[k].load();
      t.messages += e.stats->messages[k].load();
    }
    tenants.push_back(t);
  }
  if (limit > 0) {
    auto busier = [](const shown& a, const shown& b) {
      return std::tie(b.mailbox, b.messages, a.tenant_id) <
             std::tie(a.mailbox, a.messages, b.tenant_id);
    };
    auto end = tenants.begin() + static_cast<std::ptrdiff_t>(std::min(limit, tenants.size()));
    std::partial_sort(tenants.begin(), end, tenants.end(), busier);
    tenants.erase(end, tenants.end());
  }
  std::string out = "{\"tenants\":[";
  bool first = true;
  for (auto& t : tenants) {
    if (!first) out += ',';
    first = false;
    const auto& st = *t.stats;
    out += "{\"tenant_id\":" + std::to_string(t.tenant_id) +
           ",\"mailbox\":" + std::to_string(st.supervisor_mailbox.load()) + ",\"children\":[";
    bool first_child = true;
    for (std::size_t k = 0; k < child_count; ++k) {
      auto restarts = st.restarts[k].load();
      if (!st.alive[k].load() && restarts == 0) continue;
      if (!first_child) out += ',';
      first_child = false;
      out += "{\"name\":\"" + std::string(child_name(static_cast<child_kind>(k))) +
             "\",\"alive\":" + (st.alive[k].load() ? "true" : "false") +
             ",\"mailbox\":" + std::to_string(st.mailbox[k].load()) +
             ",\"messages\":" + std::to_string(st.messages[k].load()) +
             ",\"busy_ms\":" + std::to_string(st.busy_nanos[k].load() / 1'000'000) +
             ",\"restarts\":" + std::to_string(restarts) + ",\"busy_times\":[";
      for (std::size_t b = 0; b < st.busy_times[k].size(); ++b)
        out += (b ? "," : "") + std::to_string(st.busy_times[k][b].load());
      out += "]}";
    }
    out += "]}";
  }
  out += "],\"tenants_live\":" + std::to_string(impl_->tenants.size()) + ",\"busy_bounds_us\":[";
  for (std::size_t b = 0; b < tenant_stats::busy_bounds_us.size(); ++b)
    out += (b ? "," : "") + std::to_string(tenant_stats::busy_bounds_us[b]);
  out += "]}";
  return out;
}

metered::metered(actor_meter& m, caf::scheduled_actor* self, std::int64_t& published,
                 std::atomic<std::int64_t>* slot, std::atomic<std::uint64_t>* messages,
                 std::atomic<std::uint64_t>* busy_nanos, tenant_stats::busy_histogram* busy_times)
    : m_(m), self_(self), published_(published), slot_(slot), messages_(messages),
      busy_nanos_(busy_nanos), busy_times_(busy_times), start_(std::chrono::steady_clock::now()) {}

metered::~metered() {
  auto n = m_.messages.fetch_add(1, std::memory_order_relaxed);
  auto nanos = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now() - start_)
                                              .count());
  m_.nanos.fetch_add(nanos, std::memory_order_relaxed);
  if (messages_) messages_->fetch_add(1, std::memory_order_relaxed);
  if (busy_nanos_) busy_nanos_->fetch_add(nanos, std::memory_order_relaxed);
  if (busy_times_) {
    const auto& bounds = tenant_stats::busy_bounds_us;
    auto b = std::upper_bound(bounds.begin(), bounds.end(), nanos / 1000) - bounds.begin();
    (*busy_times_)[static_cast<std::size_t>(b)].fetch_add(1, std::memory_order_relaxed);
  }
  // Counting the mailbox walks it: sample, and always when it was non-empty last time.
  if ((n & 15) == 0 || published_ != 0) {
    auto depth = static_cast<std::int64_t>(self_->mailbox().size());
    m_.mailbox.fetch_add(depth - published_, std::memory_order_relaxed);
    if (slot_) slot_->store(depth, std::memory_order_relaxed);
    published_ = depth;
  }
}

} // namespace crm::actors
