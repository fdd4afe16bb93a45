// Booking through the builtin assistant (domain/ai_booking.hpp).
#include "domain/ai_booking.hpp"

#include "domain/json_parse.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <set>
#include <span>

namespace crm::domain::ai {

namespace {

namespace json = boost::json;

std::size_t lang_index(language l) {
  return static_cast<std::size_t>(l);
}

std::vector<std::string_view> words_of(std::string_view folded) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < folded.size()) {
    const std::size_t end = std::min(folded.find(' ', i), folded.size());
    if (end > i) out.push_back(folded.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

// Folded words that ask to book by themselves (verbs), and nouns that do with a word of wanting
// ("I need an appointment", "quiero un turno"): "how much is the consultation?" books nothing.
constexpr std::array<std::string_view, 9> booking_verbs = {
    "book", "marcar", "agendar", "reservar", "marco", "agendo", "reservo", "agende", "marque"};
constexpr std::array<std::string_view, 12> booking_nouns = {
    "appointment", "consulta", "consultation", "cita",  "turno",  "horario",
    "vaga",        "slot",     "booking",      "visit", "visita", "appointments"};
// Words that move an appointment by themselves, and words that do with a booking noun ("change
// my appointment"; "change my address" moves nothing).
constexpr std::array<std::string_view, 17> moving_verbs = {
    "reschedule", "rescheduling", "remarcar",    "reagendar",     "remarco",  "reagendo",
    "remarque",   "reagende",     "reprogramar", "reprogramo",    "postpone", "adiar",
    "aplazar",    "posponer",     "remarcacao",  "reagendamento", "rebook"};
constexpr std::array<std::string_view, 9> changing_words = {
    "move", "change", "cambiar", "cambio", "mudar", "trocar", "mover", "alterar", "modificar"};
constexpr std::array<std::string_view, 12> cancelling_words = {
    "cancel",       "cancelar",     "desmarcar",   "anular",    "cancela", "cancelo",
    "cancellation", "cancelamento", "cancelacion", "desmarque", "cancele", "cancelled"};
constexpr std::array<std::string_view, 16> wanting_words = {
    "want",   "like",     "need",     "get",     "quero",  "queria", "gostaria",  "preciso",
    "quiero", "quisiera", "necesito", "querria", "desejo", "deseo",  "available", "disponivel"};

bool any_of_words(const std::vector<std::string_view>& words,
                  std::span<const std::string_view> set) {
  return std::any_of(words.begin(), words.end(), [&](std::string_view w) {
    return std::find(set.begin(), set.end(), w) != set.end();
  });
}

// Folded words that may frame a choice.
constexpr std::array<std::string_view, 23> choice_words = {
    "option", "number", "n",      "the",    "i",     "choose", "take",    "please",
    "pls",    "opcao",  "numero", "a",      "o",     "quero",  "escolho", "por",
    "favor",  "la",     "el",     "quiero", "elijo", "opcion", "ok"};

constexpr std::array<std::array<std::string_view, 7>, 3> weekdays = {{
    {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"},
    {"dom", "seg", "ter", "qua", "qui", "sex", "sáb"},
    {"dom", "lun", "mar", "mié", "jue", "vie", "sáb"},
}};

} // namespace

std::string slots_to_json(const std::vector<offered_slot>& slots) {
  json::array a;
  for (const offered_slot& s : slots)
    a.push_back(json::object{{"service_id", s.service_id},
                             {"calendar_id", s.calendar_id},
                             {"start", s.start},
                             {"service_name", s.service_name},
                             {"local_start", s.local_start}});
  return json::serialize(a);
}

std::vector<offered_slot> slots_from_json(std::string_view text) {
  std::vector<offered_slot> out;
  json::error_code ec;
  const json::value v = parse_json(text, ec);
  const json::array* a = ec ? nullptr : v.if_array();
  if (a == nullptr) return out;
  for (const json::value& e : *a) {
    const json::object* o = e.if_object();
    if (o == nullptr) continue;
    offered_slot s;
    const auto num = [o](const char* k) -> std::int64_t {
      const json::value* x = o->if_contains(k);
      return x && x->is_int64() ? x->get_int64() : 0;
    };
    const auto str = [o](const char* k) -> std::string {
      const json::value* x = o->if_contains(k);
      return x && x->is_string() ? std::string(x->get_string()) : std::string();
    };
    s.service_id = num("service_id");
    s.calendar_id = num("calendar_id");
    s.start = num("start");
    s.service_name = str("service_name");
    s.local_start = str("local_start");
    if (s.service_id > 0 && s.calendar_id > 0) out.push_back(std::move(s));
  }
  return out;
}

const char* offer_kind_name(offer_kind k) {
  switch (k) {
  case offer_kind::book: return "book";
  case offer_kind::move: return "move";
  case offer_kind::cancel: return "cancel";
  }
  return "book";
}

std::optional<offer_kind> offer_kind_from(std::string_view name) {
  for (const offer_kind k : {offer_kind::book, offer_kind::move, offer_kind::cancel})
    if (name == offer_kind_name(k)) return k;
  return std::nullopt;
}

booking_request booking_request_of(std::string_view message) {
  const std::string folded = fold(message);
  const std::vector<std::string_view> words = words_of(folded);
  const bool noun = any_of_words(words, booking_nouns);
  if (any_of_words(words, moving_verbs) || (noun && any_of_words(words, changing_words)))
    return booking_request::move;
  if (any_of_words(words, cancelling_words)) return booking_request::cancel;
  if (any_of_words(words, booking_verbs) || (noun && any_of_words(words, wanting_words)))
    return booking_request::book;
  return booking_request::none;
}

std::optional<std::size_t> parse_choice(std::string_view message, std::size_t n) {
  const std::string folded = fold(message);
  std::optional<std::size_t> pick;
  for (std::string_view w : words_of(folded)) {
    if (std::find(choice_words.begin(), choice_words.end(), w) != choice_words.end()) continue;
    std::size_t k = 0;
    const auto r = std::from_chars(w.data(), w.data() + w.size(), k);
    if (r.ec != std::errc() || r.ptr != w.data() + w.size() || pick) return std::nullopt;
    pick = k;
  }
  if (!pick || *pick < 1 || *pick > n) return std::nullopt;
  return pick;
}

namespace {

// Ordinal words of the three languages, folded, and the option they name.
constexpr std::array<std::pair<std::string_view, std::size_t>, 16> ordinals = {{
    {"first", 1},
    {"1st", 1},
    {"second", 2},
    {"2nd", 2},
    {"third", 3},
    {"3rd", 3},
    {"primeiro", 1},
    {"primeira", 1},
    {"segundo", 2}, // not "segunda": in Portuguese it is Monday too ("pode ser na segunda")
    {"terceiro", 3},
    {"terceira", 3},
    {"primero", 1},
    {"primera", 1},
    {"tercero", 3},
    {"tercera", 3},
    {"1o", 1},
}};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Minutes of the day of the times written in `text` ("9:15", "09:15", "9h15", "14h", "9.15"),
// and the text with those times and dates ("2026-12-07", "07/12") blanked, so their digits are
// not read as option numbers.
std::vector<int> times_in(std::string& text, std::vector<std::string>& dates) {
  std::vector<int> out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (!is_digit(text[i]) || (i > 0 && is_digit(text[i - 1]))) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && is_digit(text[j])) ++j;
    const std::size_t digits = j - i;
    const bool sep = j < text.size() && (text[j] == ':' || text[j] == 'h' || text[j] == 'H' ||
                                         text[j] == '.' || text[j] == '-' || text[j] == '/');
    if (!sep || digits > 4) {
      i = j;
      continue;
    }
    std::size_t k = j + 1;
    while (k < text.size() && is_digit(text[k])) ++k;
    const std::size_t tail = k - (j + 1);
    const char s = text[j];
    if (s == '-' || s == '/' || (s == '.' && tail != 2)) {
      // A date (or a sentence's end after a number): blanked with what follows in its shape.
      if (s == '-' || s == '/') {
        while (k < text.size() && (is_digit(text[k]) || text[k] == '-' || text[k] == '/')) ++k;
        dates.emplace_back(text, i, k - i);
        std::fill(text.begin() + static_cast<std::ptrdiff_t>(i),
                  text.begin() + static_cast<std::ptrdiff_t>(k), ' ');
      }
      i = k;
      continue;
    }
    const bool h = s == 'h' || s == 'H';
    if (digits <= 2 && (tail == 2 || (h && tail == 0))) {
      int hour = 0, minute = 0;
      std::from_chars(text.data() + i, text.data() + j, hour);
      if (tail == 2) std::from_chars(text.data() + j + 1, text.data() + k, minute);
      if (hour < 24 && minute < 60) {
        out.push_back(hour * 60 + minute);
        std::fill(text.begin() + static_cast<std::ptrdiff_t>(i),
                  text.begin() + static_cast<std::ptrdiff_t>(k), ' ');
      }
    }
    i = k;
  }
  return out;
}

int minute_of(std::string_view local_start) { // "YYYY-MM-DD HH:MM"
  if (local_start.size() < 16) return -1;
  int hour = 0, minute = 0;
  std::from_chars(local_start.data() + 11, local_start.data() + 13, hour);
  std::from_chars(local_start.data() + 14, local_start.data() + 16, minute);
  return hour * 60 + minute;
}

// Folded words that may frame a choice in a sentence ("the second one works for me", "pode
// ser às 14h", "la tercera por favor"); any other word makes the message no choice.
constexpr std::array<std::string_view, 99> framing_words = {
    // en
    "the", "one", "option", "number", "please", "pls", "i", "id", "d", "ll", "m", "take", "choose",
    "want", "like", "would", "prefer", "works", "work", "fine", "ok", "okay", "is", "good", "great",
    "for", "me", "at", "on", "yes", "that", "this", "thanks", "thank", "you", "perfect", "let", "s",
    "go", "with", "book", "it", "slot", "time", "will", "do", "and",
    // pt
    "a", "o", "as", "os", "opcao", "numero", "quero", "queria", "escolho", "prefiro", "pode", "ser",
    "por", "favor", "sim", "obrigado", "obrigada", "essa", "esse", "esta", "este", "perfeito",
    "otimo", "fica", "bom", "horario", "marcar", "na", "de", "e", "pra", "para", "hora", "n",
    // es
    "la", "el", "las", "los", "opcion", "quiero", "quisiera", "elijo", "prefiero", "puede", "si",
    "gracias", "perfecto", "vale", "bien", "va", "reservar", "y"};

} // namespace

std::optional<std::size_t> named_option(std::string_view message,
                                        const std::vector<offered_slot>& slots) {
  std::string text(message);
  std::vector<std::string> dates;
  std::set<std::size_t> named;
  for (const int t : times_in(text, dates)) {
    bool offered = false;
    for (std::size_t i = 0; i < slots.size(); ++i)
      if (minute_of(slots[i].local_start) == t) {
        named.insert(i + 1);
        offered = true;
      }
    if (!offered) return std::nullopt; // a time that was not offered: no choice of ours
  }
  const std::string folded = fold(text);
  for (std::string_view w : words_of(folded)) {
    std::size_t k = 0;
    const auto r = std::from_chars(w.data(), w.data() + w.size(), k);
    if (r.ec == std::errc() && r.ptr == w.data() + w.size()) {
      if (k < 1 || k > slots.size()) return std::nullopt; // a number not offered
      named.insert(k);
      continue;
    }
    const auto ordinal =
        std::find_if(ordinals.begin(), ordinals.end(), [w](const auto& o) { return o.first == w; });
    if (ordinal != ordinals.end()) {
      if (ordinal->second > slots.size()) return std::nullopt;
      named.insert(ordinal->second);
    } else if (std::find(framing_words.begin(), framing_words.end(), w) == framing_words.end()) {
      return std::nullopt; // a word that does not frame a choice: a sentence, not a pick
    }
  }
  if (named.size() != 1) return std::nullopt;
  // A date written with it must be the chosen time's ("2026-12-08", "08/12" in any order).
  const std::string& chosen = slots[*named.begin() - 1].local_start;
  for (const std::string& d : dates) {
    const bool iso = d.size() == 10 && chosen.compare(0, 10, d) == 0;
    const bool day_month =
        chosen.size() >= 10 && (d == chosen.substr(8, 2) + "/" + chosen.substr(5, 2) ||
                                d == chosen.substr(5, 2) + "/" + chosen.substr(8, 2));
    if (!iso && !day_month) return std::nullopt;
  }
  return *named.begin();
}

bool confirms_cancel(std::string_view message) {
  const std::string folded = fold(message);
  const std::vector<std::string_view> words = words_of(folded);
  static constexpr std::array<std::string_view, 9> negations = {
      "no", "not", "dont", "don", "nao", "nunca", "never", "keep", "manter"};
  static constexpr std::array<std::string_view, 10> yes = {
      "yes", "sim", "si", "confirm", "confirmo", "confirmar", "ok", "sure", "claro", "1"};
  if (any_of_words(words, negations)) return false;
  return any_of_words(words, yes) || any_of_words(words, cancelling_words);
}

std::string slot_label(std::string_view local_start, language l) {
  // "YYYY-MM-DD HH:MM"
  int y = 0;
  unsigned m = 0, d = 0;
  if (local_start.size() >= 10) {
    std::from_chars(local_start.data(), local_start.data() + 4, y);
    std::from_chars(local_start.data() + 5, local_start.data() + 7, m);
    std::from_chars(local_start.data() + 8, local_start.data() + 10, d);
  }
  const std::chrono::year_month_day ymd{std::chrono::year{y}, std::chrono::month{m},
                                        std::chrono::day{d}};
  if (!ymd.ok()) return std::string(local_start);
  const std::chrono::weekday wd{std::chrono::sys_days{ymd}};
  return std::string(weekdays[lang_index(l)][wd.c_encoding()]) + " " + std::string(local_start);
}

namespace {

// "{service} on {when}" filled in.
std::string filled(std::string_view pattern, const offered_slot& s, language l) {
  std::string text(pattern);
  if (const auto at = text.find("{service}"); at != std::string::npos)
    text.replace(at, 9, s.service_name);
  if (const auto at = text.find("{when}"); at != std::string::npos)
    text.replace(at, 6, slot_label(s.local_start, l));
  return text;
}

// "\n1) Mon 2026-12-07 09:00\n2) ...\nReply with the number of the time you want."
std::string numbered(const std::vector<offered_slot>& slots, language l) {
  static constexpr std::array<std::string_view, 3> ask = {
      "Reply with the number of the time you want.",
      "Responda com o número do horário que preferir.",
      "Responda con el número del horario que prefiera."};
  std::string text;
  for (std::size_t i = 0; i < slots.size(); ++i)
    text += "\n" + std::to_string(i + 1) + ") " + slot_label(slots[i].local_start, l);
  text += "\n";
  text += ask[lang_index(l)];
  return text;
}

} // namespace

std::string offer_text(const std::vector<offered_slot>& slots, language l) {
  static constexpr std::array<std::string_view, 3> intro = {
      "I can book {service} at one of these times:",
      "Posso marcar {service} em um destes horários:",
      "Puedo reservar {service} en uno de estos horarios:"};
  std::string text(intro[lang_index(l)]);
  const std::string name = slots.empty() ? std::string() : slots.front().service_name;
  text.replace(text.find("{service}"), 9, name);
  return text + numbered(slots, l);
}

std::string booked_text(const offered_slot& s, language l) {
  static constexpr std::array<std::string_view, 3> done = {
      "Booked: {service} on {when}. See you then!", "Marcado: {service} em {when}. Até lá!",
      "Reservado: {service} el {when}. ¡Hasta entonces!"};
  return filled(done[lang_index(l)], s, l);
}

std::string no_slots_text(language l) {
  static constexpr std::array<std::string_view, 3> none = {
      "There is no free time in the next two weeks; a person from our team will help you.",
      "Não há horários livres nas próximas duas semanas; uma pessoa da nossa equipe vai ajudar "
      "você.",
      "No hay horarios libres en las próximas dos semanas; una persona de nuestro equipo le "
      "ayudará."};
  return std::string(none[lang_index(l)]);
}

std::string slot_taken_text(language l) {
  static constexpr std::array<std::string_view, 3> taken = {"That time was just taken.",
                                                            "Esse horário acabou de ser ocupado.",
                                                            "Ese horario se acaba de ocupar."};
  return std::string(taken[lang_index(l)]);
}

std::string move_offer_text(const offered_slot& current, const std::vector<offered_slot>& slots,
                            language l) {
  static constexpr std::array<std::string_view, 3> intro = {
      "Your next appointment: {service} on {when}. I can move it to one of these times:",
      "Sua próxima consulta: {service} em {when}. Posso remarcar para um destes horários:",
      "Su próxima cita: {service} el {when}. Puedo cambiarla a uno de estos horarios:"};
  return filled(intro[lang_index(l)], current, l) + numbered(slots, l);
}

std::string moved_text(const offered_slot& s, language l) {
  static constexpr std::array<std::string_view, 3> done = {
      "Moved: {service} is now on {when}. See you then!",
      "Remarcado: {service} agora em {when}. Até lá!",
      "Cambiada: {service} ahora el {when}. ¡Hasta entonces!"};
  return filled(done[lang_index(l)], s, l);
}

std::string cancel_offer_text(const offered_slot& current, language l) {
  static constexpr std::array<std::string_view, 3> ask = {
      "Your next appointment: {service} on {when}. Reply 1 to cancel it.",
      "Sua próxima consulta: {service} em {when}. Responda 1 para cancelar.",
      "Su próxima cita: {service} el {when}. Responda 1 para cancelarla."};
  return filled(ask[lang_index(l)], current, l);
}

std::string cancelled_text(const offered_slot& s, language l) {
  static constexpr std::array<std::string_view, 3> done = {"Cancelled: {service} on {when}.",
                                                           "Cancelado: {service} em {when}.",
                                                           "Cancelada: {service} el {when}."};
  return filled(done[lang_index(l)], s, l);
}

std::string no_appointment_text(language l) {
  static constexpr std::array<std::string_view, 3> none = {
      "I could not find an upcoming appointment of yours; a person from our team will help you.",
      "Não encontrei uma consulta sua marcada; uma pessoa da nossa equipe vai ajudar você.",
      "No encontré una cita suya próxima; una persona de nuestro equipo le ayudará."};
  return std::string(none[lang_index(l)]);
}

} // namespace crm::domain::ai
