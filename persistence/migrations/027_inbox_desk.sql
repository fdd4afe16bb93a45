-- The shared inbox, second part (contract §12, docs/channels.md "Canned responses", "Labels and
-- priority", "Business hours"): answers a front desk keeps under a shortcode, a conversation's
-- labels and priority, and a channel's opening hours with the reply sent outside them.
CREATE TABLE canned_responses (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL REFERENCES tenants (id),
  shortcode   text NOT NULL,
  text        text NOT NULL,
  created_by  bigint,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  UNIQUE (tenant_id, shortcode)
);

ALTER TABLE conversations ADD COLUMN labels text[] NOT NULL DEFAULT '{}';
ALTER TABLE conversations ADD COLUMN priority text
  CHECK (priority IN ('low', 'medium', 'high', 'urgent'));
-- The closed period (its start) the channel's after-hours reply last answered in this
-- conversation: one reply per conversation per closed period.
ALTER TABLE conversations ADD COLUMN after_hours_for timestamptz;

-- NULL business_hours: the channel is always open.
ALTER TABLE channels ADD COLUMN business_hours text;
ALTER TABLE channels ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC';
ALTER TABLE channels ADD COLUMN after_hours_reply text;
