-- Saved views (contract §11, docs/design.md "Views"): a named contact search kept for one user
-- (owner_id) or shared with the tenant (owner_id NULL). filter: the search's filter_groups and
-- sort, as POST /contacts/search takes them.
CREATE TABLE saved_views (
  id          bigserial PRIMARY KEY,
  tenant_id   bigint NOT NULL REFERENCES tenants (id),
  owner_id    bigint REFERENCES users (id),
  name        text NOT NULL,
  filter      jsonb NOT NULL,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL
);
CREATE INDEX saved_views_tenant_idx ON saved_views (tenant_id, id);
CREATE UNIQUE INDEX saved_views_name_key
  ON saved_views (tenant_id, coalesce(owner_id, 0), name);
