-- AI assistants (contract §8, docs/ai.md): agents, their knowledge documents cut into passages
-- (the retrieval index is rebuilt from ai_passages when a tenant's agent actor loads), and one
-- row per decision an agent took on an inbound message. Conversations remember a hand-off
-- (ai_paused, handoff_reason): no agent answers them until a person does. Messages an agent
-- sent carry its id.
CREATE TABLE ai_agents (
  id                   bigserial PRIMARY KEY,
  tenant_id            bigint NOT NULL REFERENCES tenants (id),
  name                 text NOT NULL,
  instructions         text NOT NULL DEFAULT '',
  provider             text NOT NULL CHECK (provider IN ('builtin', 'openai_compatible')),
  model                text,
  base_url             text,
  api_key              text,
  channel_ids          bigint[] NOT NULL DEFAULT '{}',
  auto_reply           boolean NOT NULL DEFAULT false,
  handoff_keywords     text[] NOT NULL DEFAULT '{}',
  reply_language       text NOT NULL DEFAULT 'auto',
  emergency_message    text,
  handoff_assignee_id  bigint,
  stream               boolean NOT NULL DEFAULT false,
  is_active            boolean NOT NULL DEFAULT true,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL
);
CREATE INDEX ai_agents_tenant_idx ON ai_agents (tenant_id, id);

CREATE TABLE ai_documents (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL REFERENCES tenants (id),
  agent_id    bigint NOT NULL REFERENCES ai_agents (id) ON DELETE CASCADE,
  title       text NOT NULL,
  kind        text NOT NULL CHECK (kind IN ('text', 'qa')),
  content     text NOT NULL,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL
);
CREATE INDEX ai_documents_agent_idx ON ai_documents (agent_id, id);
CREATE INDEX ai_documents_tenant_idx ON ai_documents (tenant_id);

CREATE TABLE ai_passages (
  id           bigserial PRIMARY KEY,
  tenant_id    bigint NOT NULL,
  document_id  bigint NOT NULL REFERENCES ai_documents (id) ON DELETE CASCADE,
  ord          integer NOT NULL,
  text         text NOT NULL
);
CREATE INDEX ai_passages_tenant_idx ON ai_passages (tenant_id, document_id, ord);
CREATE INDEX ai_passages_document_idx ON ai_passages (document_id);

CREATE TABLE ai_replies (
  id                 bigserial PRIMARY KEY,
  tenant_id          bigint NOT NULL REFERENCES tenants (id),
  agent_id           bigint NOT NULL REFERENCES ai_agents (id) ON DELETE CASCADE,
  conversation_id    bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  message_id         bigint NOT NULL,
  reply_message_ids  bigint[] NOT NULL DEFAULT '{}',
  intent             text NOT NULL,
  handoff            boolean NOT NULL,
  handoff_reason     text,
  passages           bigint[] NOT NULL DEFAULT '{}',
  provider           text NOT NULL,
  prompt_tokens      integer,
  completion_tokens  integer,
  latency_ms         double precision NOT NULL DEFAULT 0,
  error              text,
  dropped            boolean NOT NULL DEFAULT false,
  created_at         timestamptz NOT NULL
);
CREATE INDEX ai_replies_agent_idx ON ai_replies (agent_id, id);
CREATE INDEX ai_replies_message_idx ON ai_replies (message_id);

-- Inbound messages that an auto-replying agent has yet to decide on: written with the message,
-- removed with the decision. An agent actor answers what is left here when it loads (after a
-- crash, a restart of the process), so a message waiting for a reply or a hand-off is never
-- forgotten; the sweeper wakes a tenant that still has some.
CREATE TABLE ai_pending (
  message_id       bigint PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
  tenant_id        bigint NOT NULL,
  conversation_id  bigint NOT NULL,
  channel_id       bigint NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ai_pending_tenant_idx ON ai_pending (tenant_id, message_id);

ALTER TABLE conversations ADD COLUMN ai_paused boolean NOT NULL DEFAULT false;
ALTER TABLE conversations ADD COLUMN handoff_reason text;
ALTER TABLE messages ADD COLUMN sender_agent_id bigint;
