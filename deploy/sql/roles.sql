-- Database roles for a production carecrm (docs/operations.md "Database roles").
--
-- Run as the owner of carecrm's tables (the role `carecrm migrate` ran as), after every upgrade:
--   psql "$OWNER_URL" -v app_role=carecrm_app -f deploy/sql/roles.sql
-- It is idempotent. `carecrm serve` then connects as the application role; `carecrm migrate`
-- and `carecrm audit prune` (the month partitions of the audit trail and its retention, from
-- cron, say daily) keep running as the owner.
--
-- The application role reads and writes the CRM's tables, but cannot rewrite the audit trail:
--   audit_blocks  (the chained rows)    SELECT, INSERT                 no UPDATE, DELETE, TRUNCATE
--   audit_heads   (each chain's head)   SELECT, INSERT, UPDATE         no DELETE, TRUNCATE
--   audit_pruned  (retention anchors)   SELECT                         (written by audit prune)
--   audit_pending (changes not chained) SELECT, INSERT, DELETE         (the writer claims them;
--                                       UPDATE of the id column only, for FOR UPDATE)
-- A head it updates by hand fails `carecrm audit verify` (heads are signed with --secret-keys,
-- which the database never holds); the month partitions are the owner's, and the application
-- role has no privilege on them (its rows reach them through audit_blocks).
\if :{?app_role}
\else
  \set app_role carecrm_app
\endif

SELECT format('CREATE ROLE %I LOGIN', :'app_role')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app_role') \gexec

SELECT format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), :'app_role') \gexec
-- Every table and sequence of the schema except the audit trail's, and except the partitions.
SELECT format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO %I', c.relname, :'app_role')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v') AND NOT c.relispartition
  AND c.relname NOT IN ('audit_blocks', 'audit_heads', 'audit_pruned', 'audit_pending') \gexec
SELECT format('GRANT USAGE, SELECT, UPDATE ON SEQUENCE %I TO %I', c.relname, :'app_role')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind = 'S' \gexec

SELECT format('REVOKE ALL ON audit_blocks, audit_heads, audit_pruned, audit_pending FROM %I',
              :'app_role') \gexec
SELECT format('GRANT SELECT, INSERT ON audit_blocks TO %I', :'app_role') \gexec
SELECT format('GRANT SELECT, INSERT, UPDATE ON audit_heads TO %I', :'app_role') \gexec
SELECT format('GRANT SELECT ON audit_pruned TO %I', :'app_role') \gexec
SELECT format('GRANT SELECT, INSERT, DELETE ON audit_pending TO %I', :'app_role') \gexec
-- The writer claims pending rows with SELECT ... FOR UPDATE, which needs UPDATE on one column:
-- the id only (no fact of the row).
SELECT format('GRANT UPDATE (id) ON audit_pending TO %I', :'app_role') \gexec
-- Nothing on the month partitions themselves.
SELECT format('REVOKE ALL ON %I FROM %I', c.relname, :'app_role')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relispartition AND c.relkind IN ('r', 'p') \gexec
