// The node's book of tenant leases (cluster/lease_book.hpp): a tenant whose lease was lost, even
// if Postgres gives it back at a newer epoch before the next heartbeat, is not held again until
// the actors that ran it under the old epoch have stopped.
#include "cluster/lease_book.hpp"

#include <gtest/gtest.h>

using crm::cluster::lease;
using crm::cluster::lease_book;

namespace {

void make_fresh(lease_book& b) {
  b.fresh_until(lease_book::clock::now() + std::chrono::hours(1));
}

std::int64_t epoch_of(const lease_book& b, std::int64_t tenant) {
  auto l = b.lease_of(tenant);
  return l ? l->epoch : 0;
}

} // namespace

TEST(lease_book, holds_what_a_heartbeat_reads_and_fences_itself_when_stale) {
  lease_book b("node-a");
  make_fresh(b);
  EXPECT_TRUE(b.reconcile({lease(5, "node-a", 1)}, b.mark()).empty());
  EXPECT_EQ(epoch_of(b, 5), 1);
  b.fresh_until(lease_book::clock::now() - std::chrono::seconds(1));
  EXPECT_FALSE(b.holds(5)); // no recent heartbeat: no lease claimed
}

TEST(lease_book, a_lost_tenant_is_held_again_only_after_its_old_actors_stopped) {
  lease_book b("node-a");
  make_fresh(b);
  b.reconcile({lease(5, "node-a", 1)}, b.mark());
  // Taken over and given back at epoch 3 between two heartbeats: lost at epoch 1.
  EXPECT_EQ(b.reconcile({lease(5, "node-a", 3)}, b.mark()), std::vector<std::int64_t>{5});
  EXPECT_FALSE(b.holds(5));
  EXPECT_TRUE(b.stopping(5));
  // Neither the next heartbeat nor an acquisition holds it while the old actors may still write.
  EXPECT_TRUE(b.reconcile({lease(5, "node-a", 3)}, b.mark()).empty());
  EXPECT_FALSE(b.holds(5));
  b.learn(lease(5, "node-a", 3));
  EXPECT_FALSE(b.holds(5));
  // Once they stopped, the lease is held at its new epoch.
  b.stopped(5);
  EXPECT_FALSE(b.stopping(5));
  b.reconcile({lease(5, "node-a", 3)}, b.mark());
  EXPECT_EQ(epoch_of(b, 5), 3);
}

TEST(lease_book, a_tenant_learned_after_the_mark_survives_a_heartbeat_read_before_it) {
  lease_book b("node-a");
  make_fresh(b);
  auto before = b.mark();
  b.learn(lease(7, "node-a", 2)); // acquired while the heartbeat's read was in flight
  EXPECT_TRUE(b.reconcile({}, before).empty());
  EXPECT_EQ(epoch_of(b, 7), 2);
  EXPECT_EQ(b.reconcile({}, b.mark()), std::vector<std::int64_t>{7});
}
