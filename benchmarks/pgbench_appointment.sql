-- One booking's row alone, as carecrm's batch INSERT writes it (the same table: the exclusion
-- constraint, the foreign keys, the indexes), one transaction each, each on a slot of its own:
-- the table's own ceiling beside pgbench's bare one-row INSERT (benchmarks/appointments).
INSERT INTO appointments (tenant_id, contact_id, service_id, calendar_id, starts_at, ends_at,
  blocked_until, status, notes, source, created_at, updated_at)
SELECT :tenant, :contact, :service, ('{:calendars}'::bigint[])[1 + s.n % :ncal],
  to_timestamp(:base + (s.n / :ncal) * 300), to_timestamp(:base + (s.n / :ncal) * 300 + 300),
  to_timestamp(:base + (s.n / :ncal) * 300 + 300), 'booked', '', 'api', now(), now()
FROM (SELECT nextval('bench_appointment_slot') AS n) s;
