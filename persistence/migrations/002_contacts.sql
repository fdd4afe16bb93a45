-- Contacts, companies and tags (contract §4–§5), the outbox of record events, and idempotency
-- keys. Ids come from shared sequences (unique across tenants); the contacts actor reserves
-- them in blocks so that a batch of creates is one multi-row INSERT.
CREATE TABLE companies (
  id             bigserial PRIMARY KEY,
  tenant_id      bigint NOT NULL REFERENCES tenants (id),
  name           text NOT NULL,
  domain         text,
  phone          text,
  industry       text,
  address        text,
  custom_fields  jsonb NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL
);
CREATE INDEX companies_tenant_idx ON companies (tenant_id, id);

CREATE TABLE contacts (
  id             bigserial PRIMARY KEY,
  tenant_id      bigint NOT NULL REFERENCES tenants (id),
  first_name     text NOT NULL,
  last_name      text,
  email          text,
  phone          text,
  company_id     bigint REFERENCES companies (id) ON DELETE SET NULL,
  status         text NOT NULL
                 CHECK (status IN ('active', 'inactive', 'qualified', 'unqualified')),
  source         text
                 CHECK (source IN ('website', 'referral', 'social', 'ads', 'api', 'import', 'manual')),
  tags           text[] NOT NULL DEFAULT '{}',
  custom_fields  jsonb NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL
);
CREATE INDEX contacts_tenant_idx ON contacts (tenant_id, id);
CREATE UNIQUE INDEX contacts_email_key ON contacts (tenant_id, lower(email)) WHERE email IS NOT NULL;
CREATE INDEX contacts_company_idx ON contacts (company_id) WHERE company_id IS NOT NULL;

-- Events for workflows and outbound webhooks, written in the same transaction as the change.
CREATE TABLE outbox (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL REFERENCES tenants (id),
  event       text NOT NULL,
  payload     jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_tenant_idx ON outbox (tenant_id, id);

-- Idempotency-Key: the first response to a key, replayed for 24 hours.
CREATE TABLE idempotency_keys (
  tenant_id     bigint NOT NULL REFERENCES tenants (id),
  key           text NOT NULL,
  request_hash  text NOT NULL,
  status        integer NOT NULL,
  response      text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
