// The offline ("builtin") AI assistant's rules (docs/ai.md): text normalisation for Portuguese,
// Spanish and English, passages and a BM25 knowledge index, intent classification (rules for
// the intents that protect a patient, then a naive Bayes model trained at build time from
// domain/ai/intents_train.tsv), the hand-off decision, and answers composed only from
// retrieved passages. Pure code: no I/O, no clock, deterministic.
#pragma once
#include "domain/failure.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace crm::domain::ai {

// ---- text -----------------------------------------------------------------------------------

enum class language : std::uint8_t { en, pt, es };
const char* language_name(language l);                        // "en" "pt" "es"
std::optional<language> language_from(std::string_view name); // exact names only

// Lower-cased, accents folded to ASCII (á→a, ç→c, ñ→n, ü→u, …; other non-ASCII letters kept
// as they are), every run of characters that is not a letter or digit turned into one space,
// trimmed. Invalid UTF-8 bytes become spaces.
std::string fold(std::string_view text);

// Retrieval terms of `text`: fold(), split on spaces, stopwords of the three languages removed,
// a light suffix stemmer (plural -s/-es, -mente/-ly, …) applied. Digits are kept as terms.
std::vector<std::string> terms(std::string_view text);

// Retrieval terms (docs/ai.md#retrieval). A passage's words, lower-cased with their accents,
// without stopwords and the words that only frame a question or greet ("what", "please",
// "gostaria", "quisiera"), each reduced by the Snowball stemmer of `l` (libstemmer) and then
// folded: "Informações" → "inform", "parking" → "park". Numbers are kept as they are.
std::vector<std::string> passage_terms(std::string_view text, language l);
// A question's content words in order, each as its distinct stems in the three languages (the
// stem in `first` first), so that a word matches a passage in whichever language stems it.
std::vector<std::vector<std::string>> question_terms(std::string_view text, language first);

// The most likely language by stopword counts; `fallback` when nothing decides.
language detect_language(std::string_view text, language fallback = language::en);

// ---- knowledge ------------------------------------------------------------------------------

constexpr std::size_t max_document_bytes = 1024 * 1024;

// A piece of a knowledge document that an answer quotes: its `text`, and the `title` it stands
// under (the heading above it, or a pair's question), which is searched with it but not quoted.
struct passage {
  std::string title;
  std::string text;
  // What the index reads: the title and the text.
  std::string searched() const { return title.empty() ? text : title + "\n" + text; }
  bool operator==(const passage&) const = default;
};

// A document's text cut into passages of one sentence each (sentence ends . ! ? and blank
// lines; at most ~600 bytes, never cutting a UTF-8 character; a very long sentence is cut at
// spaces; lines without a sentence end stay together, as a list does). A paragraph's first line
// is a heading when more lines follow it and it is short and ends without punctuation, or when
// it starts with '#'; a short paragraph of one such line without digits is a heading for the
// paragraphs below it. Whitespace-only text gives no passage.
std::vector<passage> split_passages(std::string_view text);

// What the index searches besides passage i's text (knowledge_index::add's title): its title,
// and the sentences before and after it under the same title, so that a sentence that answers
// with "it" or "after that" is still found by the words of its neighbours.
std::string passage_context(const std::vector<passage>& passages, std::size_t i);

// A CSV of question/answer pairs (RFC 4180 quoting; an optional header row naming `question`
// and `answer`; exactly two columns) → one passage per pair, titled by the question. Issues (422,
// at ["body", "csv", row]) for a row without two non-empty cells; nothing when any row fails.
// `row` counts records from 0 as they are in the file (header and blank lines included; blank
// lines are skipped); at most 20 issues are reported. A CSV without any pair gives an empty
// vector: the caller decides that it holds no word.
std::optional<std::vector<passage>> parse_qa_csv(std::string_view csv, std::vector<issue>& issues);

// Okapi BM25 (k1 = 1.2, b = 0.75) over passage_terms() (each passage in the language detected
// in it) and question_terms(); passages added and removed one by one. A question word matches
// by any of its stems, else by a stem of at least 5 letters that it extends or that extends it
// by at most 5 (an accent the patient left out, "vacinacao" → "vacin"), at 0.8 of the weight.
// Coverage is the share of the question's weight a passage matched, each word weighing its
// IDF, and a word no passage holds the IDF of a word that one passage holds: in a knowledge
// base of one document every content word weighs the same, in a large one rare words weigh more.
// A passage in the language the question is written in scores 20 % more.
class knowledge_index {
public:
  struct hit {
    std::int64_t passage_id = 0;
    double score = 0;
    double coverage = 0; // share of the question's weight that this passage matched (0..1)
  };

