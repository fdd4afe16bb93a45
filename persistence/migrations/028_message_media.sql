-- Media of messages (contract §12, docs/channels.md "Media"): each file a message carried, by
-- its position; fetched from the provider after the message is stored ('pending' until then),
-- kept ('stored', at most 16 MiB, an allowed type), or not ('refused', 'failed', with why).
CREATE TABLE message_attachments (
  message_id    bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
  n             integer NOT NULL,
  tenant_id     bigint NOT NULL REFERENCES tenants (id),
  source        text,
  content_type  text NOT NULL DEFAULT '',
  filename      text NOT NULL DEFAULT '',
  size          bigint,
  status        text NOT NULL CHECK (status IN ('pending', 'stored', 'refused', 'failed')),
  error         text,
  attempts      integer NOT NULL DEFAULT 0,
  data          bytea,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (message_id, n)
);
CREATE INDEX message_attachments_pending_idx ON message_attachments (tenant_id)
  WHERE status = 'pending';
