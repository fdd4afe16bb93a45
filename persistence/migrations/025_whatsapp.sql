-- WhatsApp Cloud API (contract §12, docs/channels.md "WhatsApp"): a message's delivery moves on
-- to delivered and read as the provider reports it; an outbound message may be an approved
-- template (sent as such, also when retried after a restart); a conversation remembers when the
-- contact last wrote, which opens the 24-hour window for free text. The provider's id of an
-- outbound message finds it when a status arrives.
ALTER TABLE messages DROP CONSTRAINT messages_status_check;
ALTER TABLE messages ADD CONSTRAINT messages_status_check
  CHECK (status IN ('received', 'queued', 'sent', 'delivered', 'read', 'failed'));
ALTER TABLE messages ADD COLUMN template jsonb;
-- SMS: how many segments an outbound text takes (GSM-7 or UCS-2), as the provider bills it.
ALTER TABLE messages ADD COLUMN segments integer;
-- E-mail: an inbound mail's Subject (a reply's is "Re: " and it).
ALTER TABLE messages ADD COLUMN subject text;
CREATE INDEX messages_provider_idx ON messages (channel_id, external_message_id)
  WHERE direction = 'outbound';

ALTER TABLE conversations ADD COLUMN last_inbound_at timestamptz;
UPDATE conversations c SET last_inbound_at = m.at
  FROM (SELECT conversation_id, max(created_at) AS at FROM messages
        WHERE direction = 'inbound' GROUP BY conversation_id) m
  WHERE m.conversation_id = c.id;
