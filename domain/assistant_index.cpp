// The BM25 knowledge index of the builtin assistant (docs/ai.md#retrieval). A search reads only
// the postings of the query's terms and accumulates scores in a flat vector indexed by slot, so
// its cost follows the number of matching postings, not the size of the index.
#include "domain/assistant.hpp"

#include <algorithm>
#include <cmath>

namespace crm::domain::ai {

namespace {

constexpr double k1 = 1.2;
constexpr double b = 0.75;
constexpr std::size_t min_prefix = 5;    // letters a stem shares with the term it matches
constexpr std::size_t max_extension = 5; // letters one may have beyond the other ("-acion")
constexpr double fuzzy_factor = 0.8;
constexpr double title_share = 0.5;
// A passage in the question's language scores this much more: Portuguese and Spanish share
// most stems, and a patient who asks in one is answered from the document written in it.
constexpr double same_language_boost = 1.2;

bool has_digits(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The BM25 IDF that stays positive for terms in more than half the passages.
// Passages the index counts besides its own, none holding the word: a prior that keeps a word
// every passage of a small knowledge base holds (the clinic's name, a heading) from weighing
// nothing, while in a large base the passages' own counts decide.
constexpr double prior_passages = 30;

// The BM25 IDF over the passages and the prior ones; positive for every word.
double idf(std::size_t passages, std::size_t with_term) {
  const auto n = static_cast<double>(with_term);
  return std::log1p((static_cast<double>(passages) + prior_passages - n + 0.5) / (n + 0.5));
}

struct by_slot {
  template <class P>
  bool operator()(const P& p, std::uint32_t slot) const {
    return p.slot < slot;
  }
};

} // namespace

void knowledge_index::add(std::int64_t passage_id, std::string_view text,
                          std::string_view context) {
  if (slot_of_.contains(passage_id)) remove(passage_id);
  const language lang =
      detect_language(context.empty() ? text : std::string(context) + "\n" + std::string(text));
  std::vector<std::string> ts = passage_terms(text, lang);
  const std::size_t body_length = ts.size();
  std::vector<std::string> heading = passage_terms(context, lang);
  std::sort(heading.begin(), heading.end());
  // Context terms join the list, marked by the context set below.
  for (const std::string& t : heading) ts.push_back(t);
  std::sort(ts.begin(), ts.end());

  std::uint32_t slot = 0;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  passage_slot& ps = slots_[slot];
  ps.passage_id = passage_id;
  ps.lang = lang;
  ps.length = static_cast<std::uint32_t>(body_length);
  ps.terms.clear();

  for (std::size_t i = 0; i < ts.size();) {
    std::size_t j = i + 1;
    while (j < ts.size() && ts[j] == ts[i]) ++j;
    const bool titled = std::binary_search(heading.begin(), heading.end(), ts[i]);
    const auto in_body = static_cast<std::uint32_t>(
        j - i - (titled ? std::count(heading.begin(), heading.end(), ts[i]) : 0));
    std::uint32_t tid = 0;
    if (auto it = term_ids_.find(ts[i]); it != term_ids_.end()) {
      tid = it->second;
    } else {
      if (!free_terms_.empty()) {
        tid = free_terms_.back();
        free_terms_.pop_back();
      } else {
        tid = static_cast<std::uint32_t>(terms_.size());
        terms_.emplace_back();
      }
      terms_[tid].text = ts[i];
      term_ids_.emplace(ts[i], tid);
    }
    auto& list = terms_[tid].postings;
    list.insert(std::lower_bound(list.begin(), list.end(), slot, by_slot{}),
                posting{slot, in_body, titled});
    ps.terms.push_back(tid);
    i = j;
  }
  ps.terms.shrink_to_fit();
  total_length_ += ps.length;
  slot_of_.emplace(passage_id, slot);
}

void knowledge_index::remove(std::int64_t passage_id) {
  const auto it = slot_of_.find(passage_id);
  if (it == slot_of_.end()) return;
  const std::uint32_t slot = it->second;
  passage_slot& ps = slots_[slot];
  for (const std::uint32_t tid : ps.terms) {
    term_entry& t = terms_[tid];
    const auto p = std::lower_bound(t.postings.begin(), t.postings.end(), slot, by_slot{});
    if (p != t.postings.end() && p->slot == slot) t.postings.erase(p);
    if (t.postings.empty()) {
      term_ids_.erase(t.text);
      t = term_entry{};
      free_terms_.push_back(tid);
    }
  }
  total_length_ -= ps.length;
  ps = passage_slot{};
  free_slots_.push_back(slot);
  slot_of_.erase(it);
  if (slot_of_.empty()) *this = knowledge_index{}; // give the memory back
}

std::vector<knowledge_index::hit> knowledge_index::search(std::string_view query,
                                                          std::size_t k) const {
  if (k == 0 || slot_of_.empty()) return {};
  const std::size_t n_passages = slot_of_.size();
  const double avg_length =
      std::max(1.0, static_cast<double>(total_length_) / static_cast<double>(n_passages));

  // Each question word resolved to one term of the index (or none), with its weight.
  struct query_term {
    const term_entry* entry;
    double weight;
  };
  std::vector<query_term> present;
  std::vector<const term_entry*> seen;
  double weight_mass = 0;
  const auto df = [](const term_entry* e) { return e->postings.size(); };
  const language query_lang = detect_language(query);
  for (const std::vector<std::string>& stems : question_terms(query, query_lang)) {
    const term_entry* found = nullptr;
    double factor = 1;
    for (const std::string& s : stems) {
      if (const auto it = term_ids_.find(s); it != term_ids_.end()) {
        found = &terms_[it->second];
        break;
      }
    }
    for (auto s = stems.begin(); found == nullptr && s != stems.end(); ++s) {
      const std::string_view stem = *s;
      if (stem.size() < min_prefix || has_digits(stem)) continue;
      // A shorter stem in the index that this one extends: the longest first.
      for (std::size_t n = stem.size() - 1; n >= min_prefix && n + max_extension >= stem.size();
           --n) {
        if (const auto it = term_ids_.find(stem.substr(0, n)); it != term_ids_.end()) {
          found = &terms_[it->second];
          break;
        }
      }
      // A longer one that extends this one: the most common.
      for (auto it = term_ids_.lower_bound(stem);
           it != term_ids_.end() && it->first.starts_with(stem); ++it) {
        if (it->first.size() == stem.size() || it->first.size() > stem.size() + max_extension)
          continue;
        const term_entry* e = &terms_[it->second];
        if (found == nullptr || df(e) > df(found)) found = e;
      }
      if (found != nullptr) factor = fuzzy_factor;
    }
    if (found != nullptr && std::find(seen.begin(), seen.end(), found) != seen.end()) continue;
    const double w = idf(n_passages, found ? df(found) : 1) * factor;
    weight_mass += w;
    if (found != nullptr) {
      seen.push_back(found);
      present.push_back({found, w});
    }
  }
  if (present.empty()) return {};

  struct acc {
    double score = 0;
    double matched = 0;
  };
  std::vector<acc> accs(slots_.size());
  std::vector<std::uint32_t> touched;
  for (const query_term& q : present) {
    for (const posting& p : q.entry->postings) {
      acc& a = accs[p.slot];
      if (a.matched == 0) touched.push_back(p.slot);
      const double tf = p.tf;
      const double norm = k1 * (1 - b + b * slots_[p.slot].length / avg_length);
      // A word of the context counts as a word of the passage for coverage, and scores as a
      // fixed half of a match in the text: sentences under one heading tie on it.
      a.score += q.weight * (tf * (k1 + 1) / (tf + norm) + (p.in_title ? title_share : 0));
      a.matched += q.weight;
    }
  }

  std::vector<hit> hits;
  hits.reserve(touched.size());
  for (const std::uint32_t s : touched) {
    const double boost = slots_[s].lang == query_lang ? same_language_boost : 1.0;
    hits.push_back({slots_[s].passage_id, accs[s].score * boost, accs[s].matched / weight_mass});
  }
  const auto better = [](const hit& x, const hit& y) {
    return x.score != y.score ? x.score > y.score : x.passage_id < y.passage_id;
  };
  const std::size_t top = std::min(k, hits.size());
  std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(top), hits.end(),
                    better);
  hits.resize(top);
  return hits;
}

bool knowledge_index::contains(std::int64_t passage_id) const {
  return slot_of_.contains(passage_id);
}

std::size_t knowledge_index::size() const {
  return slot_of_.size();
}

std::size_t knowledge_index::memory_bytes() const {
  // Hash nodes are counted as the value plus two pointers, buckets as one pointer each; tree
  // nodes as the value plus four pointers.
  constexpr std::size_t node = 2 * sizeof(void*);
  std::size_t total = sizeof(*this);
  total += terms_.capacity() * sizeof(term_entry) + free_terms_.capacity() * sizeof(std::uint32_t);
  for (const term_entry& t : terms_) {
    if (t.text.capacity() > 15) total += 2 * (t.text.capacity() + 1); // entry and map key
    total += t.postings.capacity() * sizeof(posting);
  }
  total += term_ids_.size() * (sizeof(std::pair<const std::string, std::uint32_t>) + 2 * node);
  total +=
      slots_.capacity() * sizeof(passage_slot) + free_slots_.capacity() * sizeof(std::uint32_t);
  for (const passage_slot& s : slots_) total += s.terms.capacity() * sizeof(std::uint32_t);
  total += slot_of_.size() * (sizeof(std::pair<const std::int64_t, std::uint32_t>) + node) +
           slot_of_.bucket_count() * sizeof(void*);
  return total;
}

} // namespace crm::domain::ai
