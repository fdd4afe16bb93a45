-- The patient's erasure (docs/compliance.md "The patient's rights"): one row per erased
-- contact, written before anything is removed, completed (completed_at, what was removed) in
-- the transaction that removes the last of it. A row left incomplete by a crash is completed
-- when carecrm starts, or by the same request again.
CREATE TABLE erasures (
  tenant_id     bigint NOT NULL REFERENCES tenants (id),
  contact_id    bigint NOT NULL,
  requested_at  timestamptz NOT NULL DEFAULT now(),
  requested_by  bigint,
  completed_at  timestamptz,
  removed       jsonb,
  PRIMARY KEY (tenant_id, contact_id)
);
