#include "domain/task.hpp"

#include "domain/clock.hpp"
#include "domain/json_check.hpp"

#include <boost/json.hpp>

#include <algorithm>

namespace crm::domain {

namespace json = boost::json;

namespace {

constexpr auto task_priority_names = detail::table_of<task_priority>(task_rules::priorities);
constexpr auto task_status_names = detail::table_of<task_status>(task_rules::statuses);

json::value nullable_id(const std::optional<std::int64_t>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

json::value nullable_time(const std::optional<std::int64_t>& v) {
  return v ? json::value(format_rfc3339(*v)) : json::value(nullptr);
}

failure task_not_found() {
  return failure::of(errc::not_found, "task not found");
}

bool manages(const requester& by) {
  return by.acting_role == role::manager || by.acting_role == role::admin;
}

bool is_user(const requester& by, const std::optional<std::int64_t>& id) {
  return by.user_id && id && *by.user_id == *id;
}

// Whether the task waits for its task.overdue: open, due, not fired.
bool awaits_overdue(const task& t) {
  return t.status == task_status::open && t.due_at && !t.overdue_at;
}

} // namespace

std::optional<task_priority> parse_task_priority(std::string_view s) {
  return detail::lookup(task_priority_names, s);
}
std::string_view to_string(task_priority p) {
  return detail::name_of(task_priority_names, p);
}
std::optional<task_status> parse_task_status(std::string_view s) {
  return detail::lookup(task_status_names, s);
}
std::string_view to_string(task_status s) {
  return detail::name_of(task_status_names, s);
}

json::object task_to_json(const task& t, std::int64_t now) {
  json::object o;
  o["id"] = t.id;
  o["title"] = t.title;
  o["description"] = t.description;
  o["contact_id"] = nullable_id(t.contact_id);
  o["deal_id"] = nullable_id(t.deal_id);
  o["appointment_id"] = nullable_id(t.appointment_id);
  o["assignee_id"] = nullable_id(t.assignee_id);
  o["created_by"] = nullable_id(t.created_by);
  o["due_at"] = nullable_time(t.due_at);
  o["priority"] = to_string(t.priority);
  o["status"] = to_string(t.status);
  o["overdue"] = t.overdue(now);
  o["completed_at"] = nullable_time(t.completed_at);
  o["workflow_run_id"] = nullable_id(t.workflow_run_id);
  o["created_at"] = format_rfc3339(t.created_at);
  o["updated_at"] = format_rfc3339(t.updated_at);
  return o;
}

std::string task_event(const task& t, std::int64_t now) {
  json::object o;
  o["task_id"] = t.id;
  o["task"] = task_to_json(t, now);
  o["contact_id"] = nullable_id(t.contact_id);
  o["deal_id"] = nullable_id(t.deal_id);
  o["appointment_id"] = nullable_id(t.appointment_id);
  o["tenant_id"] = t.tenant_id;
  return json::serialize(o);
}

outcome<task> task_store::get(std::int64_t id) const {
  auto it = tasks.find(id);
  if (it == tasks.end()) return task_not_found();
  return it->second;
}

page<task> task_store::list(const task_query& q, std::int64_t now, int number, int per_page) const {
  std::vector<const task*> found;
  auto keep = [&](const task& t) {
    if (q.assignee_id && t.assignee_id != q.assignee_id) return false;
    if (q.status && t.status != *q.status) return false;
    if (q.contact_id && t.contact_id != q.contact_id) return false;
    if (q.deal_id && t.deal_id != q.deal_id) return false;
    if (q.due_before && !(t.due_at && *t.due_at < *q.due_before)) return false;
    if (q.overdue && t.overdue(now) != *q.overdue) return false;
    return true;
  };
  if (q.contact_id) {
    if (auto ids = by_contact.find(*q.contact_id); ids != by_contact.end())
      for (auto id : ids->second)
        if (auto& t = tasks.at(id); keep(t)) found.push_back(&t);
  } else {
    for (auto& [id, t] : tasks)
      if (keep(t)) found.push_back(&t);
  }
  std::sort(found.begin(), found.end(), [](const task* a, const task* b) {
    if (a->due_at.has_value() != b->due_at.has_value()) return a->due_at.has_value();
    if (a->due_at && *a->due_at != *b->due_at) return *a->due_at < *b->due_at;
    return a->id < b->id;
  });
  return page_of(found, number, per_page);
}

task task_store::plan_create(task t, std::int64_t tenant, const requester& by,
                             std::int64_t now) const {
  t.id = 0;
  t.tenant_id = tenant;
  t.created_by = by.user_id;
  if (!t.assignee_id) t.assignee_id = by.user_id;
  t.completed_at = t.status == task_status::done ? std::optional(now) : std::nullopt;
  t.overdue_at.reset();
  t.created_at = t.updated_at = now;
  return t;
}

outcome<task> task_store::plan_update(std::int64_t id, const task_patch& p, const requester& by,
                                      std::int64_t now) const {
  auto found = get(id);
  if (!found) return found;
  auto& t = *found;
  if (!manages(by) && !is_user(by, t.assignee_id) && !is_user(by, t.created_by))
    return failure::of(errc::insufficient_permissions,
                       "only the task's assignee, its creator or a manager may change it");
  auto next = t;
  if (p.title) next.title = *p.title;
  if (p.description) next.description = *p.description;
  if (p.contact_id) next.contact_id = *p.contact_id;
  if (p.deal_id) next.deal_id = *p.deal_id;
  if (p.appointment_id) next.appointment_id = *p.appointment_id;
  if (p.assignee_id) next.assignee_id = *p.assignee_id;
  if (p.priority) next.priority = *p.priority;
  if (p.due_at && *p.due_at != t.due_at) {
    next.due_at = *p.due_at;
    next.overdue_at.reset(); // a new deadline: overdue once more if it passes
  }
  if (p.status && *p.status != t.status) {
    next.status = *p.status;
    next.completed_at = next.status == task_status::done ? std::optional(now) : std::nullopt;
  }
  next.updated_at = std::max(now, t.updated_at + 1);
  return next;
}

outcome<task> task_store::plan_delete(std::int64_t id, const requester& by) const {
  auto found = get(id);
  if (!found) return found;
  if (!manages(by) && !is_user(by, found->created_by))
    return failure::of(errc::insufficient_permissions,
                       "only the task's creator or a manager may delete it");
  return found;
}

std::vector<std::int64_t> task_store::due_overdue(std::int64_t now, std::size_t limit) const {
  std::vector<std::int64_t> out;
  for (auto& [due, id] : overdue_due) {
    if (due >= now || out.size() >= limit) break;
    out.push_back(id);
  }
  return out;
}

std::optional<std::int64_t> task_store::next_due() const {
  if (overdue_due.empty()) return std::nullopt;
  return overdue_due.begin()->first;
}

void task_store::put(const task& t) {
  erase(t.id);
  tasks[t.id] = t;
  if (t.contact_id) by_contact[*t.contact_id].insert(t.id);
  if (awaits_overdue(t)) overdue_due.emplace(*t.due_at, t.id);
}

void task_store::stop_waiting(std::int64_t id) {
  if (auto it = tasks.find(id); it != tasks.end() && it->second.due_at)
    overdue_due.erase({*it->second.due_at, id});
}

void task_store::erase(std::int64_t id) {
  auto it = tasks.find(id);
  if (it == tasks.end()) return;
  auto& t = it->second;
  if (t.contact_id)
    if (auto ids = by_contact.find(*t.contact_id); ids != by_contact.end()) {
      ids->second.erase(id);
      if (ids->second.empty()) by_contact.erase(ids);
    }
  if (t.due_at) overdue_due.erase({*t.due_at, id});
  tasks.erase(it);
}

void task_store::forget_contact(std::int64_t contact) {
  auto ids = by_contact.find(contact);
  if (ids == by_contact.end()) return;
  auto gone = ids->second;
  for (auto id : gone) erase(id);
}

void task_store::move_contact(std::int64_t from, std::int64_t into) {
  auto ids = by_contact.find(from);
  if (ids == by_contact.end() || from == into) return;
  auto moved = std::move(ids->second);
  by_contact.erase(ids);
  for (auto id : moved) {
    if (auto t = tasks.find(id); t != tasks.end()) t->second.contact_id = into;
    by_contact[into].insert(id);
  }
}

void task_store::forget_deal(std::int64_t deal) {
  for (auto& [id, t] : tasks)
    if (t.deal_id == deal) t.deal_id.reset();
}

} // namespace crm::domain
