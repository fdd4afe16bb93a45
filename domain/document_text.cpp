// HTML and PDF to the text of knowledge documents (domain/document_text.hpp).
#include "domain/document_text.hpp"

#include "domain/validation.hpp"

#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <poppler/cpp/poppler-document.h>
#include <poppler/cpp/poppler-global.h>
#include <poppler/cpp/poppler-page.h>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <mutex>
#include <span>

namespace crm::domain {

namespace document_text_impl {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// ---- HTML -----------------------------------------------------------------------------------

constexpr std::array<std::string_view, 9> skipped = {
    "script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas"};
constexpr std::array<std::string_view, 25> blocks = {
    "p",      "div",     "section",    "article", "li",       "ul",         "ol",     "table", "tr",
    "header", "footer",  "main",       "nav",     "aside",    "blockquote", "pre",    "dd",    "dt",
    "dl",     "address", "figcaption", "form",    "fieldset", "body",       "caption"};

bool one_of(std::string_view name, std::span<const std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The document's text as it is built: words joined by single spaces, breaks between blocks.
class html_writer {
public:
  void text(std::string_view s) {
    for (std::size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c == '\xC2' && i + 1 < s.size() && s[i + 1] == '\xA0') { // a no-break space
        ++i;
        c = ' ';
      }
      if (is_space(c)) {
        space_ = !line_.empty();
      } else {
        if (space_) line_ += ' ';
        space_ = false;
        line_ += c;
      }
    }
  }
  void end_line() {
    if (!line_.empty()) lines_.push_back(std::move(line_));
    line_.clear();
    space_ = false;
  }
  void end_paragraph() {
    end_line();
    if (!lines_.empty()) {
      if (!out_.empty()) out_ += "\n\n";
      for (std::size_t i = 0; i < lines_.size(); ++i) out_ += (i ? "\n" : "") + lines_[i];
      lines_.clear();
    }
  }
  void heading(std::string_view s) {
    end_paragraph();
    const std::string_view t = trim(s);
    if (t.empty()) return;
    if (!out_.empty()) out_ += "\n\n";
    out_ += "# ";
    out_ += t;
  }
  std::string finish() {
    end_paragraph();
    return std::move(out_);
  }

private:
  std::string out_;
  std::vector<std::string> lines_;
  std::string line_;
  bool space_ = false;
};

// The text under a node, whitespace collapsed (a heading's words).
void inline_text(xmlNode* n, std::string& out) {
  for (xmlNode* c = n; c != nullptr; c = c->next) {
    if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
      if (c->content) out += reinterpret_cast<const char*>(c->content);
      out += ' ';
    } else if (c->type == XML_ELEMENT_NODE) {
      const std::string_view name = c->name ? reinterpret_cast<const char*>(c->name) : "";
      if (!one_of(name, skipped)) inline_text(c->children, out);
    }
  }
}

void walk(xmlNode* n, html_writer& w, int depth) {
  for (xmlNode* c = n; c != nullptr; c = c->next) {
    if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
      if (c->content) w.text(reinterpret_cast<const char*>(c->content));
      continue;
    }
    if (c->type != XML_ELEMENT_NODE) continue;
    const std::string_view name = c->name ? reinterpret_cast<const char*>(c->name) : "";
    if (one_of(name, skipped)) continue;
    if (name.size() == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6') {
      std::string heading;
      inline_text(c->children, heading);
      html_writer hw; // whitespace collapsed as in the text

      hw.text(heading);
      w.heading(hw.finish());
      continue;
    }
    if (name == "br") {
      w.end_line();
      continue;
    }
    const bool block = one_of(name, blocks);
    const bool line = name == "li" || name == "tr" || name == "dt" || name == "dd";
    if (block && !line) w.end_paragraph();
    if (line) w.end_line();
    if (name == "li") w.text("- ");
    if (depth < 256) walk(c->children, w, depth + 1); // deeper nesting is not a document
    if (name == "td" || name == "th") w.text(" ");
    if (line) w.end_line();
    if (block && !line) w.end_paragraph();
  }
}

// ---- PDF ------------------------------------------------------------------------------------

bool ends_sentence(std::string_view line) {
  return !line.empty() && std::string_view(".!?:;").find(line.back()) != std::string_view::npos;
}

