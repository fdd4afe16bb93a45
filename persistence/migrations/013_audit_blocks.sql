-- The audit trail in blocks (docs/compliance.md "Audit trail", benchmarks/RESULTS.md "audit").
--
-- One row per event cost Postgres a heap tuple, index entries and a WAL record for every read
-- it recorded (about 18 % of the machine under a read load). The audit writer now stores each
-- tenant's events of one transaction as one row of audit_blocks. `events` is the text of a JSON
-- array of the events in seq order (text: Postgres does not parse it on the way in), each event
-- an array of its facts by position, as the view below names them (half the bytes of objects:
-- Postgres's cost is in the bytes it parses, compresses and logs). Each event carries its own
-- hash chained to the event before it, so an edited, removed or reordered event, or a removed
-- block, still breaks the chain where it happened. The block's other columns only narrow a
-- search: the seqs and times it spans, and record_ids (every resource_id and listed id in it)
-- for a record's history. audit_log is now the view of the events, one row each, with the
-- columns the table had.
CREATE TABLE audit_blocks (
  tenant_id  bigint NOT NULL,
  first_seq  bigint NOT NULL,
  last_seq   bigint NOT NULL,
  logged_at  timestamptz NOT NULL,
  first_at   timestamptz NOT NULL,
  last_at    timestamptz NOT NULL,
  record_ids bigint[] COMPRESSION lz4 NOT NULL,
  events     text COMPRESSION lz4 NOT NULL,
  last_hash  text NOT NULL,
  PRIMARY KEY (tenant_id, first_seq, logged_at)
) PARTITION BY RANGE (logged_at);
CREATE INDEX audit_blocks_records_idx ON audit_blocks USING gin (record_ids);

-- The rows stored so far become blocks of one event each, in partitions of the same months.
DO $$
DECLARE p record;
BEGIN
  FOR p IN SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
           FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'audit_log'::regclass LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF audit_blocks %s',
                   replace(p.relname, 'audit_log_', 'audit_blocks_'), p.bound);
  END LOOP;
END $$;

INSERT INTO audit_blocks
SELECT tenant_id, seq, seq, logged_at, at, at,
       CASE WHEN resource_id IS NULL THEN ids ELSE resource_id || ids END,
       json_build_array(json_build_array(
         seq, (extract(epoch from at) * 1000000)::bigint, actor_type, user_id, role, actor_ref,
         resource, resource_id, action, fields, outcome, status, client_ip, user_agent,
         request_id, query, ids, encode(hash, 'hex')))::text,
       encode(hash, 'hex')
FROM audit_log;

DROP TABLE audit_log;

-- One row per event, for GET /audit-log, the verifier, the subject export and ad-hoc SQL.
-- A condition on the block's columns (tenant_id, first_seq, last_seq, first_at, last_at,
-- record_ids) is applied to audit_blocks before its events are expanded.
CREATE VIEW audit_log AS
SELECT b.tenant_id, b.logged_at, b.first_seq, b.last_seq, b.first_at, b.last_at, b.record_ids,
       (e->>0)::bigint AS seq,
       timestamptz 'epoch' + (e->>1)::bigint * interval '1 microsecond' AS at,
       e->>2 AS actor_type, (e->>3)::bigint AS user_id, e->>4 AS role, e->>5 AS actor_ref,
       e->>6 AS resource, (e->>7)::bigint AS resource_id, e->>8 AS action,
       ARRAY(SELECT jsonb_array_elements_text(e->9)) AS fields,
       e->>10 AS outcome, (e->>11)::integer AS status, e->>12 AS client_ip,
       e->>13 AS user_agent, e->>14 AS request_id, e->>15 AS query,
       ARRAY(SELECT jsonb_array_elements_text(e->16)::bigint) AS ids,
       e->>17 AS hash
FROM audit_blocks b
CROSS JOIN LATERAL jsonb_array_elements(b.events::jsonb) AS x(e);
