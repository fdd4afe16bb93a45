-- The audit trail in blocks (docs/compliance.md "Audit trail", benchmarks/RESULTS.md "audit").
--
-- One row per event cost Postgres a heap tuple, index entries and a WAL record for every read
-- it recorded (about 18 % of the machine under a read load). The audit writer now stores each
-- tenant's events of one transaction as one row of audit_blocks: `events` is the text (stored
-- as text: Postgres does not parse it on the way in, the writer made it) of a JSON array of
-- the events in seq order, each object exactly as GET /audit-log shows it, each carrying its
-- own hash chained to the event before it (so an edited, removed or reordered event, or a
-- removed block, still breaks the chain where it happened). The block's columns only narrow a
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
       json_build_array(json_build_object(
         'seq', seq, 'at', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
         'actor_type', actor_type, 'user_id', user_id, 'role', role, 'actor_ref', actor_ref,
         'resource', resource, 'resource_id', resource_id, 'action', action, 'fields', fields,
         'outcome', outcome, 'status', status, 'client_ip', client_ip, 'user_agent', user_agent,
         'request_id', request_id, 'query', query, 'ids', ids, 'hash', encode(hash, 'hex')))::text,
       encode(hash, 'hex')
FROM audit_log;

DROP TABLE audit_log;

-- One row per event, for GET /audit-log, the verifier, the subject export and ad-hoc SQL.
-- A condition on the block's columns (tenant_id, first_seq, last_seq, first_at, last_at,
-- record_ids) is applied to audit_blocks before its events are expanded.
CREATE VIEW audit_log AS
SELECT b.tenant_id, b.logged_at, b.first_seq, b.last_seq, b.first_at, b.last_at, b.record_ids,
       e.seq, e.at, e.actor_type, e.user_id, e.role, e.actor_ref, e.resource, e.resource_id,
       e.action, e.fields, e.outcome, e.status, e.client_ip, e.user_agent, e.request_id,
       e.query, e.ids, e.hash
FROM audit_blocks b
CROSS JOIN LATERAL json_to_recordset(b.events::json) AS e(
  seq bigint, at timestamptz, actor_type text, user_id bigint, role text, actor_ref text,
  resource text, resource_id bigint, action text, fields text[], outcome text, status integer,
  client_ip text, user_agent text, request_id text, query text, ids bigint[], hash text);
