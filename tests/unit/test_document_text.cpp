// Knowledge documents sent as HTML or PDF (domain/document_text.hpp): the text split_passages
// reads, headings kept as headings.
#include "domain/assistant.hpp"
#include "domain/document_text.hpp"

#include <gtest/gtest.h>

namespace crm::domain {
namespace {

TEST(document_text, html_keeps_headings_paragraphs_and_list_items_and_drops_scripts) {
  const auto text = text_of_html(
      "<html><head><title>Clinic</title><style>p{color:red}</style></head><body>"
      "<h1>Parking</h1><p>The lot has <b>40</b>\n   spaces.</p><script>alert('x')</script>"
      "<ul><li>First hour free</li><li>R$&nbsp;8 an hour after</li></ul>"
      "<h2>Hor&aacute;rio</h2><p>Abrimos &agrave;s 7h.<br>Fechamos &agrave;s 19h.</p>"
      "<table><tr><td>Sat</td><td>8-12</td></tr></table></body></html>");
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(*text, "# Parking\n\nThe lot has 40 spaces.\n\n- First hour free\n- R$ 8 an hour "
                   "after\n\n# Horário\n\nAbrimos às 7h.\nFechamos às 19h.\n\nSat 8-12");
  const auto ps = ai::split_passages(*text);
  ASSERT_GE(ps.size(), 4U);
  EXPECT_EQ(ps[0].title, "Parking");
  EXPECT_EQ(ps[0].text, "The lot has 40 spaces.");
  EXPECT_EQ(ps.back().title, "Horário");
}

TEST(document_text, html_fragments_and_broken_markup_still_give_their_text) {
  EXPECT_EQ(text_of_html("Just <i>a</i> line"), "Just a line");
  EXPECT_EQ(text_of_html("<p>unclosed <b>bold<p>next"), "unclosed bold\n\nnext");
  EXPECT_EQ(text_of_html("<script>only code</script>"), "");
}

TEST(document_text, a_pdf_page_joins_wrapped_lines_and_finds_its_headings) {
  EXPECT_EQ(text_of_pdf_page("Parking\nThe lot has 40 spaces and is open from\n7:00 to 19:00 "
                             "every day.\nPrices\nThe first hour is free.",
                             1),
            "# Parking\n\nThe lot has 40 spaces and is open from 7:00 to 19:00 every day.\n\n"
            "# Prices\n\nThe first hour is free.");
  // A page that opens without a heading is titled by its number.
  EXPECT_EQ(text_of_pdf_page("We accept cash, debit cards and Pix.\nAnd credit cards.", 2),
            "# Page 2\n\nWe accept cash, debit cards and Pix. And credit cards.");
  EXPECT_EQ(text_of_pdf_page("  \n\n ", 3), "");
}

TEST(document_text, what_is_not_a_readable_pdf_says_why) {
  EXPECT_EQ(text_of_pdf("hello").error, "not a PDF (it does not start with %PDF-)");
  const auto broken = text_of_pdf("%PDF-1.4\nthis is not the rest of a PDF");
  EXPECT_FALSE(broken.text.has_value());
  EXPECT_FALSE(broken.error.empty());
  EXPECT_FALSE(text_of_pdf(std::string(max_pdf_bytes + 1, 'x')).text.has_value());
}

} // namespace
} // namespace crm::domain
