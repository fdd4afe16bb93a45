-- Messaging channels, conversations and messages (contract §8, docs/channels.md). A message's
-- external id is unique per channel: a provider's retry or a duplicate post is recognised by
-- it. channel_identities remembers which contact a provider's external id (a Telegram chat, an
-- integrator's patient id) belongs to on a channel.
CREATE TABLE channels (
  id              bigserial PRIMARY KEY,
  tenant_id       bigint NOT NULL REFERENCES tenants (id),
  name            text NOT NULL,
  type            text NOT NULL CHECK (type IN ('api', 'telegram', 'whatsapp', 'sms', 'email')),
  config          jsonb NOT NULL DEFAULT '{}',
  webhook_secret  text,
  is_active       boolean NOT NULL DEFAULT true,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL
);
CREATE INDEX channels_tenant_idx ON channels (tenant_id, id);

CREATE TABLE channel_identities (
  channel_id   bigint NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  external_id  text NOT NULL,
  tenant_id    bigint NOT NULL REFERENCES tenants (id),
  contact_id   bigint NOT NULL,
  PRIMARY KEY (channel_id, external_id)
);
CREATE INDEX channel_identities_contact_idx ON channel_identities (contact_id);

CREATE TABLE conversations (
  id               bigserial PRIMARY KEY,
  tenant_id        bigint NOT NULL REFERENCES tenants (id),
  channel_id       bigint NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
  contact_id       bigint NOT NULL,
  status           text NOT NULL CHECK (status IN ('open', 'pending', 'closed')),
  assignee_id      bigint,
  unread_count     bigint NOT NULL DEFAULT 0,
  last_message_at  timestamptz NOT NULL,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);
CREATE INDEX conversations_tenant_idx ON conversations (tenant_id, id);

CREATE TABLE messages (
  id                   bigserial PRIMARY KEY,
  tenant_id            bigint NOT NULL REFERENCES tenants (id),
  conversation_id      bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  channel_id           bigint NOT NULL,
  direction            text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
  text                 text NOT NULL,
  external_message_id  text,
  status               text NOT NULL CHECK (status IN ('received', 'queued', 'sent', 'failed')),
  error                text,
  attempts             integer NOT NULL DEFAULT 0,
  sender_user_id       bigint,
  next_attempt_at      timestamptz,
  created_at           timestamptz NOT NULL,
  sent_at              timestamptz
);
CREATE INDEX messages_conversation_idx ON messages (conversation_id, id);
CREATE UNIQUE INDEX messages_external_idx ON messages (channel_id, external_message_id)
  WHERE direction = 'inbound';
CREATE INDEX messages_queued_idx ON messages (next_attempt_at) WHERE status = 'queued';
