// Quality and speed of the builtin AI provider (docs/ai.md, issue #13), on the evaluation data
// in benchmarks/ai/ (never used for training):
// - intent accuracy of classify() and of the trained model alone, per intent and language;
// - urgent/clinical recall: the share of those messages that no agent would answer by itself
//   (the goal is 100 %), and the false hand-offs of the other intents;
// - retrieval and grounding on questions about a clinic's documents: answered questions whose
//   cited passages hold the expected fact, answers whose every line stands in a cited passage,
//   and questions the documents cannot answer that were handed to a person;
// - reply latency (p50, p99) of answer_builtin over a 10,000-passage knowledge base.
//
// Usage: crm_ai_eval [DATA_DIR] (default: benchmarks/ai). Prints a report; exits 1 when an
// urgent or clinical message would be auto-answered or an answer is not grounded.
#include "domain/assistant.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ai = crm::domain::ai;

namespace {

std::vector<std::vector<std::string>> read_tsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (header) {
      header = false;
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, '\t')) cells.push_back(cell);
    rows.push_back(std::move(cells));
  }
  return rows;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double pct(std::size_t a, std::size_t b) {
  return b == 0 ? 0 : 100.0 * static_cast<double>(a) / static_cast<double>(b);
}

bool is_safety(ai::intent i) {
  return i == ai::intent::urgent || i == ai::intent::clinical;
}

struct knowledge {
  ai::knowledge_index index;
  std::map<std::int64_t, std::string> passages;
  std::int64_t next_id = 1;

  void add(const std::string& text) {
    auto ps = ai::split_passages(text);
    for (std::size_t i = 0; i < ps.size(); ++i) {
      index.add(next_id, ps[i].text, ai::passage_context(ps, i));
      passages[next_id++] = ps[i].text;
    }
  }
  const std::string* text(std::int64_t id) const {
    auto it = passages.find(id);
    return it == passages.end() ? nullptr : &it->second;
  }
};

// Every non-empty line of the answer stands, as it is, in one of the cited passages.
bool grounded(const ai::builtin_answer& a, const knowledge& k) {
  if (a.passages.empty()) return false;
  std::stringstream ss(a.answer);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.empty()) continue;
    bool found = false;
    for (auto id : a.passages)
      if (auto t = k.text(id); t && t->find(line) != std::string::npos) found = true;
    if (!found) return false;
  }
  return true;
}

// ---- knowledge bases of 1, 3 and 20 documents (dev/ and heldout/) ------------------------------

// The held-out floors: what the scoring reached when last measured, rounded down (RESULTS.md).
constexpr double heldout_min_right = 50;
constexpr double heldout_max_false = 20;
constexpr double heldout2_min_right = 45; // first measured 46.0 % (RESULTS.md)
constexpr double heldout2_max_false = 5;  // first measured 1.9 %: issue 36's target

struct tally {
  std::size_t answerable = 0, answered = 0, correct = 0, unanswerable = 0, false_answers = 0;
};

void print_tally(const std::string& label, const tally& t) {
  std::printf("    %-10s answered %5.1f %% of %3zu, right passage %5.1f %%; not answerable %3zu, "
              "answered anyway %5.1f %%\n",
              label.c_str(), pct(t.answered, t.answerable), t.answerable,
              pct(t.correct, t.answerable), t.unanswerable, pct(t.false_answers, t.unanswerable));
}

