-- A patient's answer to a reminder ("1", "sim", "cancelar"), written in the transaction that
-- stores the message and removed in the transaction that confirms or cancels the appointment
-- (or, when there is nothing to change, once the answer is settled). The schedule actor answers
-- what is left here when it loads or is woken (after a crash between the two commits, or while
-- Postgres was away), so an acknowledged answer is never lost; removing the row is what makes it
-- count once (docs/appointments.md "Answers").
CREATE TABLE reminder_answers (
  message_id      bigint PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
  tenant_id       bigint NOT NULL REFERENCES tenants (id),
  contact_id      bigint NOT NULL,
  conversation_id bigint NOT NULL,
  channel_id      bigint NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reminder_answers_tenant_idx ON reminder_answers (tenant_id, message_id);
