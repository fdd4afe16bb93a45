-- A contact's consents (docs/compliance.md "Consent"): append-only, the history is the record.
-- channel_id NULL: any channel. recorded_by: the user who recorded it (NULL when carecrm did,
-- e.g. a STOP message). Messages remember the purpose they are sent for, so a send is checked
-- again against the consents just before it leaves.
CREATE TABLE consents (
  id           bigserial PRIMARY KEY,
  tenant_id    bigint NOT NULL REFERENCES tenants (id),
  contact_id   bigint NOT NULL,
  purpose      text NOT NULL CHECK (purpose IN ('treatment_communication', 'appointment_reminders',
                                                'marketing', 'ai_processing', 'data_sharing')),
  channel_id   bigint,
  granted      boolean NOT NULL,
  source       text NOT NULL,
  evidence     text,
  recorded_at  timestamptz NOT NULL,
  recorded_by  bigint
);
CREATE INDEX consents_contact_idx ON consents (tenant_id, contact_id, id);

ALTER TABLE messages ADD COLUMN purpose text NOT NULL DEFAULT 'treatment_communication';
