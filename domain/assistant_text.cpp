// Text normalisation of the builtin assistant (docs/ai.md): accent folding, retrieval terms with
// stopwords and a light stemmer, language detection, passages and question/answer CSV. This file
// is the `crm_text` library: the intent trainer (domain/ai/train_intents.cpp) links it at build
// time, so the model's vocabulary is made of exactly the terms the runtime computes.
#include "domain/assistant.hpp"
#include "domain/assistant_lexicon.hpp"

#include <libstemmer.h>

#include <algorithm>
#include <array>
#include <memory>
#include <unordered_set>

namespace crm::domain::ai {

namespace {

// ---- UTF-8 and folding ----------------------------------------------------------------------

constexpr char32_t invalid_cp = 0xFFFFFFFF;

// Decodes one code point at `i` (advancing it); invalid_cp for a malformed, overlong or
// surrogate sequence, of which only the first byte is consumed.
char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  std::size_t len = 0;
  char32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    ++i;
    return invalid_cp;
  }
  if (i + len > s.size()) {
    ++i;
    return invalid_cp;
  }
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return invalid_cp;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
    ++i;
    return invalid_cp;
  }
  i += len;
  return cp;
}

// U+00C0..U+00FF and U+0100..U+017F folded to ASCII. Digits stand for two letters
// (1 ae, 2 th, 3 ss, 4 ij, 5 oe); a space is a symbol (× ÷).
constexpr std::string_view latin1_fold =
    "aaaaaa1ceeeeiiiidnooooo ouuuuy23aaaaaa1ceeeeiiiidnooooo ouuuuy2y";
constexpr std::string_view latin_ext_a_fold =
    "aaaaaaccccccccddddeeeeeeeeeegggggggghhhhiiiiiiiiii44jjk"
    "kkllllllllllnnnnnnnnnoooooo55rrrrrrsssssssstttttt"
    "uuuuuuuuuuuuwwyyyzzzzzzs";
static_assert(latin1_fold.size() == 64);
static_assert(latin_ext_a_fold.size() == 128);

