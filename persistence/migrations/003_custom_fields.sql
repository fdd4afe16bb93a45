-- Custom-field definitions per tenant and entity (contract §6). `tenants.fields_version` grows
-- with every committed change so that record actors keep the newest definitions they have seen.
CREATE TABLE custom_fields (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL REFERENCES tenants (id),
  entity      text NOT NULL CHECK (entity IN ('contact', 'company', 'deal')),
  name        text NOT NULL,
  label       text NOT NULL,
  field_type  text NOT NULL,
  options     jsonb,
  required    boolean NOT NULL DEFAULT false,
  is_active   boolean NOT NULL DEFAULT true,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  UNIQUE (tenant_id, entity, name)
);

ALTER TABLE tenants ADD COLUMN fields_version bigint NOT NULL DEFAULT 0;
