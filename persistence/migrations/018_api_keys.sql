-- API keys for integrators (issue 31, docs/operations.md "API keys"): named, with a role and an
-- optional expiry, presented as `Authorization: Bearer ck_<id>_<secret>`. Only a keyed hash of
-- the secret is stored (secret_keys::hash, purpose "api_key.secret", bound to the tenant); the
-- key itself is shown once, in the answer to its creation. A revoked key stays listed.
CREATE TABLE api_keys (
  id           bigserial PRIMARY KEY,
  tenant_id    bigint NOT NULL REFERENCES tenants (id),
  name         text NOT NULL,
  role         text NOT NULL,
  secret_hash  text NOT NULL,
  prefix       text NOT NULL,
  created_by   bigint,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz,
  revoked_at   timestamptz,
  revoked_by   bigint
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, id);
