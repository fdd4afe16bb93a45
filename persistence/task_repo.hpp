// Tasks (migration 032, domain/task.hpp): the tasks actor's load and its writes, each in one
// transaction with its audit rows and the tenant's fence.
#pragma once
#include "domain/audit.hpp"
#include "domain/task.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace crm::persistence {

class pg_conn;

domain::task_store load_tasks(pg_conn& c, std::int64_t tenant_id);
std::optional<std::int64_t> tenant_of_task(pg_conn& c, std::int64_t id);

// The links a write names are checked in its transaction (and held there against a concurrent
// delete): a contact, deal or appointment that is not the tenant's, or an assignee who is not
// an active user of it, is a 422 at body.<field>. A task about an appointment is about its
// patient: contact_id is the appointment's (another contact is a 422).
// The task as stored (id from the database). A task of a workflow step that exists already
// (the step ran again) is that task, unchanged.
domain::outcome<domain::task> insert_task(pg_conn& c, const domain::task& t,
                                          const std::vector<domain::audit_record>& audit);
// Every field but the creator and the source; not_found when the task is gone.
domain::outcome<domain::task> update_task(pg_conn& c, const domain::task& t,
                                          const std::vector<domain::audit_record>& audit);
domain::outcome<domain::task> delete_task(pg_conn& c, const domain::task& t,
                                          const std::vector<domain::audit_record>& audit);

// task.overdue for tasks `ids` of the tenant that are still open, unfired and due by `now`:
// marked in one transaction, with their events in the outbox when `emit`. The tasks marked, as
// stored.
std::vector<domain::task> mark_tasks_overdue(pg_conn& c, std::int64_t tenant_id,
                                             const std::vector<std::int64_t>& ids, std::int64_t now,
                                             bool emit);

// Tenants with an open task due and not yet marked overdue (the sweeper wakes their tasks
// actor, when it is not live).
std::vector<std::int64_t> tenants_with_overdue_tasks(pg_conn& c);

} // namespace crm::persistence
