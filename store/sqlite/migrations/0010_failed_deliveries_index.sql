-- Numbered and named like the PostgreSQL store's migration 0010: the
-- failed deliveries of webhook endpoints, the dead letters of
-- store.FailedFilter.Endpoint, indexed in the dead-letter lists'
-- (processed_at, seq) order, one endpoint's and every endpoint's (see
-- deadletters.sql). The index by aggregate, which the PostgreSQL store's
-- lists of one aggregate use, keeps both schemas alike. They index failed
-- deliveries only.
create index {prefix}endpoint_deliveries_failed_endpoint_idx
  on {prefix}endpoint_deliveries (endpoint_id, processed_at, seq) where status = 'failed';
create index {prefix}endpoint_deliveries_failed_seq_idx
  on {prefix}endpoint_deliveries (processed_at, seq) where status = 'failed';
create index {prefix}endpoint_deliveries_failed_aggregate_idx
  on {prefix}endpoint_deliveries (aggregate_id, aggregate_type, processed_at, seq) where status = 'failed';