bool starts_list_item(std::string_view line) {
  return line.starts_with("- ") || line.starts_with("* ") || line.starts_with("\u2022") ||
         line.starts_with("\u25CF") || line.starts_with("\u25AA");
}

void quiet(const std::string&, void*) {} // Poppler's complaints about a broken PDF

} // namespace document_text_impl

std::optional<std::string> text_of_html(std::string_view html) {
  static std::once_flag init;
  std::call_once(init, [] { xmlInitParser(); });
  if (html.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) return std::nullopt;
  const int options = HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
                      HTML_PARSE_NONET | HTML_PARSE_COMPACT;
  std::unique_ptr<xmlDoc, void (*)(xmlDocPtr)> doc(
      htmlReadMemory(html.data(), static_cast<int>(html.size()), nullptr, "UTF-8", options),
      xmlFreeDoc);
  if (!doc) return std::nullopt;
  document_text_impl::html_writer w;
  document_text_impl::walk(xmlDocGetRootElement(doc.get()), w, 0);
  return w.finish();
}

std::string text_of_pdf_page(std::string_view page_text, int page_number) {
  std::vector<std::string_view> lines;
  for (std::size_t i = 0; i <= page_text.size();) {
    const std::size_t nl = std::min(page_text.find('\n', i), page_text.size());
    lines.push_back(trim(page_text.substr(i, nl - i)));
    i = nl + 1;
  }
  std::size_t longest = 0;
  for (const std::string_view l : lines) longest = std::max(longest, l.size());

  std::string out;
  std::string paragraph;
  const auto flush = [&] {
    if (paragraph.empty()) return;
    if (!out.empty()) out += "\n\n";
    out += paragraph;
    paragraph.clear();
  };
  bool headed = false;
  bool after_break = true; // the previous line ended a paragraph, or there is none
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view l = lines[i];
    if (l.empty()) {
      flush();
      after_break = true;
      continue;
    }
    const bool short_line = l.size() <= 80 && l.size() * 10 < longest * 7;
    if (after_break && short_line && !document_text_impl::ends_sentence(l) &&
        !document_text_impl::starts_list_item(l) && i + 1 < lines.size()) {
      flush();
      if (out.empty()) headed = true; // the page opens with its own heading
      if (!out.empty()) out += "\n\n";
      out += "# ";
      out += l;
      after_break = true;
      continue;
    }
    if (document_text_impl::starts_list_item(l)) {
      if (!paragraph.empty()) paragraph += '\n';
    } else if (!paragraph.empty()) {
      paragraph += ' ';
    }
    paragraph += l;
    // A short line that ends a sentence ends its paragraph (the last line of one).
    after_break = document_text_impl::ends_sentence(l) && short_line;
    if (after_break) flush();
  }
  flush();
  if (!headed && !out.empty()) out = "# Page " + std::to_string(page_number) + "\n\n" + out;
  return out;
}

pdf_text text_of_pdf(std::string_view bytes) {
  static std::once_flag init;
  std::call_once(init,
                 [] { poppler::set_debug_error_function(document_text_impl::quiet, nullptr); });
  pdf_text out;
  if (bytes.size() > max_pdf_bytes) {
    out.error = "the PDF is larger than 8 MiB";
    return out;
  }
  if (!bytes.starts_with("%PDF-")) {
    out.error = "not a PDF (it does not start with %PDF-)";
    return out;
  }
  std::unique_ptr<poppler::document> doc(
      poppler::document::load_from_raw_data(bytes.data(), static_cast<int>(bytes.size())));
  if (!doc) {
    out.error = "the PDF cannot be read";
    return out;
  }
  if (doc->is_locked()) {
    out.error = "the PDF is encrypted";
    return out;
  }
  std::string text;
  for (int i = 0; i < doc->pages(); ++i) {
    std::unique_ptr<poppler::page> p(doc->create_page(i));
    if (!p) continue;
    const poppler::byte_array utf8 = p->text().to_utf8();
    const std::string page = text_of_pdf_page(std::string_view(utf8.data(), utf8.size()), i + 1);
    if (page.empty()) continue;
    if (!text.empty()) text += "\n\n";
    text += page;
  }
  if (trim(text).empty()) {
    out.error = "the PDF holds no text (a scan needs OCR first)";
    return out;
  }
  out.text = std::move(text);
  return out;
}

} // namespace crm::domain
