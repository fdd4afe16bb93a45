-- Several carecrm nodes over one Postgres (docs/cluster.md). Unused by a node started without
-- a node id: it owns every tenant, as before.
--
-- cluster_nodes: the members. A node writes its row at start and beats `heartbeat_at` (Postgres's
-- clock, the one every node shares); a live node whose heartbeat is older than the cluster's
-- dead-after is declared dead by whichever member sees it first.
CREATE TABLE cluster_nodes (
  node_id      text PRIMARY KEY CHECK (node_id ~ '^[A-Za-z0-9_.-]{1,64}$'),
  http_address text NOT NULL,
  actor_host   text NOT NULL,
  actor_port   integer NOT NULL,
  incarnation  bigint NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  state        text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'dead', 'left'))
);

-- The one definition of a live member: the cluster's SQL (cluster/membership.cpp) asks it, never
-- the columns.
CREATE FUNCTION crm_node_live(node text, dead_after double precision) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM cluster_nodes n
                  WHERE n.node_id = node AND n.state = 'live'
                    AND n.heartbeat_at >= now() - make_interval(secs => dead_after))
$$;

-- tenant_leases: who owns a tenant now. `epoch` only grows: every change of owner (a first
-- placement, a takeover from a dead node, a move, a restart of the owner) adds one. A node's
-- write transaction for a tenant calls crm_fence with the epoch it holds, in the same
-- transaction, so a node that lost the lease can never commit for the tenant again; FOR SHARE
-- makes a takeover wait for a write that passed the check to end.
CREATE TABLE tenant_leases (
  tenant_id   bigint PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
  node_id     text NOT NULL REFERENCES cluster_nodes (node_id),
  epoch       bigint NOT NULL CHECK (epoch > 0),
  moving_to   text REFERENCES cluster_nodes (node_id),
  acquired_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tenant_leases_node_idx ON tenant_leases (node_id);

CREATE FUNCTION crm_fence(tenant bigint, node text, lease_epoch bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM tenant_leases
   WHERE tenant_id = tenant AND node_id = node AND epoch = lease_epoch
     FOR SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'tenant % is no longer leased to node % at epoch %', tenant, node, lease_epoch
      USING ERRCODE = '55F01';
  END IF;
END;
$$;
