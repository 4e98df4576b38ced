-- The dead-letter lists (postbox failed list, the console) page through the
-- failed events in (processed_at, seq) order, the most recent failure
-- first. With an index on processed_at alone PostgreSQL must sort them: a
-- generic plan (a prepared statement run more than five times) sorts every
-- failed event for one page, 0.8 s for 1,000,000 of them. An index in the
-- list's own order ends the scan after one page, whatever the plan; a
-- second one serves the lists of one aggregate ("what failed for order
-- 42?"), which otherwise read every failed event; it leads with the
-- aggregate id, which a search may give without the aggregate type. Both index failed events
-- only: producers' inserts do not maintain them.
create index outbox_events_failed_seq_idx
  on {schema}.outbox_events (processed_at, seq) where status = 'failed';
create index outbox_events_failed_aggregate_idx
  on {schema}.outbox_events (aggregate_id, aggregate_type, processed_at, seq) where status = 'failed';
drop index {schema}.outbox_events_failed_idx;
