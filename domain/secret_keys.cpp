// The key ring of secrets at rest: parsing, sealing with secretbox, keyed hashes.
#include "domain/secret_keys.hpp"

#include "domain/crypto.hpp"

#include <algorithm>
#include <cstring>

#include <sodium.h>

namespace crm::domain {
namespace {

constexpr std::string_view sealed_tag = "sb1:";
constexpr std::string_view hashed_tag = "kh1:";
constexpr std::size_t max_id_length = 32;

bool is_id(std::string_view s) {
  return !s.empty() && s.size() <= max_id_length && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// What a value is bound to: purpose, tenant, then the secret itself.
std::string bound(std::string_view purpose, std::int64_t tenant, std::string_view plain) {
  std::string out;
  out.reserve(purpose.size() + 22 + plain.size());
  out.append(purpose);
  out.push_back('\0');
  out.append(std::to_string(tenant));
  out.push_back('\0');
  out.append(plain);
  return out;
}

struct parts {
  std::string_view id, body;
};
std::optional<parts> split(std::string_view stored, std::string_view tag) {
  if (stored.substr(0, tag.size()) != tag) return std::nullopt;
  auto rest = stored.substr(tag.size());
  auto colon = rest.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  return parts{rest.substr(0, colon), rest.substr(colon + 1)};
}

} // namespace

secret_keys::key secret_keys::derive(std::string id, std::string_view master) {
  // One key per use, derived from the configured one, so a secretbox key never doubles as an
  // HMAC key.
  key k;
  k.id = std::move(id);
  auto box = hmac_sha256(master, "carecrm secrets at rest: secretbox v1");
  auto mac = hmac_sha256(master, "carecrm secrets at rest: keyed hash v1");
  std::copy(box.begin(), box.end(), k.box.begin());
  std::copy(mac.begin(), mac.end(), k.mac.begin());
  sodium_memzero(box.data(), box.size());
  sodium_memzero(mac.data(), mac.size());
  return k;
}

secret_keys secret_keys::parse(std::string_view spec) {
  init_crypto();
  secret_keys out;
  std::size_t n = 0;
  while (!spec.empty()) {
    auto comma = spec.find(',');
    auto item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    ++n;
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    auto colon = item.find(':');
    auto where = "secret key " + std::to_string(n);
    if (colon == std::string_view::npos)
      throw secret_error(where + " is not id:base64-of-32-bytes");
    auto id = item.substr(0, colon);
    if (!is_id(id))
      throw secret_error(where + ": the id must be 1-32 characters of A-Z a-z 0-9 _ - .");
    if (out.has(id)) throw secret_error(where + ": the id " + std::string(id) + " is listed twice");
    auto material = base64_decode(item.substr(colon + 1));
    if (!material) material = base64url_decode(item.substr(colon + 1));
    if (!material || material->size() != 32)
      throw secret_error("secret key " + std::string(id) + " is not 32 bytes in base64");
    out.keys_.push_back(derive(std::string(id), *material));
    sodium_memzero(material->data(), material->size());
  }
  if (out.keys_.empty()) throw secret_error("no secret key is configured");
  return out;
}

secret_keys secret_keys::generate(std::string id) {
  init_crypto();
  std::string material(32, '\0');
  randombytes_buf(material.data(), material.size());
  secret_keys out;
  out.keys_.push_back(derive(std::move(id), material));
  sodium_memzero(material.data(), material.size());
  return out;
}

std::vector<std::string> secret_keys::ids() const {
  std::vector<std::string> out;
  for (auto& k : keys_) out.push_back(k.id);
  return out;
}

const secret_keys::key* secret_keys::find(std::string_view id) const {
  for (auto& k : keys_)
    if (k.id == id) return &k;
  return nullptr;
}

std::string secret_keys::seal(std::string_view purpose, std::int64_t tenant,
                              std::string_view plain) const {
  auto& k = keys_.front();
  auto msg = bound(purpose, tenant, plain);
  std::string box(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + msg.size(), '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(box.data());
  randombytes_buf(nonce, crypto_secretbox_NONCEBYTES);
  crypto_secretbox_easy(nonce + crypto_secretbox_NONCEBYTES,
                        reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), nonce,
                        k.box.data());
  sodium_memzero(msg.data(), msg.size());
  std::string out(sealed_tag);
  out += k.id;
  out += ':';
  out += base64url_encode(box);
  return out;
}

std::string secret_keys::open(std::string_view purpose, std::int64_t tenant,
                              std::string_view stored) const {
  auto p = split(stored, sealed_tag);
  if (!p) return std::string(stored); // plaintext from before sealing
  auto* k = find(p->id);
  if (!k)
    throw secret_error("a secret is sealed with key " + std::string(p->id) +
                       ", which is not configured");
  auto box = base64url_decode(p->body);
  if (!box || box->size() < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)
    throw secret_error("a sealed secret is malformed");
  auto* nonce = reinterpret_cast<const unsigned char*>(box->data());
  std::size_t cipher = box->size() - crypto_secretbox_NONCEBYTES;
  std::string msg(cipher - crypto_secretbox_MACBYTES, '\0');
  if (crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(msg.data()),
                                 nonce + crypto_secretbox_NONCEBYTES, cipher, nonce,
                                 k->box.data()) != 0)
    throw secret_error("a sealed secret does not open with key " + k->id);
  auto prefix = bound(purpose, tenant, "");
  if (msg.size() < prefix.size() || std::memcmp(msg.data(), prefix.data(), prefix.size()) != 0) {
    sodium_memzero(msg.data(), msg.size());
    throw secret_error("a sealed secret belongs to another record");
  }
  auto plain = msg.substr(prefix.size());
  sodium_memzero(msg.data(), msg.size());
  return plain;
}

std::string secret_keys::hash(std::string_view purpose, std::int64_t tenant,
                              std::string_view plain) const {
  auto& k = keys_.front();
  auto msg = bound(purpose, tenant, plain);
  auto d = hmac_sha256({reinterpret_cast<const char*>(k.mac.data()), k.mac.size()}, msg);
  sodium_memzero(msg.data(), msg.size());
  std::string out(hashed_tag);
  out += k.id;
  out += ':';
  out += base64url_encode(as_bytes(d));
  return out;
}

secret_keys::match secret_keys::verify(std::string_view purpose, std::int64_t tenant,
                                       std::string_view presented, std::string_view stored) const {
  auto p = split(stored, hashed_tag);
  if (!p) // plaintext from before hashing
    return secrets_equal(presented, stored) ? match::yes_rehash : match::no;
  auto* k = find(p->id);
  auto expected = base64url_decode(p->body);
  // Computed even when the key is unknown, so the answer takes as long either way.
  auto& with = k ? *k : keys_.front();
  auto msg = bound(purpose, tenant, presented);
  auto d = hmac_sha256({reinterpret_cast<const char*>(with.mac.data()), with.mac.size()}, msg);
  sodium_memzero(msg.data(), msg.size());
  if (!k || !expected || expected->size() != d.size()) return match::no;
  if (sodium_memcmp(d.data(), expected->data(), d.size()) != 0) return match::no;
  return k == &keys_.front() ? match::yes : match::yes_rehash;
}

std::optional<std::string_view> secret_keys::key_of(std::string_view stored) {
  if (auto p = split(stored, sealed_tag)) return p->id;
  if (auto p = split(stored, hashed_tag)) return p->id;
  return std::nullopt;
}

bool secret_keys::is_sealed(std::string_view stored) {
  return split(stored, sealed_tag).has_value();
}
bool secret_keys::is_hashed(std::string_view stored) {
  return split(stored, hashed_tag).has_value();
}

namespace {
constexpr std::string_view data_tag = "dk1:";
} // namespace

data_key data_key::generate() {
  init_crypto();
  data_key k;
  randombytes_buf(k.key_.data(), k.key_.size());
  return k;
}

std::optional<data_key> data_key::from_bytes(std::string_view raw) {
  if (raw.size() != 32) return std::nullopt;
  data_key k;
  std::memcpy(k.key_.data(), raw.data(), raw.size());
  return k;
}

std::string data_key::bytes() const {
  return {reinterpret_cast<const char*>(key_.data()), key_.size()};
}

std::string data_key::seal(std::string_view purpose, std::string_view plain) const {
  auto msg = bound(purpose, 0, plain);
  std::string box(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + msg.size(), '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(box.data());
  randombytes_buf(nonce, crypto_secretbox_NONCEBYTES);
  crypto_secretbox_easy(nonce + crypto_secretbox_NONCEBYTES,
                        reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), nonce,
                        key_.data());
  sodium_memzero(msg.data(), msg.size());
  return std::string(data_tag) + base64url_encode(box);
}

std::optional<std::string> data_key::open(std::string_view purpose, std::string_view stored) const {
  if (stored.substr(0, data_tag.size()) != data_tag) return std::nullopt;
  auto box = base64url_decode(stored.substr(data_tag.size()));
  if (!box || box->size() < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)
    return std::nullopt;
  auto* nonce = reinterpret_cast<const unsigned char*>(box->data());
  std::string msg(box->size() - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES, '\0');
  if (crypto_secretbox_open_easy(
          reinterpret_cast<unsigned char*>(msg.data()), nonce + crypto_secretbox_NONCEBYTES,
          box->size() - crypto_secretbox_NONCEBYTES, nonce, key_.data()) != 0)
    return std::nullopt;
  auto prefix = bound(purpose, 0, "");
  if (msg.size() < prefix.size() || std::memcmp(msg.data(), prefix.data(), prefix.size()) != 0)
    return std::nullopt;
  return msg.substr(prefix.size());
}

} // namespace crm::domain
