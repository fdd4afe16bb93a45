// The text of knowledge documents that arrive as HTML or PDF (docs/ai.md "Knowledge"), written
// as the plain text split_passages() reads: "# " headings, paragraphs between blank lines, a
// list item a line. HTML through libxml2's HTML parser, PDF through Poppler (libpoppler-cpp):
// maintained parsers, not hand-written ones. Pure: no I/O, but a PDF takes time (about 0.4 ms
// a page of plain text, benchmarks/knowledge_files), so callers run it off the network threads.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crm::domain {

constexpr std::size_t max_pdf_bytes = std::size_t{8} * 1024 * 1024;

// The readable text of an HTML page or fragment: h1–h6 become "# " headings, p, div, li, td,
// br and the other blocks end a paragraph or a line, script, style, template, svg and the head
// are left out, whitespace is collapsed. Nothing for input libxml2 cannot read at all.
std::optional<std::string> text_of_html(std::string_view html);

// One PDF page's text as Poppler gives it (lines in reading order) made into paragraphs: wrapped
// lines joined, a short line without a sentence end between paragraphs made a "# " heading,
// and "# Page N" first when the page opens without a heading of its own.
std::string text_of_pdf_page(std::string_view page_text, int page_number);

struct pdf_text {
  std::optional<std::string> text; // the pages' text, in order
  std::string error;               // why there is none: not a PDF, encrypted, no text
};
// The text of every page of a PDF (at most max_pdf_bytes).
pdf_text text_of_pdf(std::string_view bytes);

} // namespace crm::domain
