// The group committer against a real PostgreSQL (CARECRM_TEST_PG_DSN, started by scripts/test):
// one tenant's batch that cannot be written, or that PostgreSQL refuses, fails alone, and every
// other batch sharing its transaction is committed.
#include "domain/errc.hpp"
#include "persistence/group_committer.hpp"
#include "persistence/pg_pool.hpp"
#include "pg_env.hpp"

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace crm::persistence {
namespace {

// One row into the probe table; `text` is quoted by the connection.
struct probe_batch final : tx_batch {
  std::int64_t tenant_id;
  std::string table, text;
  bool bad_sql = false;
  probe_batch(std::int64_t t, std::string tbl, std::string x, bool bad = false)
      : tenant_id(t), table(std::move(tbl)), text(std::move(x)), bad_sql(bad) {}
  std::int64_t tenant() const override { return tenant_id; }
  void append_sql(sql_text& out) const override {
    out.body() += "INSERT INTO " + table + " (tenant, v) VALUES (" + std::to_string(tenant_id) +
                  "," + out.quote(text) + ");\n";
    if (bad_sql) out.body() += "SELECT 1/0;\n";
  }
};

class committer_test : public ::testing::Test {
protected:
  void SetUp() override {
    table = "committer_probe_" + std::to_string(::getpid());
    pqxx::connection c(test_dsn());
    pqxx::work w(c);
    w.exec("DROP TABLE IF EXISTS " + table);
    w.exec("CREATE TABLE " + table + " (tenant bigint PRIMARY KEY, v text NOT NULL)");
    w.commit();
  }
  void TearDown() override {
    pqxx::connection c(test_dsn());
    pqxx::work w(c);
    w.exec("DROP TABLE IF EXISTS " + table);
    w.commit();
  }
  std::vector<std::int64_t> stored() {
    pqxx::connection c(test_dsn());
    pqxx::work w(c);
    std::vector<std::int64_t> out;
    for (auto row : w.exec("SELECT tenant FROM " + table + " ORDER BY tenant"))
      out.push_back(row[0].as<std::int64_t>());
    return out;
  }
  // Submits every batch while the only transaction slot is held by a first, slow batch, so
  // they all ride in one merged transaction; returns each one's outcome code (0 for success).
  std::vector<int> commit_together(std::vector<std::shared_ptr<const tx_batch>> batches) {
    pg_pool pool(test_dsn(), 1);
    auto committer = std::make_shared<group_committer>(pool, 1);
    std::promise<void> hold;
    auto held = hold.get_future().share();
    pool.submit([held](pg_conn&) { held.wait(); }); // keeps the one connection busy
    std::vector<std::promise<int>> results(batches.size());
    std::vector<std::future<int>> futures;
    for (auto& p : results) futures.push_back(p.get_future());
    for (std::size_t i = 0; i < batches.size(); ++i)
      committer->submit(batches[i], [&results, i](domain::outcome<domain::done> r) {
        results[i].set_value(r ? 0 : static_cast<int>(r.error().code) + 1);
      });
    hold.set_value();
    std::vector<int> out;
    for (auto& f : futures) out.push_back(f.get());
    pool.stop();
    return out;
  }
  static int code(domain::errc e) { return static_cast<int>(e) + 1; }

  std::string table;
};

TEST_F(committer_test, a_batch_that_cannot_be_quoted_fails_alone) {
  auto results = commit_together({
      std::make_shared<probe_batch>(1, table, "first"),
      std::make_shared<probe_batch>(2, table, "not utf-8: \xff\xfe"),
      std::make_shared<probe_batch>(3, table, "third"),
  });
  // The first batch may have been sent alone, before the others queued: either way the
  // neighbours of the unwritable batch commit and it alone fails, with 500, not 503.
  EXPECT_EQ(results[0], 0);
  EXPECT_EQ(results[1], code(domain::errc::internal));
  EXPECT_EQ(results[2], 0);
  EXPECT_EQ(stored(), (std::vector<std::int64_t>{1, 3}));
}

TEST_F(committer_test, a_batch_postgres_refuses_fails_alone_after_the_retry) {
  auto results = commit_together({
      std::make_shared<probe_batch>(1, table, "first"),
      std::make_shared<probe_batch>(2, table, "division by zero", true),
      std::make_shared<probe_batch>(3, table, "third"),
  });
  EXPECT_EQ(results[0], 0);
  EXPECT_EQ(results[1], code(domain::errc::internal));
  EXPECT_EQ(results[2], 0);
  EXPECT_EQ(stored(), (std::vector<std::int64_t>{1, 3}));
}

TEST_F(committer_test, only_unwritable_batches_commit_nothing_and_fail) {
  auto results = commit_together({
      std::make_shared<probe_batch>(1, table, "\xc3"),
      std::make_shared<probe_batch>(2, table, "\xed\xa0\x80"),
  });
  EXPECT_EQ(results[0], code(domain::errc::internal));
  EXPECT_EQ(results[1], code(domain::errc::internal));
  EXPECT_TRUE(stored().empty());
}

} // namespace
} // namespace crm::persistence
