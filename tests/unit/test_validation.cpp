// Unit tests for domain/validation: the e-mail and phone rules behind 422 `value_error.email` and
// `value_error.phone`, and the text helpers length limits and uniqueness use (contract §4).
#include "domain/validation.hpp"

#include <gtest/gtest.h>

using namespace crm::domain;

TEST(validation, accepts_ordinary_emails) {
  for (const char* email :
       {"a@b.co", "user@example.com", "first.last@example.co.uk", "user+tag@example.com",
        "o'brien@example.ie", "USER@EXAMPLE.COM", "a@x-y.com", "a@1x.com", "a@x.y.z.example.org",
        "under_score@sub.example.org", "x@xn--bcher-kva.de", "!#$%&'*+-/=?^_`{|}~@example.com",
        "1234567890@example.com"}) {
    EXPECT_TRUE(is_valid_email(email)) << email;
  }
}

TEST(validation, rejects_email_with_single_label_domain) {
  EXPECT_FALSE(is_valid_email("a@b"));
  EXPECT_FALSE(is_valid_email("a@localhost"));
}

TEST(validation, rejects_email_with_bad_dots_in_local_part) {
  EXPECT_FALSE(is_valid_email("a..b@x.com"));
  EXPECT_FALSE(is_valid_email(".a@x.com"));
  EXPECT_FALSE(is_valid_email("a.@x.com"));
  EXPECT_FALSE(is_valid_email(".@x.com"));
}

TEST(validation, rejects_email_with_bad_domain_labels) {
  for (const char* email :
       {"a@-x.com", "a@x-.com", "a@x.-y.com", "a@x..com", "a@.x.com", "a@x.com.", "a@x_y.com",
        "a@x y.com", "a@[127.0.0.1]", "a@127.0.0.1", "a@x.com-"}) {
    EXPECT_FALSE(is_valid_email(email)) << email;
  }
}

TEST(validation, rejects_email_with_short_or_non_letter_tld) {
  EXPECT_FALSE(is_valid_email("a@x.c"));
  EXPECT_FALSE(is_valid_email("a@x.c0m"));
  EXPECT_FALSE(is_valid_email("a@x.123"));
  EXPECT_FALSE(is_valid_email("a@x.co-m"));
  EXPECT_FALSE(is_valid_email("a@x."));
}

TEST(validation, rejects_email_without_exactly_one_at_sign) {
  for (const char* email :
       {"", "@", "plainaddress", "@x.com", "a@", "a@@x.com", "a@b@x.com", "a.x.com"}) {
    EXPECT_FALSE(is_valid_email(email)) << email;
  }
}

TEST(validation, rejects_email_with_characters_outside_the_allowed_set) {
  for (const char* email :
       {"a b@x.com", " a@x.com", "a@x.com ", "\"a\"@x.com", "a(b)@x.com", "a,b@x.com", "a;b@x.com",
        "a\\b@x.com", "\xc3\xa9@x.com", "a@\xc3\xa9.com", "a@x.com\n"}) {
    EXPECT_FALSE(is_valid_email(email)) << email;
  }
  EXPECT_FALSE(is_valid_email(std::string_view("a\0b@x.com", 9)));
}

