// Migration 017 against a real PostgreSQL (CARECRM_TEST_PG_DSN, started by scripts/test): the
// sensitive values sealed before values were bound to their contact and field are sealed again,
// bound, and then open only there. Runs on temporary tables of its own, rolled back.
#include "domain/custom_field.hpp"
#include "domain/json_parse.hpp"
#include "domain/secret_keys.hpp"
#include "persistence/sealed_columns.hpp"
#include "persistence/secrets_repo.hpp"
#include "pg_env.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

namespace crm::persistence {
namespace {

std::string sealed_member(std::string_view stored) {
  boost::json::object o{{"$sealed", stored}};
  return boost::json::serialize(o);
}

// The value stored under `field` in the custom_fields text, opened for `purpose`.
std::optional<std::string> open_member(const domain::data_key& key, std::string_view purpose,
                                       const std::string& custom_fields, const char* field) {
  auto v = domain::parse_json(custom_fields);
  auto* m = v.as_object().if_contains(field);
  if (!m || !m->is_object() || !m->as_object().contains("$sealed")) return std::nullopt;
  auto& s = m->as_object().at("$sealed").as_string();
  return key.open(purpose, std::string_view(s.data(), s.size()));
}

// Tenant 7's data key `key`, sealed by `keys`, in temporary tables of the transaction's own,
// which come first in the search path: the migration's statements find them.
void temp_tables(pqxx::work& tx, const domain::secret_keys& keys, const domain::data_key& key) {
  tx.exec("CREATE TEMP TABLE tenant_data_keys (tenant_id bigint, data_key text) ON COMMIT DROP;"
          "CREATE TEMP TABLE contacts (id bigint, tenant_id bigint, custom_fields jsonb)"
          " ON COMMIT DROP");
  tx.exec_params("INSERT INTO tenant_data_keys VALUES (7, $1)",
                 keys.seal(sealed::tenant_data_key, 7, key.bytes()));
}

TEST(BoundValues, ValuesSealedBeforeBindingAreSealedAgainBoundToTheirContactAndField) {
  auto keys = domain::secret_keys::generate("k1");
  auto key = domain::data_key::generate();
  pqxx::connection c(test_dsn());
  pqxx::work tx(c);
  temp_tables(tx, keys, key);
  auto legacy = key.seal(sealed::legacy_contact_field, "\"asthma\"");
  auto bound = key.seal(sealed::contact_field(42, "dx"), "\"gout\"");
  tx.exec_params("INSERT INTO contacts VALUES"
                 " (41, 7, ('{\"dx\": ' || $1 || ', \"plain\": 3}')::jsonb),"
                 " (42, 7, ('{\"dx\": ' || $2 || '}')::jsonb),"
                 " (43, 7, '{\"plain\": \"x\"}')",
                 sealed_member(legacy), sealed_member(bound));

  EXPECT_EQ(bind_sensitive_values(tx, keys), 1); // 42 is bound already, 43 holds none

  auto after = [&](int id) {
    return tx.exec1("SELECT custom_fields::text FROM contacts WHERE id = " + std::to_string(id))[0]
        .as<std::string>();
  };
  auto c41 = after(41);
  EXPECT_EQ(open_member(key, sealed::contact_field(41, "dx"), c41, "dx"),
            std::optional<std::string>("\"asthma\""));
  EXPECT_FALSE(open_member(key, sealed::legacy_contact_field, c41, "dx"));
  EXPECT_FALSE(open_member(key, sealed::contact_field(42, "dx"), c41, "dx")); // another contact
  EXPECT_FALSE(open_member(key, sealed::contact_field(41, "dy"), c41, "dx")); // another field
  EXPECT_EQ(domain::parse_json(c41).as_object().at("plain").as_int64(), 3);
  EXPECT_EQ(open_member(key, sealed::contact_field(42, "dx"), after(42), "dx"),
            std::optional<std::string>("\"gout\""));
  EXPECT_EQ(after(43), "{\"plain\": \"x\"}");
}

TEST(BoundValues, ADataKeyTheConfiguredKeysDoNotOpenStopsTheMigration) {
  pqxx::connection c(test_dsn());
  pqxx::work tx(c);
  temp_tables(tx, domain::secret_keys::generate("k1"), domain::data_key::generate());
  EXPECT_THROW(bind_sensitive_values(tx, domain::secret_keys::generate("k1")), std::exception);
}

} // namespace
} // namespace crm::persistence
