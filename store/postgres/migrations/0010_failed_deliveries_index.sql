-- The dead letters of webhook endpoints (store.FailedFilter.Endpoint): the
-- failed deliveries, indexed like the outbox's failed events (migration
-- 0005) in the dead-letter lists' (processed_at, seq) order, most recent
-- first: one endpoint's (postbox failed list --endpoint), every endpoint's,
-- and one aggregate's. Without them a page of an endpoint's failed
-- deliveries sorts them all, and a list of every endpoint's reads the whole
-- table, done deliveries included. They index failed deliveries only: the
-- fan-out's inserts and the lanes' settles of delivered rows do not
-- maintain them.
create index endpoint_deliveries_failed_endpoint_idx
  on {schema}.endpoint_deliveries (endpoint_id, processed_at, seq) where status = 'failed';
create index endpoint_deliveries_failed_seq_idx
  on {schema}.endpoint_deliveries (processed_at, seq) where status = 'failed';
create index endpoint_deliveries_failed_aggregate_idx
  on {schema}.endpoint_deliveries (aggregate_id, aggregate_type, processed_at, seq) where status = 'failed';
