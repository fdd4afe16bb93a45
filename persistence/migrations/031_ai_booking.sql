-- Booking through the assistant (docs/ai.md "Booking"): the services an agent may book, and the
-- slots it offered in a conversation, until the patient picks one or a day passes.
ALTER TABLE ai_agents ADD COLUMN service_ids bigint[] NOT NULL DEFAULT '{}';

CREATE TABLE ai_booking_offers (
  conversation_id  bigint PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
  tenant_id        bigint NOT NULL,
  agent_id         bigint NOT NULL REFERENCES ai_agents (id) ON DELETE CASCADE,
  contact_id       bigint NOT NULL,
  slots            jsonb NOT NULL,
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,
  language         text NOT NULL DEFAULT 'en'
);
CREATE INDEX ai_booking_offers_tenant_idx ON ai_booking_offers (tenant_id);
