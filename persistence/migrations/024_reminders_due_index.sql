-- The reminder sweeper (persistence::tenants_with_due_reminders, every second on every node)
-- reads, for each service with reminders, its live appointments starting within that
-- reminder's lead: a range of this index each, instead of a scan of every appointment of every
-- tenant (33 ms over 400,000 appointments against 4 ms for the 600 due, measured on 2026-11-28;
-- the scan grows with the table, the range with the appointments due). Each booking pays one
-- more B-tree entry.
CREATE INDEX appointments_due_idx ON appointments (service_id, starts_at)
  WHERE status IN ('booked', 'confirmed');
