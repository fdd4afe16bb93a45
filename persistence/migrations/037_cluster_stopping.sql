-- A node in its shutdown grace (docs/cluster.md "Stopping a node") still holds and serves its
-- tenants, but takes no more: no first placement, no hand-over from a node that leaves or died,
-- no operator's move and no balance move goes to it. Its heartbeat sets `stopping_since` once
-- it has been told to stop; a new incarnation clears it.
ALTER TABLE cluster_nodes ADD COLUMN stopping_since timestamptz;

-- The one definition of a member that may be given tenants: a live one (crm_node_live) not
-- in its shutdown grace.
CREATE FUNCTION crm_node_takes_tenants(node text, dead_after double precision) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT crm_node_live(node, dead_after)
     AND NOT EXISTS (SELECT 1 FROM cluster_nodes n
                      WHERE n.node_id = node AND n.stopping_since IS NOT NULL)
$$;
