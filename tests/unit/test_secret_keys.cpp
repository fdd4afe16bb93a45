// Secrets at rest: the key list, sealing and keyed hashes (domain/secret_keys.hpp).
#include "domain/crypto.hpp"
#include "domain/secret_keys.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using crm::domain::secret_error;
using crm::domain::secret_keys;
using match = secret_keys::match;

std::string key_of_bytes(char fill) {
  return crm::domain::base64_encode(std::string(32, fill));
}

const std::string k1 = "k1:" + key_of_bytes('a');
const std::string k2 = "k2:" + key_of_bytes('b');

TEST(SecretKeys, ParsesTheListAndTheFirstSeals) {
  auto keys = secret_keys::parse(k2 + ", " + k1);
  EXPECT_EQ(keys.active_id(), "k2");
  EXPECT_TRUE(keys.has("k1"));
  EXPECT_FALSE(keys.has("k3"));
  EXPECT_EQ(keys.ids(), (std::vector<std::string>{"k2", "k1"}));
}

TEST(SecretKeys, RefusesMalformedListsWithoutEchoingKeyMaterial) {
  auto short_key = "k1:" + crm::domain::base64_encode(std::string(31, 'x'));
  for (const std::string& bad :
       {std::string(), std::string("k1"), std::string("bad id!:") + key_of_bytes('a'), short_key,
        std::string("k1:not base64 at all"), k1 + "," + k1, std::string(":") + key_of_bytes('a')}) {
    try {
      secret_keys::parse(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const secret_error& e) {
      EXPECT_EQ(std::string(e.what()).find(key_of_bytes('a')), std::string::npos) << e.what();
    }
  }
}

TEST(SecretKeys, SealsAndOpensBoundToPurposeAndTenant) {
  auto keys = secret_keys::parse(k1);
  auto sealed = keys.seal("channel.config.bot_token", 7, "123:secret-token");
  EXPECT_EQ(sealed.rfind("sb1:k1:", 0), 0u) << sealed;
  EXPECT_EQ(sealed.find("secret-token"), std::string::npos);
  EXPECT_EQ(keys.open("channel.config.bot_token", 7, sealed), "123:secret-token");
  // A fresh nonce each time: equal secrets do not look equal at rest.
  EXPECT_NE(keys.seal("channel.config.bot_token", 7, "123:secret-token"), sealed);
  // Copied to another tenant's row or another column, it does not open.
  EXPECT_THROW(keys.open("channel.config.bot_token", 8, sealed), secret_error);
  EXPECT_THROW(keys.open("ai_agent.api_key", 7, sealed), secret_error);
  EXPECT_EQ(keys.open("x", 1, keys.seal("x", 1, "")), "");
}

TEST(SecretKeys, AnAlteredOrForeignValueDoesNotOpen) {
  auto keys = secret_keys::parse(k1);
  auto sealed = keys.seal("p", 1, "value");
  auto altered = sealed;
  altered[altered.size() - 3] = altered[altered.size() - 3] == 'A' ? 'B' : 'A';
  EXPECT_THROW(keys.open("p", 1, altered), secret_error);
  EXPECT_THROW(keys.open("p", 1, "sb1:k1:short"), secret_error);
  auto other = secret_keys::parse(k2);
  EXPECT_THROW(other.open("p", 1, sealed), secret_error); // k1 is not configured there
  auto same_id_other_key = secret_keys::parse("k1:" + key_of_bytes('z'));
  EXPECT_THROW(same_id_other_key.open("p", 1, sealed), secret_error);
}

TEST(SecretKeys, PlaintextFromBeforeSealingOpensAsItIs) {
  auto keys = secret_keys::parse(k1);
  EXPECT_EQ(keys.open("p", 1, "legacy-plaintext"), "legacy-plaintext");
  EXPECT_FALSE(secret_keys::key_of("legacy-plaintext"));
}

TEST(SecretKeys, RotationOpensWithTheOldKeyAndSealsWithTheNew) {
  auto before = secret_keys::parse(k1);
  auto sealed = before.seal("p", 3, "token");
  auto after = secret_keys::parse(k2 + "," + k1);
  EXPECT_EQ(after.open("p", 3, sealed), "token");
  EXPECT_FALSE(after.current(sealed));
  auto moved = after.seal("p", 3, after.open("p", 3, sealed));
  EXPECT_TRUE(after.current(moved));
  EXPECT_EQ(secret_keys::key_of(moved), "k2");
  EXPECT_EQ(secret_keys::parse(k2).open("p", 3, moved), "token");
}

TEST(SecretKeys, KeyedHashesMatchOnlyTheSecretOfTheirTenant) {
  auto keys = secret_keys::parse(k1);
  auto h = keys.hash("channel.webhook_secret", 5, "inbound-secret-1234");
  EXPECT_TRUE(secret_keys::is_hashed(h));
  EXPECT_EQ(h.find("inbound"), std::string::npos);
  EXPECT_EQ(keys.verify("channel.webhook_secret", 5, "inbound-secret-1234", h), match::yes);
  EXPECT_EQ(keys.verify("channel.webhook_secret", 5, "inbound-secret-1235", h), match::no);
  EXPECT_EQ(keys.verify("channel.webhook_secret", 6, "inbound-secret-1234", h), match::no);
  EXPECT_EQ(keys.verify("channel.webhook_secret", 5, "", h), match::no);
  // The hash is deterministic (it is compared, not opened).
  EXPECT_EQ(keys.hash("channel.webhook_secret", 5, "inbound-secret-1234"), h);
}

TEST(SecretKeys, AHashUnderAnOlderKeyMatchesAndAsksToBeMoved) {
  auto h = secret_keys::parse(k1).hash("p", 1, "s3cret-s3cret-s3cret");
  auto rotated = secret_keys::parse(k2 + "," + k1);
  EXPECT_EQ(rotated.verify("p", 1, "s3cret-s3cret-s3cret", h), match::yes_rehash);
  EXPECT_EQ(rotated.verify("p", 1, "wrong", h), match::no);
  // With k1 gone, nothing matches it.
  EXPECT_EQ(secret_keys::parse(k2).verify("p", 1, "s3cret-s3cret-s3cret", h), match::no);
  // Plaintext stored before hashing existed matches, and asks to be hashed.
  EXPECT_EQ(rotated.verify("p", 1, "legacy", "legacy"), match::yes_rehash);
  EXPECT_EQ(rotated.verify("p", 1, "legacyx", "legacy"), match::no);
}

} // namespace

TEST(DataKey, SealsForItsPurposeOnlyAndNeverOpensUnderAnotherKey) {
  auto k = crm::domain::data_key::generate();
  auto sealed = k.seal("contact.custom_field", "\"O+\"");
  EXPECT_EQ(sealed.rfind("dk1:", 0), 0u);
  EXPECT_EQ(k.open("contact.custom_field", sealed), std::optional<std::string>("\"O+\""));
  EXPECT_FALSE(k.open("other.purpose", sealed));
  EXPECT_FALSE(crm::domain::data_key::generate().open("contact.custom_field", sealed));
  auto again = crm::domain::data_key::from_bytes(k.bytes());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->open("contact.custom_field", sealed), std::optional<std::string>("\"O+\""));
  EXPECT_FALSE(crm::domain::data_key::from_bytes("short"));
  auto altered = sealed;
  altered.back() = altered.back() == 'A' ? 'B' : 'A';
  EXPECT_FALSE(k.open("contact.custom_field", altered));
}