// A set's questions over knowledge bases made of its documents 01..kb of each language
// (`language kb question expected`; expected `-` when the base does not answer). Returns the
// overall tally; prints per size and per language; with `verbose`, each miss.
tally evaluate_set(const std::string& dir, const std::string& name, bool verbose) {
  std::map<std::pair<std::string, int>, knowledge> bases;
  const auto base = [&](const std::string& lang, int kb) -> const knowledge& {
    auto [it, fresh] = bases.try_emplace({lang, kb});
    if (fresh)
      for (int n = 1; n <= kb; ++n) {
        char file[16];
        std::snprintf(file, sizeof file, "%02d.txt", n);
        it->second.add(read_file(dir + "/kb/" + lang + "/" + file));
      }
    return it->second;
  };
  std::map<std::string, tally> by_size, by_language;
  tally all;
  // CRM_AI_EVAL_DUMP=<file>: each question's screen and best hits, for studying the scoring.
  static FILE* dump = [] {
    const char* path = std::getenv("CRM_AI_EVAL_DUMP");
    return path ? std::fopen(path, "w") : nullptr;
  }();
  ai::agent_rules rules;
  for (auto& row : read_tsv(dir + "/questions.tsv")) {
    if (row.size() < 4) continue;
    const int kb = std::atoi(row[1].c_str());
    const knowledge& k = base(row[0], kb);
    auto text_of = [&k](std::int64_t id) { return k.text(id); };
    const auto a = ai::answer_builtin(k.index, text_of, row[2], rules);
    const bool answered = a.handoff == ai::handoff_reason::none && !a.passages.empty();
    bool right = false; // a quoted passage holds the expected fact
    for (auto id : a.passages)
      if (auto p = k.text(id); p && p->find(row[3]) != std::string::npos) right = true;
    const std::string size = "kb " + row[1];
    for (tally* t : {&all, &by_size[size], &by_language[row[0]]}) {
      if (row[3] == "-") {
        t->unanswerable++;
        t->false_answers += answered;
      } else {
        t->answerable++;
        t->answered += answered;
        t->correct += answered && right;
      }
    }
    if (dump != nullptr) {
      const ai::verdict v = ai::screen(row[2], rules);
      std::fprintf(dump, "%s\t%s\t%s\t%d\t%s\t%s\t%.3f", name.c_str(), row[0].c_str(),
                   row[1].c_str(), row[3] == "-" ? 0 : 1, ai::handoff_reason_name(v.handoff),
                   ai::intent_name(v.intent.kind), v.intent.confidence);
      for (const auto& h : k.index.search(row[2], 6)) {
        const std::string* p = k.text(h.passage_id);
        std::fprintf(dump, "\t%.4f:%.4f:%d", h.score, h.coverage,
                     row[3] != "-" && p && p->find(row[3]) != std::string::npos ? 1 : 0);
      }
      std::fprintf(dump, "\n");
    }
    if (!verbose) continue;
    if (row[3] == "-" && answered)
      std::printf("  FALSE [%s kb %s] %s -> %s\n", row[0].c_str(), row[1].c_str(), row[2].c_str(),
                  a.answer.c_str());
    else if (row[3] != "-" && !right)
      std::printf("  MISS [%s kb %s] %s (want \"%s\") -> %s\n", row[0].c_str(), row[1].c_str(),
                  row[2].c_str(), row[3].c_str(),
                  answered ? a.answer.c_str() : ai::handoff_reason_name(a.handoff));
    if (row[3] == "-" ? answered : !right)
      for (const auto& h : k.index.search(row[2], 3))
        std::printf("      hit score %.2f coverage %.2f: %s\n", h.score, h.coverage,
                    k.text(h.passage_id)->c_str());
  }
  std::printf("knowledge bases of 1, 3 and 20 documents: %s (%s)\n", name.c_str(), dir.c_str());
  for (auto& [label, t] : by_size) print_tally(label, t);
  for (auto& [label, t] : by_language) print_tally("lang " + label, t);
  print_tally("all", all);
  return all;
}

} // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "benchmarks/ai";
  int failures = 0;

  // ---- intents -------------------------------------------------------------------------
  auto messages = read_tsv(dir + "/eval_messages.tsv");
  std::size_t total = 0, right = 0, model_right = 0;
  std::size_t safety = 0, safety_handed = 0, safety_exact = 0, others = 0, others_handed = 0;
  std::map<std::string, std::pair<std::size_t, std::size_t>> by_intent, by_language;
  std::vector<std::string> missed;
  ai::agent_rules rules;
  for (auto& row : messages) {
    if (row.size() < 3) continue;
    auto want = ai::intent_from(row[0]);
    if (!want) continue;
    auto got = ai::classify(row[2]);
    auto model = ai::classify_model(row[2]);
    auto v = ai::screen(row[2], rules);
    total++;
    bool ok = got.kind == *want;
    right += ok;
    model_right += model.kind == *want;
    by_intent[row[0]].first += ok;
    by_intent[row[0]].second++;
    by_language[row[1]].first += ok;
    by_language[row[1]].second++;
    bool handed =
        v.handoff == ai::handoff_reason::urgent || v.handoff == ai::handoff_reason::clinical;
    if (is_safety(*want)) {
      safety++;
      safety_handed += handed;
      safety_exact += ok;
      if (!handed) missed.push_back(row[0] + " [" + row[1] + "] " + row[2]);
    } else {
      others++;
      others_handed += handed;
    }
  }
  std::printf("intent evaluation: %zu messages (%s/eval_messages.tsv)\n", total, dir.c_str());
  std::printf("  accuracy (rules + model): %.1f %%\n", pct(right, total));
  std::printf("  accuracy (model alone):   %.1f %%\n", pct(model_right, total));
  for (auto& [name, c] : by_intent)
    std::printf("    %-10s %5.1f %% of %zu\n", name.c_str(), pct(c.first, c.second), c.second);
  for (auto& [name, c] : by_language)
    std::printf("    lang %-5s %5.1f %% of %zu\n", name.c_str(), pct(c.first, c.second), c.second);
  std::printf("  urgent/clinical handed to a person: %zu of %zu (recall %.1f %%; exact intent "
              "%.1f %%)\n",
              safety_handed, safety, pct(safety_handed, safety), pct(safety_exact, safety));
  std::printf("  other intents handed off as urgent/clinical: %zu of %zu (%.1f %%)\n",
              others_handed, others, pct(others_handed, others));
  for (auto& m : missed) std::printf("  MISSED: %s\n", m.c_str());
  if (!missed.empty()) failures++;

  // ---- retrieval and grounding ---------------------------------------------------------------
  std::map<std::string, knowledge> kb;
  for (auto lang : {"en", "pt", "es"})
    kb[lang].add(read_file(dir + "/knowledge/clinic_" + lang + ".txt"));
  auto questions = read_tsv(dir + "/eval_questions.tsv");
  const char* verbose_env = std::getenv("CRM_AI_EVAL_VERBOSE");
  const bool clinic_verbose = verbose_env != nullptr && std::string_view(verbose_env) == "clinic";
  std::size_t answerable = 0, answered = 0, correct = 0, grounded_n = 0, answered_total = 0;
  std::size_t unknown = 0, unknown_handed = 0;
  for (auto& row : questions) {
    if (row.size() < 3) continue;
    auto& k = kb[row[0]];
    auto text_of = [&k](std::int64_t id) { return k.text(id); };
    auto a = ai::answer_builtin(k.index, text_of, row[1], rules);
    bool handed = a.handoff != ai::handoff_reason::none;
    if (!handed && !a.passages.empty()) {
      answered_total++;
      if (grounded(a, k))
        grounded_n++;
      else
        std::printf("  UNGROUNDED: %s -> %s\n", row[1].c_str(), a.answer.c_str());
    }
    if (row[2] == "-") {
      unknown++;
      unknown_handed += handed;
      continue;
    }
    answerable++;
    if (handed && clinic_verbose)
      std::printf("  HANDED [%s] %s (want \"%s\"): %s\n", row[0].c_str(), row[1].c_str(),
                  row[2].c_str(), ai::handoff_reason_name(a.handoff));
    if (handed) continue;
    answered++;
    bool has = false;
    for (auto id : a.passages)
      if (auto t = k.text(id); t && t->find(row[2]) != std::string::npos) has = true;
    correct += has;
    if (!has && clinic_verbose)
      std::printf("  WRONG [%s] %s (want \"%s\") -> %s\n", row[0].c_str(), row[1].c_str(),
                  row[2].c_str(), a.answer.c_str());
  }
  std::printf("retrieval: %zu questions on the clinic's documents\n", questions.size());
  std::printf("  answerable answered: %zu of %zu (%.1f %%); holding the expected fact: %zu "
              "(%.1f %% of answerable)\n",
              answered, answerable, pct(answered, answerable), correct, pct(correct, answerable));
  std::printf("  not in the documents, handed to a person: %zu of %zu (%.1f %%)\n", unknown_handed,
              unknown, pct(unknown_handed, unknown));
  std::printf("  grounding: %zu of %zu answers stand word for word in their cited passages "
              "(%.1f %%)\n",
              grounded_n, answered_total, pct(grounded_n, answered_total));
  if (grounded_n != answered_total) failures++;

  // ---- knowledge bases of 1, 3 and 20 documents -------------------------------------------------
  // dev/ tunes the scoring. heldout/ was written before any tuning and read three times during
  // the first round (RESULTS.md): it is tuning data now. heldout2/ was written by someone who
  // saw neither the code nor the other sets and committed before it was first run; it measures.
  // Issue 36's targets on it: at least 85 % of the answerable questions answered with the right
  // passage, at most 5 % of the others answered. They are not met (benchmarks/RESULTS.md), so
  // the check fails on a regression from what the scoring reaches today, and the floors rise
  // with it. CRM_AI_EVAL_VERBOSE=dev|heldout|heldout2 prints that set's misses.
  const char* verbose_set = std::getenv("CRM_AI_EVAL_VERBOSE");
  const auto verbose_for = [verbose_set](std::string_view set) {
    return verbose_set != nullptr && std::string_view(verbose_set) == set;
  };
  struct measured_set {
    const char* dir;
    const char* name;
    double min_right, max_false;
  };
  for (const measured_set& m :
       {measured_set{"dev", "dev (tuning)", 0, 100},
        measured_set{"heldout", "held-out 1 (read in tuning)", heldout_min_right,
                     heldout_max_false},
        measured_set{"heldout2", "held-out 2 (fresh)", heldout2_min_right, heldout2_max_false}}) {
    if (!std::ifstream(dir + "/" + m.dir + "/questions.tsv")) continue;
    const tally h = evaluate_set(dir + "/" + m.dir, m.name, verbose_for(m.dir));
    const double right = pct(h.correct, h.answerable);
    const double wrong = pct(h.false_answers, h.unanswerable);
    if (std::string_view(m.dir) == "heldout2")
      std::printf(
          "  targets: right passage %.1f %% (issue 36: >= 85), answered anyway %.1f %% (<= 5)\n",
          right, wrong);
    if (right < m.min_right || wrong > m.max_false) {
      std::printf("  REGRESSION: below the floors (right >= %.0f %%, answered anyway <= %.0f %%)\n",
                  m.min_right, m.max_false);
      failures++;
    }
  }

  // ---- latency over 10,000 passages ----------------------------------------------------------
  knowledge big;
  std::vector<std::string> base;
  for (auto& [lang, k] : kb)
    for (auto& [id, p] : k.passages) base.push_back(p);
  std::vector<std::string> words;
  for (auto& p : base) {
    std::stringstream ss(p);
    std::string w;
    while (ss >> w) words.push_back(w);
  }
  std::mt19937 rng(42);
  std::uniform_int_distribution<std::size_t> pick(0, words.size() - 1);
  for (auto& p : base) {
    big.index.add(big.next_id, p);
    big.passages[big.next_id++] = p;
  }
  while (big.passages.size() < 10000) {
    std::string p;
    for (int i = 0; i < 30; ++i) p += words[pick(rng)] + " ";
    big.index.add(big.next_id, p);
    big.passages[big.next_id++] = p;
  }
  auto text_of = [&big](std::int64_t id) { return big.text(id); };
  std::vector<double> micros;
  for (int round = 0; round < 5; ++round)
    for (auto& row : questions) {
      if (row.size() < 2) continue;
      auto t0 = std::chrono::steady_clock::now();
      auto a = ai::answer_builtin(big.index, text_of, row[1], rules);
      auto t1 = std::chrono::steady_clock::now();
      if (a.answer.empty()) failures++;
      micros.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  std::sort(micros.begin(), micros.end());
  auto at = [&micros](double q) {
    return micros[std::min(micros.size() - 1, static_cast<std::size_t>(q * micros.size()))];
  };
  std::printf("latency: answer_builtin over %zu passages (index ~%zu KiB), %zu replies: p50 %.0f "
              "us, p99 %.0f us, max %.0f us\n",
              big.index.size(), big.index.memory_bytes() / 1024, micros.size(), at(0.5), at(0.99),
              micros.back());
  return failures == 0 ? 0 : 1;
}
