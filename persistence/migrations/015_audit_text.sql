-- The audit trail cannot be silenced by what a request carries (issue 31, docs/compliance.md
-- "Audit trail": "What no request can do to it").
--
-- 1. Every text of an audit row is made storable before it is buffered or staged
--    (domain::make_storable): bytes that are not UTF-8, and NULs, become U+FFFD, and the row says
--    so in `sanitized` (stored, and hashed when set).
-- 2. The audit_log view no longer fails as a whole on a block it cannot parse: each block is
--    expanded by audit_block_events, which answers such a block as one row with
--    `readable = false` naming its seqs and the error, for the readers to report.
ALTER TABLE audit_pending ADD COLUMN sanitized boolean NOT NULL DEFAULT false;

CREATE TYPE audit_event AS (
  seq         bigint,
  at          timestamptz,
  actor_type  text,
  user_id     bigint,
  role        text,
  actor_ref   text,
  resource    text,
  resource_id bigint,
  action      text,
  fields      text[],
  outcome     text,
  status      integer,
  client_ip   text,
  user_agent  text,
  request_id  text,
  query       text,
  ids         bigint[],
  hash        text,
  sanitized   boolean,
  readable    boolean
);

-- The events of one block, each as the facts of its JSON array by position (013); position 18
-- is true only for a sanitized row. The block is parsed whole inside the exception block before
-- any row is returned, so a block fails as a whole or not at all. PARALLEL UNSAFE: an exception
-- block is a subtransaction, which no parallel query may start.
CREATE FUNCTION audit_block_events(events text, first_seq bigint, last_seq bigint,
                                   first_at timestamptz, last_hash text)
RETURNS SETOF audit_event LANGUAGE plpgsql IMMUTABLE PARALLEL UNSAFE AS $$
DECLARE
  parsed audit_event[];
BEGIN
  BEGIN
    parsed := ARRAY(
      SELECT ROW((e->>0)::bigint,
                 timestamptz 'epoch' + (e->>1)::bigint * interval '1 microsecond',
                 e->>2, (e->>3)::bigint, e->>4, e->>5, e->>6, (e->>7)::bigint, e->>8,
                 ARRAY(SELECT jsonb_array_elements_text(e->9)), e->>10, (e->>11)::integer,
                 e->>12, e->>13, e->>14, e->>15,
                 ARRAY(SELECT jsonb_array_elements_text(e->16)::bigint), e->>17,
                 coalesce((e->>18)::boolean, false), true)::audit_event
      FROM jsonb_array_elements(events::jsonb) AS x(e));
  EXCEPTION WHEN others THEN
    RETURN NEXT ROW(first_seq, first_at, 'system', NULL::bigint, '', '', 'audit_block',
                    NULL::bigint, 'unreadable', ARRAY[]::text[], 'failure', 0, '', '', '',
                    'rows ' || first_seq || ' to ' || last_seq || ' cannot be read: ' || SQLERRM,
                    ARRAY[]::bigint[], last_hash, false, false)::audit_event;
    RETURN;
  END;
  RETURN QUERY SELECT * FROM unnest(parsed);
END $$;

DROP VIEW audit_log;
CREATE VIEW audit_log AS
SELECT b.tenant_id, b.logged_at, b.first_seq, b.last_seq, b.first_at, b.last_at, b.record_ids,
       e.seq, e.at, e.actor_type, e.user_id, e.role, e.actor_ref, e.resource, e.resource_id,
       e.action, e.fields, e.outcome, e.status, e.client_ip, e.user_agent, e.request_id, e.query,
       e.ids, e.hash, e.sanitized, e.readable
FROM audit_blocks b
CROSS JOIN LATERAL audit_block_events(b.events, b.first_seq, b.last_seq, b.first_at,
                                      b.last_hash) AS e;
