-- Numbered and named like the PostgreSQL store's migration 0005: the failed
-- events indexed in the dead-letter lists' (processed_at, seq) order, and by
-- aggregate, for the lists of one aggregate. (outbox_events_done_idx, on
-- (status, processed_at), ends with the primary key, seq: it serves the
-- list of failed events as well, under the name both stores share.)
create index {prefix}outbox_events_failed_aggregate_idx
  on {prefix}outbox_events (status, aggregate_id(191), aggregate_type(64), processed_at, seq);
