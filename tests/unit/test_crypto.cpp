// Unit tests for domain/crypto: the primitives token signing and password storage rest on.
#include "domain/crypto.hpp"

#include <gtest/gtest.h>

#include <set>

using namespace crm::domain;

namespace {

std::string hmac_hex(std::string_view key, std::string_view data) {
  return hex_encode(as_bytes(hmac_sha256(key, data)));
}

std::string all_bytes() {
  std::string s;
  for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
  return s;
}

// Hashing is slow on purpose (Argon2id, 64 MiB): share one hash between the tests.
const std::string& sample_hash() {
  static const std::string hash = hash_password("correct horse battery staple");
  return hash;
}

} // namespace

// RFC 4231, section 4: HMAC-SHA256 test cases 1-4, 6 and 7 (5 is a truncated output).
TEST(crypto, hmac_sha256_matches_rfc4231_case_1) {
  EXPECT_EQ(hmac_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(crypto, hmac_sha256_matches_rfc4231_case_2_short_key) {
  EXPECT_EQ(hmac_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(crypto, hmac_sha256_matches_rfc4231_case_3) {
  EXPECT_EQ(hmac_hex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
}

TEST(crypto, hmac_sha256_matches_rfc4231_case_4) {
  std::string key;
  for (char c = 1; c <= 25; ++c) key.push_back(c);
  EXPECT_EQ(hmac_hex(key, std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
}

TEST(crypto, hmac_sha256_matches_rfc4231_case_5_truncated) {
  EXPECT_EQ(hmac_hex(std::string(20, '\x0c'), "Test With Truncation").substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
}

TEST(crypto, hmac_sha256_matches_rfc4231_case_6_key_longer_than_block) {
  EXPECT_EQ(
      hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(crypto, hmac_sha256_matches_rfc4231_case_7_key_and_data_longer_than_block) {
  EXPECT_EQ(hmac_hex(std::string(131, '\xaa'),
                     "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the HMAC "
                     "algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(crypto, hmac_sha256_accepts_empty_key_and_data) {
  // Known value: HMAC-SHA256 with an empty key over empty data.
  EXPECT_EQ(hmac_hex("", ""), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
  // An empty key is not "no key": the result must not depend on a previous call's key.
  static_cast<void>(hmac_sha256("some other key", "x"));
  EXPECT_EQ(hmac_hex("", ""), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST(crypto, hex_encodes_lower_case) {
  EXPECT_EQ(hex_encode(""), "");
  EXPECT_EQ(hex_encode(std::string_view("\x00\x01\xab\xff", 4)), "0001abff");
}

// RFC 4648, section 10.
TEST(crypto, base64_matches_rfc4648_vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(crypto, base64url_matches_rfc4648_vectors_without_padding) {
  EXPECT_EQ(base64url_encode(""), "");
  EXPECT_EQ(base64url_encode("f"), "Zg");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_EQ(base64url_encode("foo"), "Zm9v");
  EXPECT_EQ(base64url_encode("foob"), "Zm9vYg");
  EXPECT_EQ(base64url_encode("fooba"), "Zm9vYmE");
  EXPECT_EQ(base64url_encode("foobar"), "Zm9vYmFy");
}

TEST(crypto, base64url_uses_url_safe_alphabet) {
  const std::string_view bytes("\xfb\xff", 2);
  EXPECT_EQ(base64_encode(bytes), "+/8=");
  EXPECT_EQ(base64url_encode(bytes), "-_8");
  EXPECT_EQ(base64url_decode("-_8"), std::string(bytes));
}

TEST(crypto, base64url_round_trips_every_length_and_byte) {
  const std::string bytes = all_bytes();
  for (std::size_t n = 0; n <= bytes.size(); ++n) {
    const std::string_view in = std::string_view(bytes).substr(256 - n);
    const auto out = base64url_decode(base64url_encode(in));
    ASSERT_TRUE(out) << n;
    ASSERT_EQ(*out, in) << n;
  }
}

TEST(crypto, base64url_decode_rejects_padding) {
  EXPECT_FALSE(base64url_decode("Zg=="));
  EXPECT_FALSE(base64url_decode("Zg="));
  EXPECT_FALSE(base64url_decode("Zm8="));
  EXPECT_FALSE(base64url_decode("===="));
}

TEST(crypto, base64url_decode_rejects_characters_outside_the_alphabet) {
  for (const char* text :
       {"Zm9v!", "Zm9+", "Zm9/", " Zm9v", "Zm9v\n", "Zm 9v", "Zm9v.", "Zm\xc3\xa9"}) {
    EXPECT_FALSE(base64url_decode(text)) << text;
  }
  EXPECT_FALSE(base64url_decode(std::string_view("Zm9\0", 4)));
}

TEST(crypto, base64url_decode_rejects_impossible_lengths) {
  EXPECT_FALSE(base64url_decode("Z"));
  EXPECT_FALSE(base64url_decode("Zm9vY"));
}

TEST(crypto, base64url_decode_rejects_non_canonical_trailing_bits) {
  // "Zg" is "f"; "Zh".."Zv" differ only in bits that carry no data. Accepting them would let a
  // token's signature be rewritten without invalidating it.
  EXPECT_EQ(base64url_decode("Zg"), "f");
  EXPECT_FALSE(base64url_decode("Zh"));
  EXPECT_FALSE(base64url_decode("Zv"));
  EXPECT_EQ(base64url_decode("Zm8"), "fo");
  EXPECT_FALSE(base64url_decode("Zm9"));
}

TEST(crypto, constant_time_equal_compares_contents) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "Secret"));
  EXPECT_TRUE(constant_time_equal(std::string_view("a\0b", 3), std::string_view("a\0b", 3)));
  EXPECT_FALSE(constant_time_equal(std::string_view("a\0b", 3), std::string_view("a\0c", 3)));
}

TEST(crypto, secrets_equal_matches_only_the_same_secret) {
  EXPECT_TRUE(secrets_equal("a-webhook-secret-1", "a-webhook-secret-1"));
  EXPECT_FALSE(secrets_equal("a-webhook-secret-2", "a-webhook-secret-1"));
  EXPECT_FALSE(secrets_equal("a-webhook-secret", "a-webhook-secret-1"));
  EXPECT_FALSE(secrets_equal("", "a-webhook-secret-1"));
  EXPECT_FALSE(secrets_equal(std::string_view("x\0y", 3), std::string_view("x\0z", 3)));
}

TEST(crypto, constant_time_equal_rejects_different_lengths) {
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_FALSE(constant_time_equal("a", ""));
  EXPECT_FALSE(constant_time_equal("secret", "secret2"));
  EXPECT_FALSE(constant_time_equal("secret2", "secret"));
  // A prefix is not equal even though every compared byte matches.
  EXPECT_FALSE(constant_time_equal(std::string_view("abc\0", 4), "abc"));
}

TEST(crypto, random_token_has_requested_entropy_and_is_url_safe) {
  const std::string token = random_token();
  EXPECT_EQ(token.size(), 22U); // 16 bytes, unpadded
  const auto bytes = base64url_decode(token);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->size(), 16U);
  EXPECT_EQ(base64url_decode(random_token(32))->size(), 32U);
  EXPECT_EQ(random_token(0), "");
}

TEST(crypto, random_tokens_do_not_repeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(seen.insert(random_token()).second);
}

TEST(crypto, hash_password_uses_argon2id_and_verifies_the_right_password) {
  const std::string& hash = sample_hash();
  EXPECT_EQ(hash.rfind("$argon2id$", 0), 0U) << hash;
  EXPECT_EQ(hash.find('\0'), std::string::npos);
  EXPECT_TRUE(verify_password(hash, "correct horse battery staple"));
}

TEST(crypto, verify_password_rejects_wrong_password) {
  const std::string& hash = sample_hash();
  EXPECT_FALSE(verify_password(hash, "correct horse battery stapl"));
  EXPECT_FALSE(verify_password(hash, "Correct horse battery staple"));
  EXPECT_FALSE(verify_password(hash, ""));
}

TEST(crypto, verify_password_rejects_garbage_hashes) {
  EXPECT_FALSE(verify_password("", "password"));
  EXPECT_FALSE(verify_password("not a hash", "password"));
  EXPECT_FALSE(verify_password(std::string(500, 'a'), "password"));
  EXPECT_FALSE(verify_password(sample_hash().substr(0, 40), "correct horse battery staple"));
  std::string with_nul = sample_hash();
  with_nul.push_back('\0');
  EXPECT_FALSE(verify_password(with_nul, "correct horse battery staple"));
}

TEST(crypto, hash_password_salts_each_hash) {
  const std::string second = hash_password("correct horse battery staple");
  EXPECT_NE(second, sample_hash());
  EXPECT_TRUE(verify_password(second, "correct horse battery staple"));
}

TEST(crypto, init_crypto_is_idempotent) {
  init_crypto();
  init_crypto();
  EXPECT_FALSE(random_token().empty());
}

TEST(crypto, hex_decodes_what_hex_encode_wrote_and_nothing_else) {
  const std::string bytes("\x00\x7f\x80\xff%PDF", 8);
  EXPECT_EQ(hex_decode(hex_encode(bytes)), bytes);
  EXPECT_EQ(hex_decode("DEADbeef"), std::string("\xde\xad\xbe\xef"));
  EXPECT_EQ(hex_decode("abc"), std::nullopt);
  EXPECT_EQ(hex_decode("zz"), std::nullopt);
  EXPECT_EQ(hex_decode(""), std::string());
}
