// A schedule's reminders and the patients' answers to them (docs/appointments.md "Reminders",
// "Answers"): which reminders have come due, what an answer says, and what it changes.
#include "domain/consent.hpp"
#include "domain/placeholders.hpp"
#include "domain/schedule.hpp"

#include <algorithm>
#include <limits>

namespace crm::domain {
namespace {

// (Named apart from schedule.cpp's minute_us: the two may share a unity translation unit.)
constexpr std::int64_t one_minute_us = 60'000'000;

std::string_view trimmed(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' ||
                        s.back() == '\r' || s.back() == '.' || s.back() == '!'))
    s.remove_suffix(1);
  return s;
}

// ASCII letters lowered; the accented letters of the answers (UTF-8 "Í", "Ã") lowered too.
std::string folded(std::string_view s) {
  std::string out(s);
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto c = static_cast<unsigned char>(out[i]);
    if (c >= 'A' && c <= 'Z') out[i] = static_cast<char>(c - 'A' + 'a');
    // U+00C0..U+00DE (C3 80..C3 9E) lower to U+00E0..U+00FE (C3 A0..C3 BE).
    if (c == 0xC3 && i + 1 < out.size()) {
      auto d = static_cast<unsigned char>(out[i + 1]);
      if (d >= 0x80 && d <= 0x9E && d != 0x97) out[i + 1] = static_cast<char>(d + 0x20);
      ++i;
    }
  }
  return out;
}

} // namespace

reminder_answer read_reminder_answer(std::string_view text) {
  auto word = folded(trimmed(text));
  for (std::string_view yes :
       {"1", "yes", "y", "sim", "s\xc3\xad", "si", "confirm", "confirmo", "confirmar", "ok"})
    if (word == yes) return reminder_answer::confirm;
  for (std::string_view no :
       {"2", "no", "n\xc3\xa3o", "nao", "cancel", "cancelar", "cancelo", "desmarcar"})
    if (word == no) return reminder_answer::cancel;
  return reminder_answer::none;
}

std::string reminder_acknowledgement(std::string_view answer_text, reminder_answer a,
                                     std::string_view start_local, bool changed) {
  auto word = folded(trimmed(answer_text));
  enum { en, pt, es } lang = en;
  if (word == "sim" || word == "n\xc3\xa3o" || word == "nao" || word == "cancelar" ||
      word == "confirmo" || word == "confirmar" || word == "cancelo" || word == "desmarcar")
    lang = pt;
  else if (word == "s\xc3\xad" || word == "si")
    lang = es;
  auto when = std::string(start_local);
  if (when.empty()) {
    if (lang == pt) return "Não encontramos nenhuma consulta marcada para responder.";
    if (lang == es) return "No encontramos ninguna cita pendiente.";
    return "We found no upcoming appointment to answer for.";
  }
  if (a == reminder_answer::confirm) {
    if (lang == pt) return "Obrigado! Sua consulta de " + when + " está confirmada.";
    if (lang == es) return "¡Gracias! Su cita del " + when + " está confirmada.";
    return changed ? "Thank you! Your appointment on " + when + " is confirmed."
                   : "Your appointment on " + when + " is confirmed.";
  }
  if (lang == pt) return "Sua consulta de " + when + " foi cancelada.";
  if (lang == es) return "Su cita del " + when + " fue cancelada.";
  return "Your appointment on " + when + " is cancelled.";
}

std::string render_reminder(std::string_view text, const reminder_values& v) {
  return fill_placeholders(text, [&v](std::string_view name) -> std::optional<std::string> {
    if (name == "appointment.start_local") return v.start_local;
    if (name == "contact.first_name") return v.first_name;
    if (name == "service.name") return v.service_name;
    if (name == "calendar.name") return v.calendar_name;
    return std::nullopt;
  });
}

