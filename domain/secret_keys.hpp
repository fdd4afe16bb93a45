// Secrets at rest (docs/operations.md "Secrets at rest"). Provider tokens, signing secrets and
// API keys are sealed with libsodium's secretbox (XSalsa20-Poly1305) before they reach
// Postgres; a secret carecrm only ever compares (a channel's inbound webhook secret) is stored as
// a keyed hash (HMAC-SHA256) instead, so not even the keys give it back.
//
// Keys come from configuration as `id:base64(32 bytes)[,id:base64…]`: the first seals and
// hashes, every one listed opens. Stored forms name their key, so a key can be added first and
// `carecrm secrets rotate` can then move what it sealed to the new one:
//   sb1:<key id>:<base64url(nonce ‖ box)>   sealed
//   kh1:<key id>:<base64url(HMAC)>          keyed hash
// Each value is bound to what it is and whose it is (a purpose such as "channel.config" and the
// tenant id), so a value copied into another row or another tenant does not open there.
// A value in neither form is plaintext written before sealing existed (`serve` seals those at
// start).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

struct secret_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class secret_keys {
public:
  // Throws secret_error naming what is wrong with the list (never echoing key material).
  static secret_keys parse(std::string_view spec);
  // One random key (development servers without configured keys).
  static secret_keys generate(std::string id);

  const std::string& active_id() const { return keys_.front().id; }
  bool has(std::string_view id) const { return find(id) != nullptr; }
  std::vector<std::string> ids() const;

  std::string seal(std::string_view purpose, std::int64_t tenant, std::string_view plain) const;
  // The plaintext of a sealed value, or a legacy plaintext as it is. Throws secret_error when
  // the key is not configured or the value does not open (altered, or bound elsewhere).
  std::string open(std::string_view purpose, std::int64_t tenant, std::string_view stored) const;

  std::string hash(std::string_view purpose, std::int64_t tenant, std::string_view plain) const;
  enum class match { no, yes, yes_rehash }; // yes_rehash: right, but not under the active key
  // Compares a presented secret with a stored keyed hash (or legacy plaintext) in time that
  // does not depend on where they differ. A hash under a key not configured never matches.
  match verify(std::string_view purpose, std::int64_t tenant, std::string_view presented,
               std::string_view stored) const;

  // The key id a stored value names: nullopt for legacy plaintext.
  static std::optional<std::string_view> key_of(std::string_view stored);
  static bool is_sealed(std::string_view stored);
  static bool is_hashed(std::string_view stored);
  // Under the active key already (nothing for rotation to do).
  bool current(std::string_view stored) const { return key_of(stored) == active_id(); }

private:
  struct key {
    std::string id;
    std::array<unsigned char, 32> box{};
    std::array<unsigned char, 32> mac{};
  };
  static key derive(std::string id, std::string_view master);
  const key* find(std::string_view id) const;
  std::vector<key> keys_;
};

// A tenant's data key (docs/compliance.md "Sensitive fields"): 32 random bytes of its own,
// stored sealed by the configured keys (so `carecrm secrets rotate` moves it to a new key
// without touching what it sealed), sealing the tenant's sensitive values:
//   dk1:<base64url(nonce ‖ box)>
// Each value is bound to its purpose, as with secret_keys.
class data_key {
public:
  static data_key generate();
  // Nothing unless `raw` is exactly 32 bytes.
  static std::optional<data_key> from_bytes(std::string_view raw);
  std::string bytes() const;

  std::string seal(std::string_view purpose, std::string_view plain) const;
  // Nothing when it does not open (another key or purpose, altered, not a dk1 value).
  std::optional<std::string> open(std::string_view purpose, std::string_view stored) const;

private:
  std::array<unsigned char, 32> key_{};
};

} // namespace crm::domain
