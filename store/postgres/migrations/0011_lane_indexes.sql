-- The indexes of endpoint_deliveries and endpoint_attempts, fitted to the
-- queries of the endpoints' lanes (store.Endpoints.EndpointLane), which
-- replaced the endpoint dispatcher's: every lane reclaims and purges its
-- own endpoint's rows.
--
-- 1. endpoint_deliveries_lease_idx (lease_expires_at) where processing went
--    with the dispatcher's reclaim of every endpoint at once. A lane's
--    reclaim reads its endpoint's processing rows, the deliveries in
--    flight, through endpoint_deliveries_endpoint_idx (endpoint_id, status,
--    seq); every claim wrote an entry into the index, no query read it.
drop index {schema}.endpoint_deliveries_lease_idx;

-- 2. The retention of finished (done or dropped) deliveries and of
--    attempts, one endpoint's at a time (lane_purge_done): without the
--    endpoint first, its purge read every endpoint's old rows.
create index endpoint_deliveries_finished_endpoint_idx
  on {schema}.endpoint_deliveries (endpoint_id, processed_at) where status in ('done', 'dropped');
drop index {schema}.endpoint_deliveries_finished_idx;
create index endpoint_attempts_endpoint_at_idx
  on {schema}.endpoint_attempts (endpoint_id, at);
drop index {schema}.endpoint_attempts_at_idx;
