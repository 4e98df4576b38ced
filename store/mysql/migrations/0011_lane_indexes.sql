-- Numbered and named like the PostgreSQL store's migration 0011: the
-- indexes of the endpoints' attempts fitted to the lanes' retention, which
-- purges one endpoint's rows at a time. (The finished deliveries of an
-- endpoint are read through endpoint_deliveries_failed_endpoint_idx,
-- (endpoint_id, status, processed_at, seq), done and dropped alike.)
create index {prefix}endpoint_attempts_endpoint_at_idx
  on {prefix}endpoint_attempts (endpoint_id, at);
