// How long a knowledge document sent as a PDF takes to become passages (docs/ai.md "Knowledge"):
// Poppler's text extraction (domain::text_of_pdf) and the cut into passages, on the worker
// pool. Usage: crm_knowledge_files FILE.pdf [ROUNDS] (benchmarks/knowledge_files makes the PDF).
#include "domain/assistant.hpp"
#include "domain/document_text.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: crm_knowledge_files FILE.pdf [ROUNDS]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string pdf = ss.str();
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  std::vector<double> extract, split;
  std::size_t text_bytes = 0, passages = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto text = crm::domain::text_of_pdf(pdf);
    const auto t1 = std::chrono::steady_clock::now();
    if (!text.text) {
      std::fprintf(stderr, "not read: %s\n", text.error.c_str());
      return 1;
    }
    const auto ps = crm::domain::ai::split_passages(*text.text);
    const auto t2 = std::chrono::steady_clock::now();
    text_bytes = text.text->size();
    passages = ps.size();
    extract.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    split.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::sort(extract.begin(), extract.end());
  std::sort(split.begin(), split.end());
  std::printf("%zu bytes of PDF -> %zu bytes of text, %zu passages; median of %d rounds: "
              "extract %.2f ms, cut %.2f ms\n",
              pdf.size(), text_bytes, passages, rounds, extract[extract.size() / 2],
              split[split.size() / 2]);
  return 0;
}
