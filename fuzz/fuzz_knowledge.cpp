// The assistant's knowledge (docs/ai.md "Retrieval"): any document a clinic uploads (up to
// 1 MiB of text, CSV or HTML, a PDF of 8 MiB) and any patient message is cut, stemmed through
// Snowball and Hunspell, indexed and searched without a crash; every passage stays within 600
// bytes, a search returns only passages of the index, best first, with a coverage between 0 and 1.
#include "domain/assistant.hpp"
#include "domain/document_text.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ai = crm::domain::ai;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // The same bytes as HTML and, when they say so, as a PDF: text or a reason, never a crash.
  if (const auto html = crm::domain::text_of_html(in)) (void)ai::split_passages(*html);
  if (in.starts_with("%PDF-")) {
    const auto pdf = crm::domain::text_of_pdf(in);
    if (!pdf.text && pdf.error.empty()) __builtin_trap();
  }
  const std::vector<ai::passage> ps = ai::split_passages(in);
  ai::knowledge_index index;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (ps[i].text.size() > 600) __builtin_trap();
    index.add(static_cast<std::int64_t>(i + 1), ps[i].text, ai::passage_context(ps, i));
  }
  std::vector<crm::domain::issue> issues;
  if (const auto pairs = ai::parse_qa_csv(in, issues))
    for (std::size_t i = 0; i < pairs->size() && i < 50; ++i)
      index.add(static_cast<std::int64_t>(1000000 + i), (*pairs)[i].text, (*pairs)[i].title);
  // The input as a question, and its first sentence against the whole.
  for (const std::string_view q : {in, ps.empty() ? in : std::string_view(ps.front().text)}) {
    const auto hits = index.search(q.substr(0, 4096), 3);
    for (std::size_t i = 0; i < hits.size(); ++i) {
      if (!index.contains(hits[i].passage_id)) __builtin_trap();
      if (hits[i].coverage < 0 || hits[i].coverage > 1.000001) __builtin_trap();
      if (i > 0 && hits[i].score > hits[i - 1].score) __builtin_trap();
    }
  }
  return 0;
}
