-- Numbered and named like the PostgreSQL store's migration 0010: the
-- failed deliveries of webhook endpoints, the dead letters of
-- store.FailedFilter.Endpoint, indexed in the dead-letter lists'
-- (processed_at, seq) order, one endpoint's and every endpoint's.
create index {prefix}endpoint_deliveries_failed_endpoint_idx
  on {prefix}endpoint_deliveries (endpoint_id, status, processed_at, seq);
create index {prefix}endpoint_deliveries_failed_seq_idx
  on {prefix}endpoint_deliveries (status, processed_at, seq);
