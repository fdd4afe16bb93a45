// Build-time trainer of the builtin assistant's intent classifier (docs/ai.md): reads
// `intent\tlanguage\ttext` rows (a header row, then one example a line; blank lines and lines
// starting with # are skipped), fits a multinomial naive Bayes model over terms() with Laplace
// smoothing and writes it as a C++ source of constant tables (domain/assistant_model.hpp).
// It links the same text library (crm_text) as the runtime, so both see the same terms.
//
//   crm_train_intents <intents_train.tsv> <intent_model.cpp> [--verbose]
#include "domain/assistant.hpp"
#include "domain/assistant_model.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using crm::domain::ai::terms;

struct example {
  std::size_t line = 0;
  std::size_t label = 0;
  std::string language;
  std::string text;
  std::vector<std::string> terms;
};

bool is_label(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s)
    if (!((c >= 'a' && c <= 'z') || c == '_')) return false;
  return true;
}

std::string number(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v); // shortest form that reads back equal
  return std::string(buf, r.ptr);
}

// Terms are folded text: ASCII letters and digits, or UTF-8 of other letters (octal escapes,
// which unlike \x cannot swallow a following character).
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\' && c != '?') {
      out += ch;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    }
  }
  return out + "\"";
}

int fail(const std::string& why) {
  std::cerr << "crm_train_intents: " << why << "\n";
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && std::string_view(argv[3]) != "--verbose"))
    return fail("usage: crm_train_intents <intents_train.tsv> <intent_model.cpp> [--verbose]");
  const std::string in_path = argv[1];
  const std::string out_path = argv[2];
  const bool verbose = argc == 4;

  std::ifstream in(in_path, std::ios::binary);
  if (!in) return fail("cannot read " + in_path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string data = buffer.str();
  if (data.starts_with("\xEF\xBB\xBF")) data.erase(0, 3);

  // ---- read ----
  std::map<std::string, std::size_t> label_ids; // sorted: class order is alphabetical
  std::vector<example> examples;
  std::vector<std::string> labels_of_rows;
  std::size_t line_no = 0;
  bool header_seen = false;
  std::istringstream lines(data);
  for (std::string line; std::getline(lines, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!header_seen) {
      if (line != "intent\tlanguage\ttext")
        return fail(in_path + ":1: the header must be intent<TAB>language<TAB>text");
      header_seen = true;
      continue;
    }
    if (line.empty() || line.front() == '#') continue;
    const std::size_t t1 = line.find('\t');
    const std::size_t t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
    if (t2 == std::string::npos)
      return fail(in_path + ":" + std::to_string(line_no) +
                  ": expected three tab-separated fields");
    example e;
    e.line = line_no;
    const std::string label = line.substr(0, t1);
    e.language = line.substr(t1 + 1, t2 - t1 - 1);
    e.text = line.substr(t2 + 1);
    if (!is_label(label))
      return fail(in_path + ":" + std::to_string(line_no) + ": bad intent '" + label + "'");
    if (!crm::domain::ai::language_from(e.language))
      return fail(in_path + ":" + std::to_string(line_no) + ": language must be en, pt or es");
    e.terms = terms(e.text);
    label_ids.emplace(label, 0);
    labels_of_rows.push_back(label);
    examples.push_back(std::move(e));
  }
  if (examples.empty()) return fail(in_path + ": no training example");
  std::vector<std::string> classes;
  for (auto& [name, id] : label_ids) {
    id = classes.size();
    classes.push_back(name);
  }
  for (std::size_t i = 0; i < examples.size(); ++i)
    examples[i].label = label_ids[labels_of_rows[i]];
  const std::size_t nc = classes.size();

  // ---- fit ----
  std::vector<std::size_t> docs(nc, 0);
  std::vector<std::size_t> term_total(nc, 0);
  std::map<std::string, std::vector<std::size_t>> counts; // sorted: the runtime binary-searches
  for (const example& e : examples) {
    ++docs[e.label];
    for (const std::string& t : e.terms) {
      auto& row = counts.try_emplace(t, std::vector<std::size_t>(nc, 0)).first->second;
      ++row[e.label];
      ++term_total[e.label];
    }
  }
  if (counts.empty()) return fail(in_path + ": no example holds a term");
  const auto v = static_cast<double>(counts.size());
  std::vector<double> prior(nc);
  for (std::size_t c = 0; c < nc; ++c)
    prior[c] = std::log(static_cast<double>(docs[c]) / static_cast<double>(examples.size()));
  std::map<std::string, std::vector<double>> weights;
  for (const auto& [t, row] : counts) {
    std::vector<double> w(nc);
    for (std::size_t c = 0; c < nc; ++c)
      w[c] =
          std::log((static_cast<double>(row[c]) + 1.0) / (static_cast<double>(term_total[c]) + v));
    weights.emplace(t, std::move(w));
  }

  // ---- training accuracy, scored exactly as the runtime scores ----
  std::size_t correct = 0;
  for (const example& e : examples) {
    const auto best = crm::domain::ai::model::score_terms(
        e.terms, nc, prior.data(), [&](std::string_view t) -> const double* {
          const auto it = weights.find(std::string(t));
          return it == weights.end() ? nullptr : it->second.data();
        });
    if (best.index == e.label) {
      ++correct;
    } else if (verbose) {
      std::cout << "  line " << e.line << ": " << classes[e.label] << " taken for "
                << classes[best.index] << ": " << e.text << "\n";
    }
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(examples.size());

  // ---- write ----
  std::ostringstream o;
  o << "// Generated by crm_train_intents from "
    << std::filesystem::path(in_path).filename().string() << ". Do not edit.\n"
    << "#include \"domain/assistant_model.hpp\"\n\n"
    << "namespace crm::domain::ai::model {\n\n"
    << "const std::size_t class_count = " << nc << ";\n"
    << "const std::string_view class_names[] = {";
  for (std::size_t c = 0; c < nc; ++c) o << (c ? ", " : "") << literal(classes[c]);
  o << "};\nconst double log_prior[] = {";
  for (std::size_t c = 0; c < nc; ++c) o << (c ? ", " : "") << number(prior[c]);
  o << "};\n\nconst std::size_t vocabulary_size = " << weights.size() << ";\n"
    << "const std::string_view vocabulary[] = {\n";
  for (const auto& [t, w] : weights) o << "  " << literal(t) << ",\n";
  o << "};\n\nconst double log_likelihood[] = {\n";
  for (const auto& [t, w] : weights) {
    o << " ";
    for (const double x : w) o << " " << number(x) << ",";
    o << "\n";
  }
  o << "};\n\nconst std::size_t training_size = " << examples.size() << ";\n"
    << "const double training_accuracy = " << number(accuracy) << ";\n\n"
    << "} // namespace crm::domain::ai::model\n";

  std::error_code ec;
  const std::filesystem::path out(out_path);
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
  const std::string tmp = out_path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << o.str();
    if (!f.flush()) return fail("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, out, ec);
  if (ec) return fail("cannot write " + out_path + ": " + ec.message());

  std::size_t per_language[3] = {0, 0, 0};
  for (const example& e : examples)
    ++per_language[static_cast<std::size_t>(*crm::domain::ai::language_from(e.language))];
  std::printf("crm_train_intents: %zu examples (en %zu, pt %zu, es %zu), %zu intents, %zu terms; "
              "training accuracy %.2f %% (%zu/%zu)\n",
              examples.size(), per_language[0], per_language[1], per_language[2], nc,
              weights.size(), 100.0 * accuracy, correct, examples.size());
  return 0;
}
