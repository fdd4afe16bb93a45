-- Two-factor sign-in for staff (issue 31, docs/operations.md "Two-factor sign-in"): a TOTP
-- secret per user (RFC 6238), sealed with --secret-keys (purpose "user.totp_secret", bound to
-- the tenant), the last time step accepted (a code is good once), and single-use recovery codes
-- kept as keyed hashes. A tenant may require it of every user who signs in with a password.
CREATE TABLE user_totp (
  id              bigserial PRIMARY KEY,
  user_id         bigint NOT NULL UNIQUE REFERENCES users (id),
  tenant_id       bigint NOT NULL REFERENCES tenants (id),
  secret          text,
  pending_secret  text,
  enabled_at      timestamptz,
  last_step       bigint NOT NULL DEFAULT 0,
  recovery_codes  text[] NOT NULL DEFAULT '{}'
);
ALTER TABLE tenants ADD COLUMN require_totp boolean NOT NULL DEFAULT false;
