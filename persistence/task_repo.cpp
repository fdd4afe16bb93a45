#include "persistence/task_repo.hpp"

#include "persistence/audit_repo.hpp"
#include "persistence/contact_repo.hpp"
#include "persistence/fence.hpp"
#include "persistence/pg_pool.hpp"
#include "persistence/record_rows.hpp"
#include "persistence/row_values.hpp"
#include "persistence/tx_batch.hpp"

#include <pqxx/pqxx>

namespace crm::persistence {
namespace rows {

const char* const task_columns =
    "id, tenant_id, title, description, contact_id, deal_id, appointment_id, assignee_id,"
    " created_by, " CRM_MICROS("due_at") ", priority, status, " CRM_MICROS(
        "completed_at") ", " CRM_MICROS("overdue_at") ", workflow_run_id, "
                                                      "workflow_step, " CRM_MICROS(
                                                          "created_at") ","
                                                                        " " CRM_MICROS(
                                                                            "updated_at");

domain::task to_task(const pqxx::row& r) {
  domain::task t;
  t.id = r[0].as<std::int64_t>();
  t.tenant_id = r[1].as<std::int64_t>();
  t.title = r[2].as<std::string>();
  t.description = r[3].as<std::string>();
  t.contact_id = opt_int(r[4]);
  t.deal_id = opt_int(r[5]);
  t.appointment_id = opt_int(r[6]);
  t.assignee_id = opt_int(r[7]);
  t.created_by = opt_int(r[8]);
  t.due_at = opt_int(r[9]);
  t.priority =
      domain::parse_task_priority(r[10].as<std::string>()).value_or(domain::task_priority::normal);
  t.status = domain::parse_task_status(r[11].as<std::string>()).value_or(domain::task_status::open);
  t.completed_at = opt_int(r[12]);
  t.overdue_at = opt_int(r[13]);
  t.workflow_run_id = opt_int(r[14]);
  t.workflow_step = r[15].as<int>();
  t.created_at = r[16].as<std::int64_t>();
  t.updated_at = r[17].as<std::int64_t>();
  return t;
}

} // namespace rows
using rows::task_columns;
using rows::to_task;

namespace {

// A nullable bigint or timestamptz parameter, as text ('' is NULL: NULLIF($n, '')).
std::string id_text(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string();
}
std::string time_text(const std::optional<std::int64_t>& v) {
  return v ? ts(*v) : std::string();
}

// The audit rows of a change of `t`: a touch of its patient's record, or of the task when it
// is about nobody.
std::vector<domain::audit_record> naming(std::vector<domain::audit_record> rows,
                                         const domain::task& t) {
  for (auto& row : rows) {
    row.resource = t.contact_id ? "contact" : "task";
    row.resource_id = t.contact_id ? *t.contact_id : t.id;
  }
  return rows;
}

domain::failure gone() {
  return domain::failure::of(domain::errc::not_found, "task not found");
}

// The links of `t` checked (and locked against a delete until COMMIT); `t.contact_id` becomes
// the appointment's patient when only the appointment is named.
std::vector<domain::issue> check_links(pqxx::work& tx, domain::task& t) {
  std::vector<domain::issue> issues;
  auto missing = [&](const char* field, std::string msg) {
    issues.push_back({{"body", field}, std::move(msg), "value_error"});
  };
  auto held = [&](const char* table, std::int64_t id) {
    return !tx.exec_params(std::string("SELECT 1 FROM ") + table +
                               " WHERE tenant_id = $1 AND id = $2 FOR KEY SHARE",
                           t.tenant_id, id)
                .empty();
  };
  if (t.appointment_id) {
    auto r = tx.exec_params("SELECT contact_id FROM appointments WHERE tenant_id = $1 AND id = $2"
                            " FOR KEY SHARE",
                            t.tenant_id, *t.appointment_id);
    if (r.empty()) {
      missing("appointment_id", "appointment not found in this tenant");
    } else {
      auto patient = r.front()[0].as<std::int64_t>();
      if (!t.contact_id)
        t.contact_id = patient;
      else if (*t.contact_id != patient)
        missing("contact_id", "a task about an appointment is about its patient: contact_id "
                              "must be the appointment's (" +
                                  std::to_string(patient) + ")");
    }
  }
  if (t.contact_id && !held("contacts", *t.contact_id))
    missing("contact_id", "contact not found in this tenant");
  if (t.deal_id && !held("deals", *t.deal_id)) missing("deal_id", "deal not found in this tenant");
  if (t.assignee_id &&
      tx.exec_params("SELECT 1 FROM users WHERE tenant_id = $1 AND id = $2 AND is_active",
                     t.tenant_id, *t.assignee_id)
          .empty())
    missing("assignee_id", "assignee_id must be an active user of the tenant");
  return issues;
}

} // namespace

domain::task_store load_tasks(pg_conn& c, std::int64_t tenant_id) {
  pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx(c.raw());
  domain::task_store s;
  s.event_listeners = has_event_listeners(tx, tenant_id);
  for (auto r : tx.exec_params(std::string("SELECT ") + task_columns +
                                   " FROM tasks WHERE tenant_id = $1 ORDER BY id",
                               tenant_id))
    s.put(to_task(r));
  return s;
}

std::optional<std::int64_t> tenant_of_task(pg_conn& c, std::int64_t id) {
  return tenant_of_row(c.raw(), "tasks", id);
}

domain::outcome<domain::task> insert_task(pg_conn& c, const domain::task& planned,
                                          const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, planned.tenant_id);
  auto t = planned;
  if (auto issues = check_links(tx, t); !issues.empty())
    return domain::failure::invalid(std::move(issues));
  auto r = tx.exec_params(
      std::string("INSERT INTO tasks (tenant_id, title, description, contact_id, deal_id,"
                  " appointment_id, assignee_id, created_by, due_at, priority, status,"
                  " completed_at, workflow_run_id, workflow_step, created_at, updated_at)"
                  " VALUES ($1, $2, $3, NULLIF($4, '')::bigint, NULLIF($5, '')::bigint,"
                  " NULLIF($6, '')::bigint, NULLIF($7, '')::bigint, NULLIF($8, '')::bigint,"
                  " NULLIF($9, '')::timestamptz, $10, $11, NULLIF($12, '')::timestamptz,"
                  " NULLIF($13, '')::bigint, $14, $15::timestamptz, $15::timestamptz)"
                  " ON CONFLICT (workflow_run_id, workflow_step) WHERE workflow_run_id IS NOT NULL"
                  " DO NOTHING RETURNING ") +
          task_columns,
      t.tenant_id, t.title, t.description, id_text(t.contact_id), id_text(t.deal_id),
      id_text(t.appointment_id), id_text(t.assignee_id), id_text(t.created_by), time_text(t.due_at),
      std::string(domain::to_string(t.priority)), std::string(domain::to_string(t.status)),
      time_text(t.completed_at), id_text(t.workflow_run_id), t.workflow_step, ts(t.created_at));
  if (r.empty()) {
    // The workflow step ran again: its task is the one it made the first time.
    auto existing = tx.exec_params(std::string("SELECT ") + task_columns +
                                       " FROM tasks WHERE workflow_run_id = $1"
                                       " AND workflow_step = $2",
                                   id_text(t.workflow_run_id), t.workflow_step);
    if (existing.empty()) return gone();
    return to_task(existing.front());
  }
  auto saved = to_task(r.front());
  insert_audit(tx, naming(audit, saved));
  tx.commit();
  return saved;
}

