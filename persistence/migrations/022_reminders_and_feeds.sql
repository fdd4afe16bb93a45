-- Appointment reminders and calendar feeds (contract §10, docs/appointments.md).
--
-- A reminder is sent once: the row keyed by (appointment, the reminder's before_minutes, start) is
-- inserted in the transaction that queues the message (or records why it was skipped), so a
-- second attempt by this node after a restart, or by another node after a failover, finds it
-- and sends nothing. A reschedule gives the appointment a new start, and new reminders.
CREATE TABLE appointment_reminders (
  appointment_id  bigint NOT NULL REFERENCES appointments (id) ON DELETE CASCADE,
  before_minutes  integer NOT NULL,
  starts_at       timestamptz NOT NULL,
  tenant_id       bigint NOT NULL REFERENCES tenants (id),
  status          text NOT NULL CHECK (status IN ('sent', 'skipped')),
  reason          text,
  message_id      bigint,
  conversation_id bigint,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (appointment_id, before_minutes, starts_at)
);
CREATE INDEX appointment_reminders_conversation_idx ON appointment_reminders (conversation_id)
  WHERE conversation_id IS NOT NULL;
-- The sweeper looks for tenants with a reminder due among the appointments still to come.
CREATE INDEX appointments_live_start_idx ON appointments (starts_at)
  WHERE status IN ('booked', 'confirmed');

-- feed.ics: the keyed hash of the calendar's feed token (the token itself is shown once), and
-- whether the feed shows patients' names.
ALTER TABLE calendars ADD COLUMN feed_token_hash text,
  ADD COLUMN feed_shows_names boolean NOT NULL DEFAULT false;