void append_folded(std::string& out, char f) {
  switch (f) {
  case '1': out += "ae"; break;
  case '2': out += "th"; break;
  case '3': out += "ss"; break;
  case '4': out += "ij"; break;
  case '5': out += "oe"; break;
  default: out += f;
  }
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Marks that modify the letter before them (NFD accents, variation selectors, zero-width
// joiners, soft hyphen): dropped, so "a\u0301" folds like "á" and a soft hyphen splits nothing.
bool is_invisible(char32_t cp) {
  return (cp >= 0x0300 && cp <= 0x036F) || (cp >= 0x1AB0 && cp <= 0x1AFF) ||
         (cp >= 0x1DC0 && cp <= 0x1DFF) || (cp >= 0x20D0 && cp <= 0x20FF) ||
         (cp >= 0xFE00 && cp <= 0xFE0F) || (cp >= 0xFE20 && cp <= 0xFE2F) ||
         (cp >= 0x200B && cp <= 0x200D) || cp == 0x2060 || cp == 0xFEFF || cp == 0x00AD ||
         (cp >= 0xE0000 && cp <= 0xE007F);
}

// Punctuation, symbols, spaces and emoji outside ASCII: without Unicode tables, the blocks that
// hold no letters.
bool is_non_ascii_separator(char32_t cp) {
  return (cp >= 0x80 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7 || (cp >= 0x2000 && cp <= 0x2BFF) ||
         (cp >= 0x2E00 && cp <= 0x2E7F) || (cp >= 0x3000 && cp <= 0x303F) ||
         (cp >= 0xE000 && cp <= 0xF8FF) || (cp >= 0xFE10 && cp <= 0xFE1F) ||
         (cp >= 0xFE30 && cp <= 0xFE6F) || (cp >= 0xFF00 && cp <= 0xFF0F) ||
         (cp >= 0xFF1A && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) ||
         (cp >= 0xFF5B && cp <= 0xFF65) || (cp >= 0xFFF0 && cp <= 0xFFFF) ||
         (cp >= 0x1F000 && cp <= 0x1FAFF);
}

// ---- stopwords ------------------------------------------------------------------------------

// Folded forms. Kept short: words that carry a request (hours, price, today) are never here.
constexpr std::string_view stop_en[] = {
    "a",     "about", "after", "again",  "all",   "am",   "an",    "and",    "any",     "are",
    "as",    "at",    "be",    "been",   "being", "both", "but",   "by",     "can",     "could",
    "d",     "did",   "do",    "does",   "doing", "don",  "dont",  "each",   "for",     "from",
    "had",   "has",   "have",  "having", "he",    "her",  "here",  "hers",   "him",     "his",
    "how",   "i",     "if",    "im",     "in",    "into", "is",    "it",     "its",     "ive",
    "just",  "ll",    "m",     "me",     "more",  "most", "my",    "myself", "no",      "nor",
    "not",   "of",    "on",    "or",     "our",   "ours", "re",    "s",      "she",     "should",
    "so",    "some",  "such",  "t",      "than",  "that", "the",   "their",  "them",    "then",
    "there", "these", "they",  "this",   "those", "to",   "too",   "u",      "very",    "ve",
    "was",   "we",    "were",  "what",   "whats", "when", "where", "which",  "while",   "who",
    "whom",  "why",   "will",  "with",   "would", "you",  "your",  "yours",  "yourself"};
constexpr std::string_view stop_pt[] = {
    "a", "ao", "aos", "aquela", "aquele", "aquilo", "as", "ate", "com", "como", "da", "das", "de",
    "dela", "dele", "do", "dos", "e", "eh", "ela", "elas", "ele", "eles", "em", "era", "essa",
    "essas", "esse", "esses", "esta", "estao", "estas", "estava", "este", "estes", "estou", "eu",
    "foi", "ha", "isso", "isto", "ja", "lhe", "lhes", "mas", "me", "meu", "meus", "minha", "minhas",
    "muita", "muito", "na", "nao", "nas", "nem", "no", "nos", "nossa", "nosso", "num", "numa", "o",
    "onde", "os", "ou", "para", "pela", "pelas", "pelo", "pelos", "por", "pra", "pro", "q", "qual",
    "quais", "quando", "que", "quem", "sao", "se", "sem", "ser", "seu", "seus", "so", "sou", "sua",
    "suas", "ta", "tambem", "te", "tem", "tenho", "to", "tu", "tua", "um", "uma", "umas", "uns",
    "vc", "vcs", "voce", "voces",
    // modal and generic verbs, quantities
    "posso", "pode", "podem", "poderia", "podia", "consigo", "consegue", "faz", "fazer", "faco",
    "algum", "alguma", "alguns", "algumas", "algo", "nada", "quanto", "quanta", "quantos",
    "quantas", "temos"};
constexpr std::string_view stop_es[] = {
    "a", "al", "como", "con", "cual", "cuales", "cuando", "de", "del", "desde", "donde", "e", "el",
    "ella", "ellas", "ellos", "en", "era", "eres", "es", "esa", "esas", "ese", "eso", "esos",
    "esta", "estan", "estas", "este", "esto", "estos", "estoy", "fue", "ha", "hay", "he", "la",
    "las", "le", "les", "lo", "los", "mas", "me", "mi", "mis", "muy", "ni", "no", "nos", "nuestra",
    "nuestro", "o", "para", "pero", "por", "que", "quien", "se", "si", "sin", "son", "soy", "su",
    "sus", "te", "tengo", "ti", "tu", "tus", "u", "un", "una", "unas", "unos", "usted", "ustedes",
    "y", "ya", "yo",
    // modal and generic verbs, quantities
    "puedo", "puede", "pueden", "podria", "podemos", "hacer", "hago", "hace", "tiene", "tienen",
    "tenemos", "algun", "alguna", "algunos", "algunas", "algo", "nada", "cuanto", "cuanta",
    "cuantos", "cuantas"};

// Words that frame a question, greet or thank without saying what is asked: left out of the
// retrieval terms (never of the intent model's), so that "hi, could you please tell me where I
// can park?" asks the index for "park" alone. Folded forms.
constexpr std::string_view frame_words[] = {
    // en
    "please", "pls", "plz", "hi", "hello", "hey", "thanks", "thank", "thx", "ok", "okay", "know",
    "tell", "want", "wanted", "wonder", "wondering", "like", "question", "ask", "asking", "guys",
    "dear", "anyone", "someone", "need", "much", "many", "long", "good", "also", "still", "yes",
    "possible", "exactly", "actually", "really", "usually", "kind", "kindly", "let", "us", "there",
    "whether", "get", "got", "go", "going", "way", "thing", "things", "able",
    // pt
    "oi", "ola", "bom", "boa", "obrigado", "obrigada", "obg", "favor", "gostaria", "queria",
    "quero", "saber", "sabe", "saberia", "sabem", "informar", "informa", "dizer", "diz", "duvida",
    "pergunta", "preciso", "precisa", "precisar", "tudo", "bem", "alguem", "aqui", "ai", "la",
    "entao", "tipo", "ne", "sera", "seria", "existe", "ter", "voces", "vcs", "td", "tds", "pessoal",
    "gente", "moca", "moco", "senhor", "senhora", "ainda", "mesmo", "qualquer", "quanto", "quantos",
    "quanta", "quantas", "quais", "qual", "vou", "vai", "devo", "deve", "tenho", "ha", "tem",
    "fica", "ficam",
    // es
    "hola", "buenos", "buenas", "buen", "gracias", "favor", "quisiera", "quiero", "queria", "saber",
    "sabe", "saben", "decir", "dicen", "digan", "pregunta", "duda", "necesito", "necesita",
    "alguien", "aqui", "ahi", "alli", "entonces", "bien", "existe", "tener", "hay", "ustedes",
    "senor", "senora", "todavia", "mismo", "cualquier", "voy", "va", "debo", "debe", "tienen",
    "tiene", "queda", "quedan"};

// Words that say which language a message is in besides the stopwords: greetings, thanks and
// the everyday words of a clinic's chat.
constexpr std::string_view hint_en[] = {
    "hello",       "hi",   "hey",    "thanks", "thank",   "please", "good",     "morning",
    "appointment", "book", "cancel", "yes",    "bye",     "sorry",  "wrong",    "number",
    "need",        "want", "like",   "pain",   "doctor",  "today",  "tomorrow", "week",
    "price",       "much", "open",   "pay",    "results", "test",   "blood",    "help",
    "haha",        "lol",  "get",    "tell",   "know",    "any",    "guys",     "thx"};
constexpr std::string_view hint_pt[] = {
    "ola",     "oi",     "obrigado", "obrigada", "obg",     "valeu",    "vlw",      "blz",
    "bom",     "boa",    "tudo",     "quero",    "queria",  "gostaria", "consulta", "marcar",
    "agendar", "posso",  "preciso",  "pode",     "podem",   "aceita",   "aceitam",  "fazem",
    "consigo", "errado", "errada",   "desculpa", "tchau",   "kk",       "rsrs",     "mandei",
    "conhece", "algum",  "alguma",   "horario",  "amanha",  "hoje",     "semana",   "exame",
    "remedio", "dor",    "febre",    "cabeca",   "peito",   "noite",    "agora",    "aqui",
    "ne",      "entao",  "depois",   "ontem",    "receita", "minha",    "meu",      "fazer",
    "sangue",  "cartao", "pagar",    "quanto",   "quantos", "tambem",   "ajuda",    "ficar",
    "vou",     "vai"};
constexpr std::string_view hint_es[] = {
    "hola",   "gracias", "buenos",   "buenas", "buen",       "saludos",   "quiero",  "quisiera",
    "cita",   "puedo",   "necesito", "turno",  "tienen",     "tiene",     "aceptan", "acepta",
    "hacen",  "pueden",  "puede",    "jaja",   "equivocado", "equivoque", "perdon",  "conoces",
    "algun",  "alguna",  "hoy",      "manana", "viernes",    "lunes",     "martes",  "jueves",
    "examen", "receta",  "dolor",    "fiebre", "cabeza",     "pecho",     "noches",  "tardes",
    "ayuda",  "ahora",   "entonces", "vez",    "veces",      "mucho",     "mucha",   "precio",
    "cuanto", "cuanta",  "cuesta",   "sangre", "tarjeta",    "pago",      "hago",    "llevo",
    "ayer",   "despues", "bien",     "senor",  "senora",     "mama",      "papa",    "debo",
    "voy"};

using word_set = std::unordered_set<std::string_view>;

template <std::size_t N, std::size_t M>
word_set make_set(const std::string_view (&a)[N], const std::string_view (&b)[M]) {
  word_set s(std::begin(a), std::end(a));
  s.insert(std::begin(b), std::end(b));
  return s;
}

const word_set& all_stopwords() {
  static const word_set s = [] {
    word_set all(std::begin(stop_en), std::end(stop_en));
    all.insert(std::begin(stop_pt), std::end(stop_pt));
    all.insert(std::begin(stop_es), std::end(stop_es));
    return all;
  }();
  return s;
}

// Stopwords and hints, without the fragments of English contractions (I'd, it's, we'll), which
// say little about a language.
const std::array<word_set, 3>& language_words() {
  static const std::array<word_set, 3> s = [] {
    std::array<word_set, 3> sets = {make_set(stop_en, hint_en), make_set(stop_pt, hint_pt),
                                    make_set(stop_es, hint_es)};
    for (word_set& set : sets)
      for (std::string_view fragment : {"d", "s", "t", "m", "ll", "re", "ve", "u"})
        set.erase(fragment);
    return sets;
  }();
  return s;
}

// A folded word as a clue to its language: itself, or stretched letters cut ("holaa", "kkkk").
std::string_view unstretched(std::string_view w) {
  while (w.size() > 2 && w[w.size() - 1] == w[w.size() - 2]) w.remove_suffix(1);
  return w;
}

// Spelling that only one of the languages uses (after folding): Portuguese nh, lh, -ao, -oes;
// Spanish -cion(es) and ue inside a word not after q or g (puede, bueno, cuesta).
void spelling_clues(std::string_view w, std::array<int, 3>& score) {
  if (w.find("nh") != std::string_view::npos || w.find("lh") != std::string_view::npos ||
      (w.size() > 3 && (w.ends_with("ao") || w.ends_with("oes"))))
    ++score[1];
  if (w.ends_with("cion") || w.ends_with("ciones")) ++score[2];
  for (std::size_t p = w.find("ue", 1); p != std::string_view::npos && p + 2 < w.size();
       p = w.find("ue", p + 1)) {
    if (w[p - 1] != 'q' && w[p - 1] != 'g') {
      ++score[2];
      break;
    }
  }
  if (w.starts_with("jaja")) ++score[2];
  if (w.starts_with("haha")) ++score[0];
}

// ---- stemmer --------------------------------------------------------------------------------

bool ends_with(std::string_view w, std::string_view suffix) {
  return w.size() >= suffix.size() && w.substr(w.size() - suffix.size()) == suffix;
}

// One deterministic pass shared by the three languages: plural, then an adverb or verb ending,
// then one final a/e/o, so that consulta/consultas/consult, dolor/dolores, exame/exames,
// rapidamente/rapido/rapidly meet on one stem.
std::string stem(std::string w) {
  if (w.size() < 4 || std::any_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return w;
  const auto cut = [&w](std::size_t n) { w.resize(w.size() - n); };
  if (ends_with(w, "ies") && w.size() >= 5) {
    cut(3);
    w += 'y';
  } else if (ends_with(w, "coes") && w.size() >= 6) {
    cut(3);
    w += "ao";
  } else if ((ends_with(w, "ais") || ends_with(w, "eis")) && w.size() >= 6) {
    cut(2);
    w += 'l';
  } else if (w.back() == 's' && !ends_with(w, "ss") && !ends_with(w, "us") && !ends_with(w, "is")) {
    cut(1);
  }
  if (ends_with(w, "mente") && w.size() >= 8) {
    cut(5);
  } else if (ends_with(w, "ly") && w.size() >= 6) {
    cut(2);
  } else if (ends_with(w, "ing") && w.size() >= 6) {
    cut(3);
  } else if (ends_with(w, "ed") && w.size() >= 6) {
    cut(2);
  }
  if (w.size() >= 4 && (w.back() == 'a' || w.back() == 'e' || w.back() == 'o')) cut(1);
  return w;
}

template <class F>
void for_each_word(std::string_view folded, F&& f) {
  std::size_t i = 0;
  while (i < folded.size()) {
    const std::size_t end = std::min(folded.find(' ', i), folded.size());
    if (end > i) f(folded.substr(i, end - i));
    i = end + 1;
  }
}

// ---- passages -------------------------------------------------------------------------------

constexpr std::size_t max_passage_bytes = 600;
constexpr std::size_t max_heading_bytes = 80;      // a first line above more lines
constexpr std::size_t max_lone_heading_bytes = 60; // a line alone above a paragraph

bool ends_with_punctuation(std::string_view line) {
  return !line.empty() && std::string_view(".!?:;,").find(line.back()) != std::string_view::npos;
}

bool is_list_item(std::string_view line) {
  return line.starts_with('-') || line.starts_with('*') || line.starts_with("\u2022");
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Runs of white space become one space, or one newline when they hold a line break (lists).
std::string squeeze(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  s = trim(s);
  for (std::size_t i = 0; i < s.size();) {
    if (!is_space(s[i])) {
      out += s[i++];
      continue;
    }
    bool newline = false;
    while (i < s.size() && is_space(s[i])) newline |= s[i++] == '\n';
    out += newline ? '\n' : ' ';
  }
  return out;
}

// Closing marks allowed between a sentence's end and the space after it.
std::size_t closer_length(std::string_view s, std::size_t i) {
  if (s[i] == ')' || s[i] == ']' || s[i] == '"' || s[i] == '\'') return 1;
  for (std::string_view m : {"\u201D", "\u2019", "\u00BB"})
    if (s.substr(i, m.size()) == m) return m.size();
  return 0;
}

std::vector<std::string> sentences_of(std::string_view paragraph) {
  std::vector<std::string> out;
  std::size_t start = 0;
  std::size_t i = 0;
  const auto emit = [&](std::size_t end) {
    std::string s = squeeze(paragraph.substr(start, end - start));
    if (!s.empty()) out.push_back(std::move(s));
    start = end;
  };
  while (i < paragraph.size()) {
    const char c = paragraph[i];
    const bool ellipsis = paragraph.substr(i, 3) == "\u2026";
    if (c != '.' && c != '!' && c != '?' && !ellipsis) {
      ++i;
      continue;
    }
    std::size_t j = i + (ellipsis ? 3 : 1);
    while (j < paragraph.size()) {
      if (paragraph[j] == '.' || paragraph[j] == '!' || paragraph[j] == '?') {
        ++j;
      } else if (const std::size_t n = closer_length(paragraph, j)) {
        j += n;
      } else {
        break;
      }
    }
    if (j == paragraph.size() || is_space(paragraph[j])) emit(j);
    i = j;
  }
  emit(paragraph.size());
  return out;
}

// A sentence longer than a passage, cut at spaces (or, without one, between UTF-8 characters).
void cut_long(std::string_view s, std::vector<std::string>& out) {
  while (s.size() > max_passage_bytes) {
    std::size_t cut = s.find_last_of(" \n", max_passage_bytes);
    if (cut == std::string_view::npos || cut == 0) {
      cut = max_passage_bytes;
      while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
      if (cut == 0) cut = max_passage_bytes; // not UTF-8 at all: any cut will do
    }
    out.emplace_back(trim(s.substr(0, cut)));
    s = trim(s.substr(cut));
  }
  if (!s.empty()) out.emplace_back(s);
}

// ---- CSV ------------------------------------------------------------------------------------

constexpr std::size_t max_csv_issues = 20;

struct csv_record {
  std::vector<std::string> cells;
  std::string error; // a malformed quote
};

// RFC 4180 records; lenient where it costs nothing (spaces around a quoted cell, a quote inside
// an unquoted cell, LF or CR line ends). CRLF inside a quoted cell becomes LF.
std::vector<csv_record> read_csv(std::string_view s) {
  std::vector<csv_record> rows;
  if (s.substr(0, 3) == "\xEF\xBB\xBF") s.remove_prefix(3);
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    csv_record row;
    bool end_of_record = false;
    while (!end_of_record) {
      std::string cell;
      std::size_t j = i;
      while (j < n && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j < n && s[j] == '"') {
        i = j + 1;
        bool closed = false;
        while (i < n) {
          if (s[i] == '"') {
            if (i + 1 < n && s[i + 1] == '"') {
              cell += '"';
              i += 2;
              continue;
            }
            ++i;
            closed = true;
            break;
          }
          if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') ++i;
          cell += s[i++];
        }
        if (!closed && row.error.empty()) row.error = "a quoted cell is not closed";
        while (i < n && (s[i] == ' ' || s[i] == '\t')) ++i;
        if (i < n && s[i] != ',' && s[i] != '\n' && s[i] != '\r') {
          if (row.error.empty()) row.error = "unexpected text after a closing quote";
          while (i < n && s[i] != ',' && s[i] != '\n' && s[i] != '\r') ++i;
        }
      } else {
        while (i < n && s[i] != ',' && s[i] != '\n' && s[i] != '\r') cell += s[i++];
      }
      row.cells.push_back(std::move(cell));
      if (i < n && s[i] == ',') {
        ++i;
      } else {
        end_of_record = true;
        if (i < n && s[i] == '\r') ++i;
        if (i < n && s[i] == '\n') ++i;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

bool is_header(const csv_record& r) {
  if (r.cells.size() != 2 || !r.error.empty()) return false;
  const std::string q = fold(r.cells[0]);
  const std::string a = fold(r.cells[1]);
  return (q == "question" || q == "pergunta" || q == "pregunta") &&
         (a == "answer" || a == "resposta" || a == "respuesta");
}

} // namespace

// ---- public ---------------------------------------------------------------------------------

const char* language_name(language l) {
  switch (l) {
  case language::en: return "en";
  case language::pt: return "pt";
  case language::es: return "es";
  }
  return "en";
}

std::optional<language> language_from(std::string_view name) {
  if (name == "en") return language::en;
  if (name == "pt") return language::pt;
  if (name == "es") return language::es;
  return std::nullopt;
}

namespace {

// fold(), or with `keep_accents` the same words lower-cased with the accents of Latin-1 kept
// (what a Snowball stemmer reads: "Informações" → "informações").
std::string normalise(std::string_view text, bool keep_accents) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  const auto put_space = [&] { pending_space = !out.empty(); };
  const auto put = [&](auto&& append) {
    if (pending_space) out += ' ';
    pending_space = false;
    append();
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const char32_t cp = next_code_point(text, i);
    if (cp < 0x80) {
      const char c = static_cast<char>(cp);
      if (c >= 'A' && c <= 'Z') {
        put([&] { out += static_cast<char>(c - 'A' + 'a'); });
      } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
        put([&] { out += c; });
      } else {
        put_space();
      }
    } else if (cp == invalid_cp) {
      put_space();
    } else if (is_invisible(cp)) {
      continue;
    } else if (cp >= 0xC0 && cp <= 0x17F) {
      const char f = cp <= 0xFF ? latin1_fold[cp - 0xC0] : latin_ext_a_fold[cp - 0x100];
      if (f == ' ') {
        put_space();
      } else if (keep_accents && cp <= 0xFF) {
        put([&] { append_utf8(out, cp <= 0xDE && cp != 0xD7 ? cp + 0x20 : cp); });
      } else {
        put([&] { append_folded(out, f); });
      }
    } else if (cp == 0xAA || cp == 0xBA) { // ª º: ordinal letters (1º, nº)
      put([&] { out += cp == 0xAA ? 'a' : 'o'; });
    } else if (cp == 0xB2 || cp == 0xB3 || cp == 0xB9) { // superscript digits (m², m³)
      put([&] { out += cp == 0xB9 ? '1' : static_cast<char>('0' + (cp - 0xB0)); });
    } else if (cp == 0xB5) { // micro sign, as in µg
      put([&] { out += 'u'; });
    } else if (is_non_ascii_separator(cp)) {
      put_space();
    } else {
      put([&] { append_utf8(out, cp); });
    }
  }
  return out;
}

} // namespace

std::string fold(std::string_view text) {
  return normalise(text, false);
}

namespace {

const word_set& retrieval_stopwords() {
  static const word_set s = [] {
    word_set all = all_stopwords();
    all.insert(std::begin(frame_words), std::end(frame_words));
    return all;
  }();
  return s;
}

// One Snowball stemmer per language and thread (a stemmer keeps state between calls).
class snowball {
public:
  explicit snowball(const char* algorithm) : stemmer_(sb_stemmer_new(algorithm, "UTF_8")) {}
  // The stem of a lower-cased UTF-8 word; the word itself when the stemmer cannot run.
  std::string stem(std::string_view word) {
    if (!stemmer_) return std::string(word);
    const sb_symbol* s =
        sb_stemmer_stem(stemmer_.get(), reinterpret_cast<const sb_symbol*>(word.data()),
                        static_cast<int>(word.size()));
    if (s == nullptr) return std::string(word);
    return std::string(reinterpret_cast<const char*>(s),
                       static_cast<std::size_t>(sb_stemmer_length(stemmer_.get())));
  }

private:
  struct deleter {
    void operator()(sb_stemmer* s) const { sb_stemmer_delete(s); }
  };
  std::unique_ptr<sb_stemmer, deleter> stemmer_;
};

snowball& stemmer_of(language l) {
  thread_local std::array<snowball, 3> stemmers = {snowball("english"), snowball("portuguese"),
                                                   snowball("spanish")};
  return stemmers[static_cast<std::size_t>(l)];
}

bool has_digit(std::string_view w) {
  return std::any_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Calls f(word with accents, folded word) for every retrieval word of `text`.
template <class F>
void for_each_content_word(std::string_view text, F&& f) {
  const std::string lower = normalise(text, true);
  const word_set& stop = retrieval_stopwords();
  for_each_word(lower, [&](std::string_view w) {
    const std::string folded = fold(w);
    if (folded.empty() || stop.contains(folded)) return;
    f(w, folded);
  });
}

// A word's retrieval term in `l`: numbers as they are, other words in their dictionary form
// when the dictionary knows them (abrem → abrir), then stemmed (abr) and folded.
std::string term_in(std::string_view word, const std::string& folded, language l) {
  if (has_digit(folded)) return folded;
  const std::optional<std::string> base = lexicon::lemma(word, l);
  std::string t = fold(stemmer_of(l).stem(base ? std::string_view(*base) : word));
  return t.empty() ? folded : t;
}

} // namespace

std::vector<std::string> passage_terms(std::string_view text, language l) {
  std::vector<std::string> out;
  for_each_content_word(text, [&](std::string_view w, const std::string& folded) {
    out.push_back(term_in(w, folded, l));
  });
  // A hyphenated word also as one ("Wi-Fi" is found by "wifi", "e-mail" by "email"); its
  // parts stay terms of their own ("segunda-feira" is found by "segunda").
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t start = text.find_first_not_of(" \t\r\n", i);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(text.find_first_of(" \t\r\n", start), text.size());
    const std::string_view token = text.substr(start, end - start);
    i = end;
    const std::size_t hyphen = token.find('-');
    if (hyphen == std::string_view::npos || hyphen == 0) continue;
    std::string joined;
    for (const char c : token)
      if (c != '-') joined += c;
    const std::string lower = normalise(joined, true);
    if (lower.empty() || lower.find(' ') != std::string::npos) continue; // not one word
    out.push_back(term_in(lower, fold(lower), l));
  }
  return out;
}

std::vector<std::vector<std::string>> question_terms(std::string_view text, language first) {
  std::vector<std::vector<std::string>> out;
  for_each_content_word(text, [&](std::string_view w, const std::string& folded) {
    std::vector<std::string> stems{term_in(w, folded, first)};
    for (language l : {language::en, language::pt, language::es}) {
      if (l == first) continue;
      std::string t = term_in(w, folded, l);
      if (std::find(stems.begin(), stems.end(), t) == stems.end()) stems.push_back(std::move(t));
    }
    out.push_back(std::move(stems));
  });
  return out;
}

std::vector<std::string> terms(std::string_view text) {
  std::vector<std::string> out;
  const std::string folded = fold(text);
  const word_set& stop = all_stopwords();
  for_each_word(folded, [&](std::string_view w) {
    if (!stop.contains(w)) out.push_back(stem(std::string(w)));
  });
  return out;
}

language detect_language(std::string_view text, language fallback) {
  std::array<int, 3> score{};
  // Letters only one of the languages writes.
  for (std::string_view m : {"\u00E3", "\u00F5", "\u00E7", "\u00EA", "\u00F4", "\u00C3", "\u00C7"})
    for (std::size_t p = text.find(m); p != std::string_view::npos; p = text.find(m, p + 1))
      score[1] += 1;
  for (std::string_view m : {"\u00F1", "\u00D1", "\u00BF", "\u00A1"})
    for (std::size_t p = text.find(m); p != std::string_view::npos; p = text.find(m, p + 1))
      score[2] += 1;
  const std::string folded = fold(text);
  const auto& sets = language_words();
  for_each_word(folded, [&](std::string_view w) {
    const std::string_view base = unstretched(w);
    for (std::size_t l = 0; l < 3; ++l)
      if (sets[l].contains(w) || sets[l].contains(base)) ++score[l];
    spelling_clues(w, score);
  });
  const int best = *std::max_element(score.begin(), score.end());
  if (best == 0) return fallback;
  if (score[static_cast<std::size_t>(fallback)] == best) return fallback;
  for (language l : {language::en, language::pt, language::es})
    if (score[static_cast<std::size_t>(l)] == best) return l;
  return fallback;
}

std::vector<passage> split_passages(std::string_view text) {
  std::vector<passage> passages;
  // Paragraphs: blank lines end a passage whatever its length.
  std::vector<std::string_view> paragraphs;
  std::size_t para_start = 0;
  std::size_t line_start = 0;
  while (line_start <= text.size()) {
    const std::size_t nl = std::min(text.find('\n', line_start), text.size());
    if (trim(text.substr(line_start, nl - line_start)).empty()) {
      if (line_start > para_start)
        paragraphs.push_back(text.substr(para_start, line_start - para_start));
      para_start = nl + 1;
    }
    line_start = nl + 1;
  }
  if (para_start < text.size()) paragraphs.push_back(text.substr(para_start));

  std::string heading;
  for (std::size_t i = 0; i < paragraphs.size(); ++i) {
    std::string_view body = trim(paragraphs[i]);
    const std::size_t nl = body.find('\n');
    const std::string_view first = trim(body.substr(0, nl));
    const bool more_lines = nl != std::string_view::npos;
    const bool last = i + 1 == paragraphs.size();
    if (first.starts_with('#') ||
        (more_lines && first.size() <= max_heading_bytes && !ends_with_punctuation(first) &&
         !is_list_item(first)) ||
        (!more_lines && !last && first.size() <= max_lone_heading_bytes &&
         !ends_with_punctuation(first) && !is_list_item(first) && !has_digit(first))) {
      heading = squeeze(first.substr(first.find_first_not_of('#') == std::string_view::npos
                                         ? first.size()
                                         : first.find_first_not_of('#')));
      body = more_lines ? body.substr(nl + 1) : std::string_view{};
    }
    std::vector<std::string> pieces;
    for (const std::string& s : sentences_of(body)) cut_long(s, pieces);
    for (std::string& piece : pieces)
      if (!fold(piece).empty()) passages.push_back({heading, std::move(piece)});
  }
  return passages;
}

std::string passage_context(const std::vector<passage>& passages, std::size_t i) {
  if (i >= passages.size()) return {};
  std::string out = passages[i].title;
  for (const std::size_t j : {i - 1, i + 1}) { // i - 1 wraps for 0 and is skipped
    if (j >= passages.size() || passages[j].title != passages[i].title) continue;
    if (!out.empty()) out += '\n';
    out += passages[j].text;
  }
  return out;
}

std::optional<std::vector<passage>> parse_qa_csv(std::string_view csv, std::vector<issue>& issues) {
  std::vector<passage> passages;
  const std::size_t issues_before = issues.size();
  std::size_t reported = 0;
  const auto report = [&](std::size_t row, std::string msg) {
    if (reported++ < max_csv_issues)
      issues.push_back(
          issue{{std::string("body"), std::string("csv"), static_cast<std::int64_t>(row)},
                std::move(msg),
                "value_error"});
  };
  const std::vector<csv_record> rows = read_csv(csv);
  bool first = true;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const csv_record& row = rows[r];
    const bool blank = row.cells.size() == 1 && trim(row.cells[0]).empty() && row.error.empty();
    if (blank) continue; // blank lines separate nothing
    if (first) {
      first = false;
      if (is_header(row)) continue;
    }
    if (!row.error.empty()) {
      report(r, row.error);
    } else if (row.cells.size() != 2) {
      report(r, "a row has exactly two cells: question and answer");
    } else if (trim(row.cells[0]).empty() || trim(row.cells[1]).empty()) {
      report(r, "the question and the answer must not be empty");
    } else {
      passages.push_back({std::string(trim(row.cells[0])), std::string(trim(row.cells[1]))});
    }
  }
  if (issues.size() != issues_before) return std::nullopt;
  return passages;
}

} // namespace crm::domain::ai
