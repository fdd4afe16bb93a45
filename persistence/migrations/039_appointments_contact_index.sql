-- appointments_contact_idx (contact_id) is a prefix of appointments_timeline_idx (contact_id,
-- created_at, id, migration 035), which serves every look-up by contact (the timeline, a
-- contact's appointments, the cascade of a contact's deletion) as well. A booking paid for both:
-- one B-tree insert a row more in the batch INSERT (within noise in benchmarks/appointments,
-- benchmarks/RESULTS.md 2026-11-29T18:52Z-19:02Z, but nothing needs it).
DROP INDEX appointments_contact_idx;
