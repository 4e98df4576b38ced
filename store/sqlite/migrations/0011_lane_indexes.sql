-- Numbered and named like the PostgreSQL store's migration 0011: the
-- indexes of the endpoints' deliveries and attempts fitted to the lanes'
-- queries, which reclaim and purge one endpoint's rows at a time. A lane's
-- reclaim reads its endpoint's processing rows through
-- endpoint_deliveries_endpoint_idx (endpoint_id, status, seq): the index on
-- lease_expires_at alone goes; the retention's indexes (finished
-- deliveries, attempts) begin with the endpoint.
drop index {prefix}endpoint_deliveries_lease_idx;
create index {prefix}endpoint_deliveries_finished_endpoint_idx
  on {prefix}endpoint_deliveries (endpoint_id, processed_at) where status in ('done', 'dropped');
drop index {prefix}endpoint_deliveries_finished_idx;
create index {prefix}endpoint_attempts_endpoint_at_idx
  on {prefix}endpoint_attempts (endpoint_id, at);
drop index {prefix}endpoint_attempts_at_idx;
