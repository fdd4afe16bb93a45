-- The reminder sweeper (persistence::tenants_with_due_reminders, every second on every node)
-- reads, for each service with reminders, its live appointments starting within that
-- reminder's lead: a range of this index each. It read before the live appointments of every
-- service starting within the longest lead of any (appointments_live_start_idx), so one
-- tenant's 30-day reminder made it read a month of every tenant's appointments: 36,000 rows and
-- 12-14 ms against 1,550 rows and 2.3-2.5 ms, over 400,000 appointments of which 1 % had a
-- 30-day reminder and the rest a 1-day one (measured 2026-11-28). This index replaces that one:
-- a booking still pays one partial B-tree entry.
DROP INDEX appointments_live_start_idx;
CREATE INDEX appointments_due_idx ON appointments (service_id, starts_at)
  WHERE status IN ('booked', 'confirmed');
