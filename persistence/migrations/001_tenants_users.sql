-- Tenants and their users (contract §3). User e-mails are unique across the whole service.
CREATE TABLE tenants (
  id          bigserial PRIMARY KEY,
  name        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
  id             bigserial PRIMARY KEY,
  tenant_id      bigint NOT NULL REFERENCES tenants (id),
  email          text NOT NULL,
  full_name      text NOT NULL DEFAULT '',
  role           text NOT NULL CHECK (role IN ('viewer', 'agent', 'manager', 'admin')),
  password_hash  text NOT NULL,
  is_active      boolean NOT NULL DEFAULT true,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX users_email_key ON users (lower(email));
CREATE INDEX users_tenant_idx ON users (tenant_id, id);

-- Login sessions: one per login, shared by the access and refresh tokens it issues (`sid`).
-- A revoked session is authoritative here; Redis carries the revocation to every node.
CREATE TABLE sessions (
  sid           text PRIMARY KEY,
  user_id       bigint NOT NULL REFERENCES users (id),
  tenant_id     bigint NOT NULL REFERENCES tenants (id),
  created_at    timestamptz NOT NULL DEFAULT now(),
  refreshed_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at    timestamptz
);
CREATE INDEX sessions_user_live_idx ON sessions (user_id) WHERE revoked_at IS NULL;
CREATE INDEX sessions_revoked_idx ON sessions (revoked_at) WHERE revoked_at IS NOT NULL;
