// Booking through the builtin assistant (domain/ai_booking.hpp).
#include "domain/ai_booking.hpp"

#include "domain/json_parse.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
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
constexpr std::array<std::string_view, 8> booking_nouns = {
    "appointment", "consulta", "consultation", "cita", "turno", "horario", "vaga", "slot"};
constexpr std::array<std::string_view, 16> moving_words = {
    "cancel",    "cancelar",     "desmarcar",    "anular",     "reschedule", "remarcar",
    "reagendar", "cambiar",      "mudar",        "move",       "change",     "cancela",
    "cancelo",   "cancellation", "cancelamento", "cancelacion"};
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
constexpr std::array<std::string_view, 24> choice_words = {
    "option", "number", "no",    "n",      "the",    "i",     "choose", "take",
    "please", "pls",    "opcao", "numero", "a",      "o",     "quero",  "escolho",
    "por",    "favor",  "la",    "el",     "quiero", "elijo", "opcion", "ok"};

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

bool asks_to_book(std::string_view message) {
  const std::string folded = fold(message);
  const std::vector<std::string_view> words = words_of(folded);
  if (any_of_words(words, moving_words)) return false; // a person moves or cancels for now
  return any_of_words(words, booking_verbs) ||
         (any_of_words(words, booking_nouns) && any_of_words(words, wanting_words));
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

std::string offer_text(const std::vector<offered_slot>& slots, language l) {
  static constexpr std::array<std::string_view, 3> intro = {
      "I can book {service} at one of these times:",
      "Posso marcar {service} em um destes horários:",
      "Puedo reservar {service} en uno de estos horarios:"};
  static constexpr std::array<std::string_view, 3> ask = {
      "Reply with the number of the time you want.",
      "Responda com o número do horário que preferir.",
      "Responda con el número del horario que prefiera."};
  std::string text(intro[lang_index(l)]);
  const std::string name = slots.empty() ? std::string() : slots.front().service_name;
  text.replace(text.find("{service}"), 9, name);
  for (std::size_t i = 0; i < slots.size(); ++i)
    text += "\n" + std::to_string(i + 1) + ") " + slot_label(slots[i].local_start, l);
  text += "\n";
  text += ask[lang_index(l)];
  return text;
}

std::string booked_text(const offered_slot& s, language l) {
  static constexpr std::array<std::string_view, 3> done = {
      "Booked: {service} on {when}. See you then!", "Marcado: {service} em {when}. Até lá!",
      "Reservado: {service} el {when}. ¡Hasta entonces!"};
  std::string text(done[lang_index(l)]);
  text.replace(text.find("{service}"), 9, s.service_name);
  text.replace(text.find("{when}"), 6, slot_label(s.local_start, l));
  return text;
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

} // namespace crm::domain::ai
