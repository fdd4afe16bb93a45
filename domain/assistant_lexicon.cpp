// Hunspell behind a lock and a cache (domain/assistant_lexicon.hpp). A Hunspell object is not
// safe to share between threads, and a word's lookup costs microseconds that an index of
// thousands of passages repeats for the same few thousand words.
#include "domain/assistant_lexicon.hpp"

#include <hunspell/hunspell.hxx>

#include <array>
#include <filesystem>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace crm::domain::ai::lexicon {

namespace {

constexpr std::string_view dictionary_dir = "/usr/share/hunspell/";
constexpr std::size_t max_cached_words = 200'000; // per language; the cache starts over beyond
constexpr std::size_t max_word_bytes = 64;        // longer: no word of a dictionary

struct dictionary {
  std::once_flag loaded;
  std::unique_ptr<Hunspell> hunspell; // null when the files are missing
  std::mutex mutex;
  std::unordered_map<std::string, std::optional<std::string>> cache;
};

const char* file_stem(language l) {
  switch (l) {
  case language::en: return "en_US";
  case language::pt: return "pt_BR";
  case language::es: return "es_ES";
  }
  return "en_US";
}

dictionary& dictionary_of(language l) {
  static std::array<dictionary, 3> dictionaries;
  dictionary& d = dictionaries[static_cast<std::size_t>(l)];
  std::call_once(d.loaded, [&d, l] {
    const std::string base = std::string(dictionary_dir) + file_stem(l);
    std::error_code ec;
    if (std::filesystem::exists(base + ".aff", ec) && std::filesystem::exists(base + ".dic", ec))
      d.hunspell = std::make_unique<Hunspell>((base + ".aff").c_str(), (base + ".dic").c_str());
  });
  return d;
}

} // namespace

std::optional<std::string> lemma(std::string_view word, language l) {
  if (word.empty() || word.size() > max_word_bytes) return std::nullopt;
  dictionary& d = dictionary_of(l);
  if (!d.hunspell) return std::nullopt;
  std::lock_guard lock(d.mutex);
  std::string key(word);
  if (const auto it = d.cache.find(key); it != d.cache.end()) return it->second;
  // A form that starts with the word's letter: Hunspell also strips prefixes, which can turn a
  // word into its opposite ("desmarcar" → "marcar", "unavailable" → "available") or into
  // another word ("desayuno" → "ayuno", "información" → "formación"); a conjugation keeps its
  // first letter ("cierran" → "cerrar").
  std::optional<std::string> found;
  for (const std::string& s : d.hunspell->stem(key)) {
    if (!s.empty() && s.front() == key.front()) {
      found = s;
      break;
    }
  }
  if (d.cache.size() >= max_cached_words) d.cache.clear();
  d.cache.emplace(std::move(key), found);
  return found;
}

bool available(language l) {
  return dictionary_of(l).hunspell != nullptr;
}

} // namespace crm::domain::ai::lexicon
