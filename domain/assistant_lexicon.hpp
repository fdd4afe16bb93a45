// The dictionaries the builtin assistant's retrieval reads (docs/ai.md#retrieval): Hunspell's
// English, Brazilian Portuguese and Spanish dictionaries as Debian installs them
// (hunspell-en-us, hunspell-pt-br, hunspell-es), for the dictionary form of a word, so that
// "abrem", "abrimos" and "abre" are all "abrir" and "cierran" and "cerramos" both "cerrar"
// (conjugations no suffix stemmer joins). Loaded once per language on first use (about 0.2 s
// for Portuguese: the service warms them on its worker pool at start, app/main.cpp); without a
// dictionary file a word simply has no dictionary form.
#pragma once
#include "domain/assistant.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace crm::domain::ai::lexicon {

// The first dictionary form of a lower-cased UTF-8 word that starts with the word's first byte
// (a form reached by stripping a prefix can mean the opposite: "desmarcar" is not "marcar"), or
// nothing for a word the dictionary does not know (a name, a typo, a word typed without its
// accents). Thread-safe; answers are cached.
std::optional<std::string> lemma(std::string_view word, language l);

// Whether the language's dictionary could be loaded (for the evaluation's report).
bool available(language l);

} // namespace crm::domain::ai::lexicon
