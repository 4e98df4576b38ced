-- Numbered and named like the PostgreSQL store's migration 0005: the failed
-- events indexed in the dead-letter lists' (processed_at, seq) order (the
-- index on processed_at alone already ended with the rowid, seq: the same
-- order, under the name both stores now share), and by aggregate, for the
-- lists of one aggregate.
create index {prefix}outbox_events_failed_seq_idx
  on {prefix}outbox_events (processed_at, seq) where status = 'failed';
create index {prefix}outbox_events_failed_aggregate_idx
  on {prefix}outbox_events (aggregate_id, aggregate_type, processed_at, seq) where status = 'failed';
drop index {prefix}outbox_events_failed_idx;
