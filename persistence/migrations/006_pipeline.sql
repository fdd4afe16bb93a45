-- The sales pipeline (contract §8, docs/pipeline.md): pipelines with ordered stages, deals, and
-- the history of each deal's stage and amount changes, written in the transaction of the
-- change. Amounts are numeric (never float). Every tenant has exactly one default pipeline;
-- crm_create_default_pipeline() gives one to each existing tenant here and to each new tenant
-- at `carecrm tenant create`.
ALTER TABLE tenants ADD COLUMN currency text NOT NULL DEFAULT 'USD';

CREATE TABLE pipelines (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL REFERENCES tenants (id),
  name        text NOT NULL,
  is_default  boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pipelines_tenant_idx ON pipelines (tenant_id, id);
CREATE UNIQUE INDEX pipelines_one_default ON pipelines (tenant_id) WHERE is_default;

CREATE TABLE pipeline_stages (
  id           bigserial PRIMARY KEY,
  tenant_id    bigint NOT NULL REFERENCES tenants (id),
  pipeline_id  bigint NOT NULL REFERENCES pipelines (id) ON DELETE CASCADE,
  name         text NOT NULL,
  position     integer NOT NULL,
  probability  integer NOT NULL CHECK (probability BETWEEN 0 AND 100),
  kind         text NOT NULL CHECK (kind IN ('open', 'won', 'lost'))
);
CREATE INDEX pipeline_stages_pipeline_idx ON pipeline_stages (pipeline_id, position);

CREATE TABLE deals (
  id                   bigserial PRIMARY KEY,
  tenant_id            bigint NOT NULL REFERENCES tenants (id),
  title                text NOT NULL,
  amount               numeric(15, 2) CHECK (amount >= 0),
  currency             text NOT NULL,
  contact_id           bigint REFERENCES contacts (id) ON DELETE SET NULL,
  company_id           bigint REFERENCES companies (id) ON DELETE SET NULL,
  owner_id             bigint REFERENCES users (id),
  pipeline_id          bigint NOT NULL REFERENCES pipelines (id),
  stage_id             bigint NOT NULL REFERENCES pipeline_stages (id),
  expected_close_date  date,
  status               text NOT NULL CHECK (status IN ('open', 'won', 'lost')),
  lost_reason          text,
  custom_fields        jsonb NOT NULL DEFAULT '{}',
  rank                 bigint NOT NULL DEFAULT 0,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  closed_at            timestamptz
) WITH (fillfactor = 80);
CREATE INDEX deals_tenant_idx ON deals (tenant_id, id);
-- Deleting a contact or company nulls its deals' references: these keep that an index lookup.
CREATE INDEX deals_contact_idx ON deals (contact_id) WHERE contact_id IS NOT NULL;
CREATE INDEX deals_company_idx ON deals (company_id) WHERE company_id IS NOT NULL;
-- No index on stage_id: a move changes no indexed column, so its update stays a HOT update in
-- the row's page (fillfactor leaves room); a stage is deleted only after its deals moved out.

CREATE TABLE deal_history (
  id               bigserial PRIMARY KEY,
  tenant_id        bigint NOT NULL REFERENCES tenants (id),
  deal_id          bigint NOT NULL REFERENCES deals (id) ON DELETE CASCADE,
  kind             text NOT NULL CHECK (kind IN ('created', 'stage_changed', 'amount_changed')),
  from_stage_id    bigint,
  to_stage_id      bigint,
  from_amount      numeric(15, 2),
  to_amount        numeric(15, 2),
  currency         text NOT NULL,
  user_id          bigint,
  workflow_run_id  bigint,
  at               timestamptz NOT NULL
);
CREATE INDEX deal_history_deal_idx ON deal_history (deal_id, id);

CREATE FUNCTION crm_create_default_pipeline(tid bigint) RETURNS bigint
LANGUAGE sql AS $$
  WITH p AS (
    INSERT INTO pipelines (tenant_id, name, is_default) VALUES (tid, 'Sales', true) RETURNING id
  ), s AS (
    INSERT INTO pipeline_stages (tenant_id, pipeline_id, name, position, probability, kind)
    SELECT tid, p.id, v.name, v.position, v.probability, v.kind
    FROM p CROSS JOIN (VALUES ('Lead', 0, 10, 'open'), ('Qualified', 1, 25, 'open'),
                              ('Proposal', 2, 50, 'open'), ('Negotiation', 3, 75, 'open'),
                              ('Won', 4, 100, 'won'), ('Lost', 5, 0, 'lost'))
                       AS v(name, position, probability, kind)
    RETURNING pipeline_id
  )
  SELECT id FROM p
$$;

SELECT crm_create_default_pipeline(id) FROM tenants;
