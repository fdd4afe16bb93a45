-- Tasks (contract §11, docs/tasks.md): what someone at the clinic must do and by when,
-- optionally about a contact, a deal or an appointment. A task about a contact goes with it (a
-- delete or an erasure); a deleted deal leaves its tasks unlinked. A task about an appointment
-- is about the appointment's patient (contact_id is the appointment's), so it goes with them.
-- overdue_at: when task.overdue fired for the current due_at (a new due_at clears it), so it
-- fires once, across restarts. workflow_run_id and workflow_step: the create_task step that
-- made it (one task per step, even when the step runs again).
CREATE TABLE tasks (
  id               bigserial PRIMARY KEY,
  tenant_id        bigint NOT NULL REFERENCES tenants (id),
  title            text NOT NULL,
  description      text NOT NULL DEFAULT '',
  contact_id       bigint REFERENCES contacts (id) ON DELETE CASCADE,
  deal_id          bigint REFERENCES deals (id) ON DELETE SET NULL,
  appointment_id   bigint REFERENCES appointments (id) ON DELETE SET NULL,
  assignee_id      bigint REFERENCES users (id) ON DELETE SET NULL,
  created_by       bigint,
  due_at           timestamptz,
  priority         text NOT NULL CHECK (priority IN ('low', 'normal', 'high')),
  status           text NOT NULL CHECK (status IN ('open', 'done', 'cancelled')),
  completed_at     timestamptz,
  overdue_at       timestamptz,
  workflow_run_id  bigint,
  workflow_step    integer NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);
CREATE INDEX tasks_tenant_idx ON tasks (tenant_id, id);
CREATE INDEX tasks_contact_idx ON tasks (contact_id);
CREATE INDEX tasks_deal_idx ON tasks (deal_id);
CREATE INDEX tasks_appointment_idx ON tasks (appointment_id);
-- The sweeper's question every second: which tenants have a task whose task.overdue is due.
CREATE INDEX tasks_overdue_idx ON tasks (due_at) WHERE status = 'open' AND overdue_at IS NULL;
CREATE UNIQUE INDEX tasks_workflow_step_key ON tasks (workflow_run_id, workflow_step)
  WHERE workflow_run_id IS NOT NULL;