  // Adding an id that is already there replaces it. The context (a title, the neighbouring
  // sentences: passage_context) is searched with the text: its words count for coverage as the
  // text's do, and score a fixed half of a match in the text, so sentences tie on it.
  void add(std::int64_t passage_id, std::string_view text, std::string_view context = {});
  void remove(std::int64_t passage_id); // an unknown id is ignored
  // The `k` best passages, best first (ties: lower id first); only passages matching a term.
  std::vector<hit> search(std::string_view query, std::size_t k) const;
  bool contains(std::int64_t passage_id) const;
  std::size_t size() const;
  std::size_t memory_bytes() const; // an estimate of what the index holds

private:
  // Passages live in dense slots so that search accumulates scores in a flat vector; each slot
  // keeps its distinct terms so that remove() touches only their postings.
  struct posting {
    std::uint32_t slot;
    std::uint32_t tf;      // occurrences in the text
    bool in_title = false; // in the context too
  };
  struct term_entry {
    std::string text;
    std::vector<posting> postings; // sorted by slot
  };
  struct passage_slot {
    std::int64_t passage_id = 0;
    language lang = language::en;     // detected in the text and its context
    std::uint32_t length = 0;         // number of terms of the text
    std::vector<std::uint32_t> terms; // distinct term ids; empty for a free slot
  };
  std::map<std::string, std::uint32_t, std::less<>> term_ids_; // ordered: prefix matches
  std::vector<term_entry> terms_;
  std::vector<std::uint32_t> free_terms_;
  std::unordered_map<std::int64_t, std::uint32_t> slot_of_;
  std::vector<passage_slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::uint64_t total_length_ = 0;
};

// ---- intents --------------------------------------------------------------------------------

enum class intent : std::uint8_t {
  greeting,
  faq,
  booking,
  billing,
  results,
  complaint,
  clinical,
  urgent,
  other
};
const char* intent_name(intent i);
std::optional<intent> intent_from(std::string_view name);

struct classification {
  intent kind = intent::other;
  double confidence = 0; // 1 for a rule; the model's posterior otherwise
  std::string rule;      // the rule that decided ("urgent: chest pain"), empty for the model
};

// Rules first: `urgent` (chest pain, cannot breathe, heavy bleeding, suicidal thoughts,
// unconscious, stroke signs, … in the three languages), then `clinical` (diagnosis, dosage,
// medication changes, interpreting results or symptoms), then the trained model.
classification classify(std::string_view message);
// The trained model alone (for the evaluation).
classification classify_model(std::string_view message);

// ---- answers --------------------------------------------------------------------------------

// Canned texts, no facts in them.
std::string_view
phrase_dont_know(language l); // "I don't know; a person from our team will answer you soon."
std::string_view phrase_handoff(language l);   // "A person from our team will answer you shortly."
std::string_view phrase_greeting(language l);  // "Hello! How can I help you?"
std::string_view phrase_emergency(language l); // default emergency text when none configured

struct agent_rules {
  std::vector<std::string> handoff_keywords; // matched on fold()ed whole words/phrases
  std::optional<language> reply_language;    // none: the message's language
  std::optional<std::string> emergency_message;
  double min_score = 0;       // BM25 score below which nothing is known (none: see coverage)
  double min_coverage = 0.45; // the share of the question's weight a passage must match
};

enum class handoff_reason : std::uint8_t {
  none,
  urgent,
  clinical,
  keyword,
  complaint,
  no_answer,
  provider_error
};
const char* handoff_reason_name(handoff_reason r); // "urgent", "clinical", "keyword", ...

struct verdict {
  classification intent;
  language lang = language::en;
  handoff_reason handoff = handoff_reason::none;
  std::string keyword; // the handoff keyword that matched, for handoff_reason::keyword
};

// What must happen to `message` before any provider sees it: urgent, clinical, a handoff
// keyword or a complaint hand the conversation to a person whatever a model would say.
verdict screen(std::string_view message, const agent_rules& rules);

struct builtin_answer {
  std::string answer;
  intent kind = intent::other;
  std::vector<std::int64_t> passages; // the passages the answer's text came from, in order
  handoff_reason handoff = handoff_reason::none;
  language lang = language::en;
};

// The builtin provider: screen(), then a greeting phrase for a bare greeting, else the best
// passages above the thresholds, their text as it is (the best one, and up to two more that
// score at least 70 % of the best); nothing above them → phrase_dont_know and a hand-off.
// `urgent` answers the emergency text then phrase_handoff.
builtin_answer answer_builtin(const knowledge_index& index,
                              const std::function<const std::string*(std::int64_t)>& passage_text,
                              std::string_view message, const agent_rules& rules);

} // namespace crm::domain::ai
