// Configuration layering: defaults < TOML < environment < flags, and fail-fast errors.
#include "config/settings.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

using crm::config::config_error;
using crm::config::load;

namespace {

struct temp_toml {
  explicit temp_toml(const std::string& text) {
    path = testing::TempDir() + "carecrm-test-" + std::to_string(::getpid()) + ".toml";
    std::ofstream(path) << text;
  }
  ~temp_toml() { std::remove(path.c_str()); }
  std::string path;
};

// Each of `flags`, given to `carecrm serve` alone, is refused at load.
void expect_refused(std::initializer_list<const char*> flags) {
  const char* env[] = {nullptr};
  for (const char* bad : flags) {
    const char* argv[] = {"carecrm", "serve", bad};
    EXPECT_THROW(load(3, argv, env), config_error) << bad;
  }
}

} // namespace

TEST(settings, uses_defaults_without_file_environment_or_flags) {
  const char* argv[] = {"carecrm", "serve", "--config", "/nonexistent/never.toml"};
  const char* env[] = {nullptr};
  EXPECT_THROW(load(4, argv, env), config_error); // an explicit file must exist
  const char* argv2[] = {"carecrm", "serve"};
  auto inv = load(2, argv2, env);
  EXPECT_EQ(inv.values.listen, "127.0.0.1:8080");
  EXPECT_EQ(inv.values.body_limit, 1024u * 1024u);
  EXPECT_EQ(inv.words, (std::vector<std::string>{"serve"}));
}

TEST(settings, layers_toml_then_environment_then_flags) {
  temp_toml f("[http]\nlisten = \"127.0.0.1:1111\"\nbody_limit = 2048\n"
              "[redis]\nurl = \"redis://toml:1\"\n[auth]\njwt_secret = \"from-toml\"\n");
  const char* env[] = {"CARECRM_LISTEN=127.0.0.1:2222", "CARECRM_JWT_SECRET=from-env", nullptr};
  const char* argv[] = {"carecrm", "--config", f.path.c_str(), "serve", "--listen=127.0.0.1:3333"};
  auto inv = load(5, argv, env);
  EXPECT_EQ(inv.values.listen, "127.0.0.1:3333");    // flag beats env and toml
  EXPECT_EQ(inv.values.jwt_secret, "from-env");      // env beats toml
  EXPECT_EQ(inv.values.redis_url, "redis://toml:1"); // toml beats default
  EXPECT_EQ(inv.values.body_limit, 2048u);
}

TEST(settings, keeps_command_options_apart_from_settings) {
  const char* argv[] = {"carecrm", "tenant", "create", "--name", "Clinic", "--admin-email=a@b.co"};
  const char* env[] = {nullptr};
  auto inv = load(6, argv, env);
  EXPECT_EQ(inv.words, (std::vector<std::string>{"tenant", "create"}));
  EXPECT_EQ(inv.options.at("name"), "Clinic");
  EXPECT_EQ(inv.options.at("admin-email"), "a@b.co");
}

TEST(settings, rejects_malformed_numbers_naming_the_setting) {
  const char* argv[] = {"carecrm", "serve"};
  const char* env[] = {"CARECRM_BODY_LIMIT=lots", nullptr};
  try {
    load(2, argv, env);
    FAIL() << "expected a config_error";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("body-limit"), std::string::npos);
  }
}

TEST(settings, requires_a_long_jwt_secret_unless_dev) {
  crm::config::settings s;
  s.jwt_secret = "short";
  EXPECT_THROW(crm::config::require_serveable(s), config_error);
  s.jwt_secret = std::string(32, 'x');
  EXPECT_NO_THROW(crm::config::require_serveable(s));
  crm::config::settings d;
  d.dev = true;
  EXPECT_NO_THROW(crm::config::require_serveable(d));
  EXPECT_GE(d.jwt_secret.size(), 32u);
  crm::config::settings e;
  e.dev = true;
  crm::config::require_serveable(e);
  EXPECT_NE(d.jwt_secret, e.jwt_secret) << "each --dev process draws its own key";
}

TEST(settings, takes_commits_in_flight_from_one_to_sixteen) {
  const char* env[] = {nullptr};
  const char* argv[] = {"carecrm", "serve"};
  EXPECT_EQ(load(2, argv, env).values.commits_in_flight, 2);
  temp_toml f("[database]\ncommits_in_flight = 1\n");
  const char* from_file[] = {"carecrm", "--config", f.path.c_str(), "serve"};
  EXPECT_EQ(load(4, from_file, env).values.commits_in_flight, 1);
  expect_refused({"--commits-in-flight=0", "--commits-in-flight=17"});
}

TEST(settings, takes_the_audit_chain_interval_in_seconds_from_a_hundredth_to_a_minute) {
  const char* env[] = {nullptr};
  const char* argv[] = {"carecrm", "serve"};
  EXPECT_DOUBLE_EQ(load(2, argv, env).values.audit_chain_interval, 1);
  temp_toml f("[audit]\nchain_interval = 0.25\n");
  const char* from_file[] = {"carecrm", "--config", f.path.c_str(), "serve"};
  EXPECT_DOUBLE_EQ(load(4, from_file, env).values.audit_chain_interval, 0.25);
  const char* from_env[] = {"CARECRM_AUDIT_CHAIN_INTERVAL=5", nullptr};
  EXPECT_DOUBLE_EQ(load(2, argv, from_env).values.audit_chain_interval, 5);
  for (const char* edge : {"--audit-chain-interval=0.01", "--audit-chain-interval=60"}) {
    const char* flags[] = {"carecrm", "serve", edge};
    EXPECT_NO_THROW(load(3, flags, env)) << edge;
  }
  expect_refused(
      {"--audit-chain-interval=0.001", "--audit-chain-interval=61", "--audit-chain-interval=soon"});
}

TEST(settings, takes_a_cluster_address_to_advertise_only_with_a_port_to_dial) {
  const char* env[] = {nullptr};
  const char* argv[] = {"carecrm", "serve", "--cluster-advertise=node-2.internal:7400"};
  EXPECT_EQ(load(3, argv, env).values.cluster_advertise, "node-2.internal:7400");
  auto [host, port] = crm::config::host_and_port("cluster-listen", "[::1]:0");
  EXPECT_EQ(host, "[::1]");
  EXPECT_EQ(port, 0);
  expect_refused({"--cluster-advertise=node-2", "--cluster-advertise=:7400",
                  "--cluster-advertise=node-2:0", "--cluster-advertise=node-2:74x",
                  "--cluster-advertise=node-2:70000"});
}
