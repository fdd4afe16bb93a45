-- The patient record's timeline and merges (contract §11, docs/patient-record.md).
--
-- Timeline: every source is read newest first by (time, id) for one contact, a page at a time;
-- these indexes let each branch of the feed's query stop after a page's worth of rows however
-- long the record is.
CREATE INDEX notes_timeline_idx ON notes (contact_id, created_at, id);
CREATE INDEX tasks_timeline_idx ON tasks (contact_id, created_at, id);
CREATE INDEX appointments_timeline_idx ON appointments (contact_id, created_at, id);
CREATE INDEX deals_timeline_idx ON deals (contact_id, created_at, id) WHERE contact_id IS NOT NULL;
CREATE INDEX consents_timeline_idx ON consents (contact_id, recorded_at, id);
CREATE INDEX conversations_contact_idx ON conversations (contact_id);
CREATE INDEX messages_timeline_idx ON messages (conversation_id, created_at, id);
CREATE INDEX deal_history_timeline_idx ON deal_history (deal_id, at, id);

-- A merge: the duplicate's references moved to the survivor and the duplicate deleted, in one
-- transaction. The row answers a later GET of the duplicate (404 with merged_into) and is the
-- timeline's merge item. No personal data: ids, who, when, and what moved. Gone with the
-- survivor (a GET of the duplicate then answers a plain 404).
CREATE TABLE contact_merges (
  id            bigserial PRIMARY KEY,
  tenant_id     bigint NOT NULL REFERENCES tenants (id),
  survivor_id   bigint NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
  duplicate_id  bigint NOT NULL,
  merged_by     bigint,
  moved         jsonb NOT NULL DEFAULT '{}',
  merged_at     timestamptz NOT NULL
);
CREATE UNIQUE INDEX contact_merges_duplicate_key ON contact_merges (tenant_id, duplicate_id);
CREATE INDEX contact_merges_timeline_idx ON contact_merges (survivor_id, merged_at, id);
