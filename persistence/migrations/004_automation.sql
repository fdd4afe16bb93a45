-- Workflows and their durable runs, outbound webhook subscriptions and their deliveries
-- (contract §7, docs/automation.md). Events reach both through the outbox: the workflow actor
-- marks the outbox rows it takes (dispatched_at) in the transaction that inserts the runs and
-- deliveries they cause, so an event is neither lost nor taken twice; dispatched rows stay a
-- week as the record of events. `depth` counts the workflow runs that led to a change (chains
-- stop at 5).
ALTER TABLE outbox ADD COLUMN depth integer NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN dispatched_at timestamptz;
CREATE INDEX outbox_pending_idx ON outbox (tenant_id, id) WHERE dispatched_at IS NULL;
CREATE INDEX outbox_dispatched_idx ON outbox (dispatched_at) WHERE dispatched_at IS NOT NULL;

CREATE TABLE workflows (
  id              bigserial PRIMARY KEY,
  tenant_id       bigint NOT NULL REFERENCES tenants (id),
  name            text NOT NULL,
  description     text,
  trigger_type    text NOT NULL,
  trigger_config  jsonb NOT NULL DEFAULT '{}',
  conditions      jsonb NOT NULL DEFAULT '[]',
  actions         jsonb NOT NULL DEFAULT '[]',
  is_active       boolean NOT NULL DEFAULT true,
  webhook_secret  text,
  next_run_at     timestamptz,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL
);
CREATE INDEX workflows_tenant_idx ON workflows (tenant_id, id);
CREATE INDEX workflows_due_idx ON workflows (next_run_at) WHERE next_run_at IS NOT NULL;

CREATE TABLE workflow_runs (
  id               bigserial PRIMARY KEY,
  tenant_id        bigint NOT NULL REFERENCES tenants (id),
  workflow_id      bigint NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
  status           text NOT NULL CHECK (status IN ('queued', 'running', 'waiting', 'succeeded', 'failed')),
  trigger_type     text NOT NULL,
  trigger_payload  jsonb NOT NULL,
  depth            integer NOT NULL DEFAULT 0,
  conditions_met   boolean NOT NULL DEFAULT true,
  actions          jsonb NOT NULL,
  next_step        integer NOT NULL DEFAULT 0,
  steps            jsonb NOT NULL DEFAULT '[]',
  error            text,
  resume_at        timestamptz,
  created_at       timestamptz NOT NULL,
  started_at       timestamptz,
  finished_at      timestamptz,
  updated_at       timestamptz NOT NULL
);
CREATE INDEX workflow_runs_workflow_idx ON workflow_runs (workflow_id, id DESC);
CREATE INDEX workflow_runs_open_idx ON workflow_runs (tenant_id)
  WHERE status IN ('queued', 'running', 'waiting');

CREATE TABLE webhook_subscriptions (
  id               bigserial PRIMARY KEY,
  tenant_id        bigint NOT NULL REFERENCES tenants (id),
  url              text NOT NULL,
  events           jsonb NOT NULL,
  description      text,
  secret           text NOT NULL,
  is_active        boolean NOT NULL DEFAULT true,
  disabled_reason  text,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);
CREATE INDEX webhook_subscriptions_tenant_idx ON webhook_subscriptions (tenant_id, id);

CREATE TABLE webhook_deliveries (
  id                bigserial PRIMARY KEY,
  tenant_id         bigint NOT NULL REFERENCES tenants (id),
  subscription_id   bigint NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
  event             text NOT NULL,
  payload           jsonb NOT NULL,
  status            text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts          integer NOT NULL DEFAULT 0,
  attempt_log       jsonb NOT NULL DEFAULT '[]',
  next_attempt_at   timestamptz,
  retry_from        timestamptz NOT NULL,
  last_status_code  integer,
  last_error        text,
  created_at        timestamptz NOT NULL,
  delivered_at      timestamptz,
  updated_at        timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_subscription_idx ON webhook_deliveries (subscription_id, id DESC);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
  WHERE status = 'pending';