domain::outcome<domain::task> update_task(pg_conn& c, const domain::task& planned,
                                          const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, planned.tenant_id);
  auto t = planned;
  if (auto issues = check_links(tx, t); !issues.empty())
    return domain::failure::invalid(std::move(issues));
  auto r = tx.exec_params(
      std::string("UPDATE tasks SET title = $3, description = $4,"
                  " contact_id = NULLIF($5, '')::bigint, deal_id = NULLIF($6, '')::bigint,"
                  " appointment_id = NULLIF($7, '')::bigint, assignee_id = NULLIF($8, '')::bigint,"
                  " due_at = NULLIF($9, '')::timestamptz, priority = $10, status = $11,"
                  " completed_at = NULLIF($12, '')::timestamptz,"
                  " overdue_at = NULLIF($13, '')::timestamptz, updated_at = $14::timestamptz"
                  " WHERE tenant_id = $1 AND id = $2 RETURNING ") +
          task_columns,
      t.tenant_id, t.id, t.title, t.description, id_text(t.contact_id), id_text(t.deal_id),
      id_text(t.appointment_id), id_text(t.assignee_id), time_text(t.due_at),
      std::string(domain::to_string(t.priority)), std::string(domain::to_string(t.status)),
      time_text(t.completed_at), time_text(t.overdue_at), ts(t.updated_at));
  if (r.empty()) return gone();
  auto saved = to_task(r.front());
  insert_audit(tx, naming(audit, saved));
  tx.commit();
  return saved;
}

domain::outcome<domain::task> delete_task(pg_conn& c, const domain::task& t,
                                          const std::vector<domain::audit_record>& audit) {
  pqxx::work tx(c.raw());
  fence(tx, t.tenant_id);
  auto r = tx.exec_params("DELETE FROM tasks WHERE tenant_id = $1 AND id = $2", t.tenant_id, t.id);
  if (r.affected_rows() == 0) return gone();
  insert_audit(tx, naming(audit, t));
  tx.commit();
  return t;
}

std::vector<domain::task> mark_tasks_overdue(pg_conn& c, std::int64_t tenant_id,
                                             const std::vector<std::int64_t>& ids, std::int64_t now,
                                             bool emit) {
  pqxx::work tx(c.raw());
  fence(tx, tenant_id);
  array_literal wanted;
  for (auto id : ids) wanted.add_number(id);
  std::vector<domain::task> marked;
  for (auto r : tx.exec_params(std::string("UPDATE tasks SET overdue_at = $3::timestamptz"
                                           " WHERE tenant_id = $1 AND id = ANY($2::bigint[])"
                                           " AND status = 'open' AND overdue_at IS NULL"
                                           " AND due_at < $3::timestamptz RETURNING ") +
                                   task_columns,
                               tenant_id, wanted.text(), ts(now)))
    marked.push_back(to_task(r));
  if (emit && !marked.empty()) {
    array_literal payloads;
    for (auto& t : marked) payloads.add(domain::task_event(t, now));
    tx.exec_params("INSERT INTO outbox (tenant_id, event, payload, depth) SELECT $1,"
                   " 'task.overdue', p::jsonb, 0 FROM unnest($2::text[]) AS p",
                   tenant_id, payloads.text());
  }
  tx.commit();
  return marked;
}

std::vector<std::int64_t> tenants_with_overdue_tasks(pg_conn& c) {
  pqxx::read_transaction tx(c.raw());
  return first_ids(tx.exec("SELECT DISTINCT tenant_id FROM tasks WHERE status = 'open'"
                           " AND overdue_at IS NULL AND due_at < now()"));
}

} // namespace crm::persistence
