-- Notes on a contact (contract §11, docs/notes.md): what colleagues left on the record. They go
-- with their contact (a delete or an erasure), are exported with it, and are audited like it.
-- author_id: the user who wrote it (NULL when an API key did).
CREATE TABLE notes (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL REFERENCES tenants (id),
  contact_id  bigint NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
  author_id   bigint,
  body        text NOT NULL,
  pinned      boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL
);
CREATE INDEX notes_contact_idx ON notes (contact_id);
CREATE INDEX notes_tenant_idx ON notes (tenant_id, id);
