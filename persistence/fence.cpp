#include "persistence/fence.hpp"

#include <pqxx/pqxx>

#include <atomic>

namespace crm::persistence {
namespace {
std::atomic<const lease_source*> source{nullptr};

held_lease lease_or_throw(const lease_source& s, std::int64_t tenant) {
  auto lease = s.lease_of(tenant);
  if (!lease) throw not_leased(tenant);
  return *lease;
}
} // namespace

not_leased::not_leased(std::int64_t tenant)
    : std::runtime_error("this node holds no lease of tenant " + std::to_string(tenant)) {}

domain::failure tenant_moving() {
  return domain::failure::of(domain::errc::service_unavailable,
                             "this tenant is moving to another node; retry");
}

void install_lease_source(const lease_source* s) {
  source.store(s);
}

bool fencing() {
  return source.load() != nullptr;
}

void fence(pqxx::transaction_base& tx, std::int64_t tenant) {
  auto* s = source.load();
  if (!s) return;
  auto lease = lease_or_throw(*s, tenant);
  tx.exec_params("SELECT crm_fence($1, $2, $3)", tenant, *lease.node, lease.epoch);
}

std::string fence_sql(std::int64_t tenant) {
  auto* s = source.load();
  if (!s) return {};
  auto lease = lease_or_throw(*s, tenant);
  // Node ids are checked against [A-Za-z0-9_.-] when the configuration is read.
  return "SELECT crm_fence(" + std::to_string(tenant) + ", '" + *lease.node + "', " +
         std::to_string(lease.epoch) + ");\n";
}

} // namespace crm::persistence