std::vector<due_reminder> schedule_store::due_reminders(std::int64_t now) const {
  std::vector<due_reminder> out;
  // Only appointments within the longest reminder's reach can have one due (none when no
  // service has reminders: then nothing is scanned, however many appointments are to come).
  int longest = -1;
  for (auto& [id, s] : services)
    for (auto& rule : s.reminders) longest = std::max(longest, rule.before_minutes);
  if (longest < 0) return out;
  const std::int64_t reach = std::int64_t(longest) * one_minute_us;
  for (auto it = by_start.upper_bound({now, std::numeric_limits<std::int64_t>::max()});
       it != by_start.end() && it->first <= now + reach; ++it) {
    auto& a = appointments.at(it->second);
    if (a.status != appointment_status::booked && a.status != appointment_status::confirmed)
      continue;
    auto s = services.find(a.service_id);
    if (s == services.end()) continue;
    // The nearest the start of the reminders whose time has come.
    int nearest = std::numeric_limits<int>::max();
    for (auto& rule : s->second.reminders)
      if (a.start - std::int64_t(rule.before_minutes) * one_minute_us <= now)
        nearest = std::min(nearest, rule.before_minutes);
    for (auto& rule : s->second.reminders) {
      auto due = a.start - std::int64_t(rule.before_minutes) * one_minute_us;
      if (due > now) continue; // not yet
      reminder_key key{a.id, rule.before_minutes, a.start};
      if (reminders_done.count(key) || reminders_out.count(key)) continue;
      due_reminder d;
      d.key = key;
      d.superseded = rule.before_minutes != nearest;
      d.contact_id = a.contact_id;
      d.rule = rule;
      d.service_name = s->second.name;
      auto c = calendars.find(a.calendar_id);
      if (c != calendars.end()) {
        d.calendar_name = c->second.name;
        d.start_local = local_time_text(a.start, c->second.time_zone);
      } else {
        d.start_local = local_time_text(a.start, "UTC");
      }
      out.push_back(std::move(d));
    }
  }
  return out;
}

void schedule_store::forget_past_reminders(std::int64_t now) {
  if (now - reminders_pruned_at < one_minute_us) return;
  reminders_pruned_at = now;
  std::erase_if(reminders_done, [now](const reminder_key& k) { return k.start <= now; });
}

std::optional<appointment> schedule_store::next_live(std::int64_t contact, std::int64_t now) const {
  auto c = by_contact.find(contact);
  if (c == by_contact.end()) return std::nullopt;
  for (auto it = c->second.upper_bound({now, std::numeric_limits<std::int64_t>::max()});
       it != c->second.end(); ++it) {
    auto& a = appointments.at(it->second);
    if (a.status == appointment_status::booked || a.status == appointment_status::confirmed)
      return a;
  }
  return std::nullopt;
}

outcome<answer_plan> schedule_store::plan_answer(const patient_answer& m, std::int64_t now) const {
  answer_plan p;
  auto what = read_reminder_answer(m.text);
  if (what == reminder_answer::none) return p;
  auto next = next_live(m.contact_id, m.received_at > 0 ? m.received_at : now);
  if (!next && is_stop_request(m.text)) {
    p.what = answer_plan::step::stop;
    return p;
  }
  if (!next) {
    p.ack = reminder_acknowledgement(m.text, what, {}, false);
    return p;
  }
  auto cal = calendars.find(next->calendar_id);
  auto when = local_time_text(next->start, cal != calendars.end() ? cal->second.time_zone : "UTC");
  bool confirm = what == reminder_answer::confirm;
  if (confirm && next->status == appointment_status::confirmed) {
    p.ack = reminder_acknowledgement(m.text, what, when, false);
    return p;
  }
  auto change = confirm ? plan_status(next->id, appointment_status::confirmed, std::nullopt, now)
                        : plan_cancel(next->id, std::string("the patient answered the reminder"),
                                      appointment_source::patient_reply, now);
  if (!change) return change.error();
  p.what = answer_plan::step::change;
  p.change = std::move(*change);
  p.change.source = appointment_source::patient_reply;
  p.event = status_event(p.change.status);
  p.action = confirm ? "update_appointment" : "cancel_appointment";
  p.ack = reminder_acknowledgement(m.text, what, when, true);
  return p;
}

} // namespace crm::domain
