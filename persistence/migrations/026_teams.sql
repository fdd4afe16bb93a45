-- The shared inbox (contract §12, docs/channels.md "Teams and assignment"): teams of users who
-- answer the conversations of some channels (a channel belongs to one team at most), whether a
-- user is available for new conversations, and the team a conversation is routed to.
CREATE TABLE teams (
  id                   bigserial PRIMARY KEY,
  tenant_id            bigint NOT NULL REFERENCES tenants (id),
  name                 text NOT NULL,
  member_ids           bigint[] NOT NULL DEFAULT '{}',
  channel_ids          bigint[] NOT NULL DEFAULT '{}',
  max_open_per_member  integer,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL
);
CREATE INDEX teams_tenant_idx ON teams (tenant_id, id);

CREATE TABLE user_availability (
  user_id     bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  tenant_id   bigint NOT NULL REFERENCES tenants (id),
  available   boolean NOT NULL,
  updated_at  timestamptz NOT NULL
);

ALTER TABLE conversations ADD COLUMN team_id bigint;
-- Response times (docs/channels.md "Response times"): a person's first reply after the contact
-- wrote, and when the conversation was closed.
ALTER TABLE conversations ADD COLUMN first_response_at timestamptz;
ALTER TABLE conversations ADD COLUMN resolved_at timestamptz;
UPDATE conversations SET resolved_at = updated_at WHERE status = 'closed';
CREATE INDEX conversations_created_idx ON conversations (tenant_id, created_at);