TEST(validation, accepts_email_of_254_characters_and_rejects_255) {
  // 64 + 1 + (63 + 1 + 63 + 1 + 57 + 4) = 254
  const std::string local(64, 'a');
  const std::string domain =
      std::string(63, 'b') + "." + std::string(63, 'c') + "." + std::string(57, 'd') + ".com";
  const std::string longest = local + "@" + domain;
  ASSERT_EQ(longest.size(), 254U);
  EXPECT_TRUE(is_valid_email(longest));
  const std::string too_long = "a" + longest;
  ASSERT_EQ(too_long.size(), 255U);
  EXPECT_FALSE(is_valid_email(too_long));
  EXPECT_FALSE(is_valid_email(std::string(100'000, 'a') + "@x.com"));
}

TEST(validation, accepts_e164_numbers_of_two_to_fifteen_digits) {
  for (const char* phone : {"+12", "+14155552671", "+442071838750", "+123456789012345"}) {
    EXPECT_TRUE(is_e164(phone)) << phone;
  }
}

TEST(validation, rejects_e164_too_short_or_too_long) {
  EXPECT_FALSE(is_e164("+"));
  EXPECT_FALSE(is_e164("+1"));
  EXPECT_FALSE(is_e164("+1234567890123456")); // 16 digits
  EXPECT_FALSE(is_e164(""));
}

TEST(validation, rejects_e164_with_leading_zero_or_no_plus) {
  EXPECT_FALSE(is_e164("+0123"));
  EXPECT_FALSE(is_e164("+01"));
  EXPECT_FALSE(is_e164("14155552671"));
  EXPECT_FALSE(is_e164("0014155552671"));
  EXPECT_FALSE(is_e164("++14155552671"));
}

TEST(validation, rejects_e164_with_spaces_punctuation_or_letters) {
  for (const char* phone :
       {"+1 415 555 2671", " +14155552671", "+14155552671 ", "+1-415-555", "+1(415)5552671",
        "+1415555267a", "+1415555267O", "+1.4155552671", "+1\n", "+\xd9\xa1\xd9\xa2"}) {
    EXPECT_FALSE(is_e164(phone)) << phone;
  }
  EXPECT_FALSE(is_e164(std::string_view("+12\0", 4)));
}

TEST(validation, ascii_lower_folds_only_ascii_letters) {
  EXPECT_EQ(ascii_lower("User@Example.COM"), "user@example.com");
  EXPECT_EQ(ascii_lower(""), "");
  EXPECT_EQ(ascii_lower("@[`{0-9]"), "@[`{0-9]"); // neighbours of A-Z and a-z stay
  EXPECT_EQ(ascii_lower("\xc3\x89"), "\xc3\x89"); // UTF-8 bytes are untouched
}

TEST(validation, trim_removes_ascii_white_space_at_both_ends) {
  EXPECT_EQ(trim("  Ada \t\r\n"), "Ada");
  EXPECT_EQ(trim("\v\fAda Lovelace\f"), "Ada Lovelace");
  EXPECT_EQ(trim("Ada"), "Ada");
  EXPECT_EQ(trim(" \t\n "), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("\xc2\xa0x\xc2\xa0"), "\xc2\xa0x\xc2\xa0"); // no-break space is not ASCII
}

TEST(validation, utf8_length_counts_code_points) {
  EXPECT_EQ(utf8_length(""), 0U);
  EXPECT_EQ(utf8_length("Ada"), 3U);
  EXPECT_EQ(utf8_length("Zo\xc3\xab"), 3U);               // Zoë
  EXPECT_EQ(utf8_length("\xe6\x97\xa5\xe6\x9c\xac"), 2U); // 日本
  EXPECT_EQ(utf8_length("\xf0\x9f\x98\x80"), 1U);         // U+1F600
  EXPECT_EQ(utf8_length("\xf4\x8f\xbf\xbf"), 1U);         // U+10FFFF
  EXPECT_EQ(utf8_length(std::string(100, 'x') + "\xc3\xa9"), 101U);
}

TEST(validation, utf8_length_counts_bytes_of_invalid_sequences) {
  EXPECT_EQ(utf8_length("\xff"), 1U);
  EXPECT_EQ(utf8_length("\xc3"), 1U);                 // truncated
  EXPECT_EQ(utf8_length("a\xe6\x97"), 3U);            // truncated 3-byte sequence
  EXPECT_EQ(utf8_length("\xc0\xaf"), 2U);             // overlong '/'
  EXPECT_EQ(utf8_length("\xe0\x80\xaf"), 3U);         // overlong
  EXPECT_EQ(utf8_length("\xed\xa0\x80"), 3U);         // UTF-16 surrogate
  EXPECT_EQ(utf8_length("\xf4\x90\x80\x80"), 4U);     // past U+10FFFF
  EXPECT_EQ(utf8_length("\x80\x80"), 2U);             // lone continuation bytes
  EXPECT_EQ(utf8_length("\xc3\xa9\xff\xc3\xa9"), 3U); // valid, invalid, valid
}

TEST(validation, first_non_text_finds_nul_and_invalid_utf8) {
  using namespace std::string_view_literals;
  EXPECT_TRUE(is_text(""));
  EXPECT_TRUE(is_text("Jo\xc3\xa3o \xe6\x97\xa5 \xf0\x9f\x98\x80"));
  EXPECT_EQ(first_non_text("ab\0c"sv), 2U);
  EXPECT_EQ(first_non_text("k\xff"
                           "1"),
            1U);
  EXPECT_EQ(first_non_text("\xc3"), 0U);               // truncated
  EXPECT_EQ(first_non_text("a\xc0\xaf"), 1U);          // overlong '/'
  EXPECT_EQ(first_non_text("\xed\xa0\x80"), 0U);       // surrogate
  EXPECT_EQ(first_non_text("ok\xf4\x90\x80\x80"), 2U); // past U+10FFFF
}
