// Tasks (contract §11, docs/tasks.md): what someone at the clinic must do, and by when ("call
// back with the lab result"), optionally about a contact, a deal or an appointment. The tasks
// actor's store: its state and rules, unit-tested without an actor.
#pragma once
#include "domain/failure.hpp"
#include "domain/page.hpp"
#include "domain/user.hpp"

#include <boost/json/fwd.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crm::domain {

enum class task_priority : std::uint8_t { low, normal, high };
enum class task_status : std::uint8_t { open, done, cancelled };

std::optional<task_priority> parse_task_priority(std::string_view s);
std::string_view to_string(task_priority p);
std::optional<task_status> parse_task_status(std::string_view s);
std::string_view to_string(task_status s);

struct task {
  std::int64_t id = 0;
  std::int64_t tenant_id = 0;
  std::string title;
  std::string description;
  std::optional<std::int64_t> contact_id;
  std::optional<std::int64_t> deal_id;
  std::optional<std::int64_t> appointment_id;
  std::optional<std::int64_t> assignee_id;
  std::optional<std::int64_t> created_by; // none: an API key or a workflow
  std::optional<std::int64_t> due_at;     // µs
  task_priority priority = task_priority::normal;
  task_status status = task_status::open;
  std::optional<std::int64_t> completed_at; // set while status is done
  // When task.overdue fired for the current due_at (a new due_at clears it).
  std::optional<std::int64_t> overdue_at;
  // A task a workflow's create_task step made: the run and the step (one task per step, even
  // when the step runs again after a crash).
  std::optional<std::int64_t> workflow_run_id;
  int workflow_step = 0;
  std::int64_t created_at = 0; // µs
  std::int64_t updated_at = 0;

  // Open, with a due time before `now`.
  bool overdue(std::int64_t now) const {
    return status == task_status::open && due_at && *due_at < now;
  }
};

// The rules of a task's fields, named once for the reader and the OpenAPI schema.
namespace task_rules {
inline constexpr std::size_t title_max = 200;         // characters
inline constexpr std::size_t description_max = 10000; // characters
inline constexpr std::array<std::string_view, 3> priorities{"low", "normal", "high"};
inline constexpr std::array<std::string_view, 3> statuses{"open", "done", "cancelled"};
} // namespace task_rules

// `now` decides `overdue`.
boost::json::object task_to_json(const task& t, std::int64_t now);
// The outbox payload of task.overdue: {"task_id", "task", "contact_id", "deal_id",
// "appointment_id", "tenant_id"} (the links null when absent).
std::string task_event(const task& t, std::int64_t now);

// A change; absent members stay, an inner empty optional clears the link (or the due time).
struct task_patch {
  std::optional<std::string> title;
  std::optional<std::string> description;
  std::optional<std::optional<std::int64_t>> contact_id;
  std::optional<std::optional<std::int64_t>> deal_id;
  std::optional<std::optional<std::int64_t>> appointment_id;
  std::optional<std::optional<std::int64_t>> assignee_id;
  std::optional<std::optional<std::int64_t>> due_at;
  std::optional<task_priority> priority;
  std::optional<task_status> status;
};

struct task_query {
  std::optional<std::int64_t> assignee_id;
  std::optional<task_status> status;
  std::optional<std::int64_t> contact_id;
  std::optional<std::int64_t> deal_id;
  std::optional<std::int64_t> due_before; // due_at < this
  std::optional<bool> overdue;            // open and due before now (false: not so)
};

struct task_store {
  std::map<std::int64_t, task> tasks;                          // by id
  std::map<std::int64_t, std::set<std::int64_t>> by_contact;   // contact → its task ids
  std::set<std::pair<std::int64_t, std::int64_t>> overdue_due; // (due_at, id): open, not fired
  // Whether anyone listens to task events (an active workflow or webhook subscription).
  bool event_listeners = false;

  outcome<task> get(std::int64_t id) const;
  // Filtered; by due time (those without one last), then by id.
  page<task> list(const task_query& q, std::int64_t now, int number, int per_page) const;

  // What a change would store, or why it may not (pure: nothing changes here). The assignee
  // defaults to the creator.
  task plan_create(task t, std::int64_t tenant, const requester& by, std::int64_t now) const;
  // The assignee, the creator, a manager or an admin may change a task (else 403). Done sets
  // completed_at, any other status clears it; a new due_at lets task.overdue fire again.
  outcome<task> plan_update(std::int64_t id, const task_patch& p, const requester& by,
                            std::int64_t now) const;
  // The creator, a manager or an admin.
  outcome<task> plan_delete(std::int64_t id, const requester& by) const;

  // Open tasks whose due time passed by `now` and whose task.overdue has not fired, oldest
  // due first (at most `limit`).
  std::vector<std::int64_t> due_overdue(std::int64_t now, std::size_t limit) const;
  // The earliest due time among the open tasks whose task.overdue has not fired (none:
  // nothing to wait for).
  std::optional<std::int64_t> next_due() const;

  // Committed changes, applied to memory.
  void put(const task& t);
  // Task `id` is no longer waited for (its marking found it changed or gone in Postgres).
  void stop_waiting(std::int64_t id);
  void erase(std::int64_t id);
  // A contact deleted or erased: its tasks went with it (ON DELETE CASCADE).
  void forget_contact(std::int64_t contact);
  // A contact merged into another: its tasks are the survivor's now.
  void move_contact(std::int64_t from, std::int64_t into);
  // A deal deleted: its tasks stay, unlinked (ON DELETE SET NULL).
  void forget_deal(std::int64_t deal);
};

} // namespace crm::domain
