-- Secrets at rest (docs/operations.md "Secrets at rest"): provider tokens, signing secrets and
-- API keys are sealed by carecrm before they are written, and a channel's inbound webhook secret
-- is kept as a keyed hash. Rows written before this migration hold plaintext: the first
-- `carecrm serve` with keys configured seals them (SQL has no key to do it here) and records
-- when it did, so later starts skip the scan.
CREATE TABLE secrets_at_rest (
  id                   integer PRIMARY KEY CHECK (id = 1),
  plaintext_sealed_at  timestamptz
);
INSERT INTO secrets_at_rest (id) VALUES (1);
