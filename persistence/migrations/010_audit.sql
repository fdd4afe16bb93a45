-- The audit trail (docs/compliance.md "Audit trail").
--
-- audit_pending: changes are audited in the transaction that makes them, here (no lock shared
-- with any other writer). The audit writer moves them, with the reads it buffered, into
-- audit_log, where each tenant's rows form a hash chain: seq counts the tenant's rows, hash
-- (SHA-256) covers every fact of the row and the previous row's hash. audit_heads holds each
-- chain's last row; audit_pruned the last row removed by retention, where the kept chain starts.
-- audit_log is partitioned by month of logged_at (when the row was chained, which only grows
-- along a tenant's chain), so retention drops whole partitions, which are a prefix of each chain.
CREATE TABLE audit_pending (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL,
  at          timestamptz NOT NULL,
  actor_type  text NOT NULL,
  user_id     bigint,
  role        text NOT NULL DEFAULT '',
  actor_ref   text NOT NULL DEFAULT '',
  resource    text NOT NULL,
  resource_id bigint,
  action      text NOT NULL,
  fields      text[] NOT NULL DEFAULT '{}',
  outcome     text NOT NULL,
  status      integer NOT NULL DEFAULT 0,
  client_ip   text NOT NULL DEFAULT '',
  user_agent  text NOT NULL DEFAULT '',
  request_id  text NOT NULL DEFAULT '',
  query       text NOT NULL DEFAULT '',
  ids         bigint[] NOT NULL DEFAULT '{}'
);

CREATE TABLE audit_log (
  tenant_id   bigint NOT NULL,
  seq         bigint NOT NULL,
  logged_at   timestamptz NOT NULL,
  at          timestamptz NOT NULL,
  actor_type  text NOT NULL,
  user_id     bigint,
  role        text NOT NULL,
  actor_ref   text NOT NULL,
  resource    text NOT NULL,
  resource_id bigint,
  action      text NOT NULL,
  fields      text[] NOT NULL,
  outcome     text NOT NULL,
  status      integer NOT NULL,
  client_ip   text NOT NULL,
  user_agent  text NOT NULL,
  request_id  text NOT NULL,
  query       text NOT NULL,
  ids         bigint[] NOT NULL,
  hash        bytea NOT NULL,
  PRIMARY KEY (tenant_id, seq, logged_at)
) PARTITION BY RANGE (logged_at);
-- A record's history (GET /audit-log?resource_id=). Integers only, and only rows that name one
-- record: every index costs each of the many reads it records (a text column made each insert
-- compare with the collation: benchmarks/RESULTS.md). Other filters scan the tenant's rows.
CREATE INDEX audit_log_resource_idx ON audit_log (tenant_id, resource_id)
  WHERE resource_id IS NOT NULL;

CREATE TABLE audit_heads (
  tenant_id bigint PRIMARY KEY,
  seq       bigint NOT NULL,
  hash      text NOT NULL,
  logged_at timestamptz NOT NULL
);

CREATE TABLE audit_pruned (
  tenant_id bigint PRIMARY KEY,
  seq       bigint NOT NULL,
  hash      text NOT NULL
);
