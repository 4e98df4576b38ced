-- Named queries of the dead-letter operations (store.DeadLetters) of the
-- PostgreSQL store; "{schema}" and "{channel}" are filled in as in
-- queries.sql.
--
-- The statements named failed_* work on the outbox's failed events, those
-- named delivery_failed_* on the webhook endpoints' failed deliveries
-- (store.FailedFilter.Endpoint); both take the same filters.
--
-- Failed events are never in a lease (settle and reclaim_expired take them
-- out), so the failed_* statements read outbox_events alone. They go through the
-- partial index outbox_events_failed_seq_idx (processed_at, seq) where status =
-- 'failed'; the lists are in (processed_at, seq) order, most recent first
-- (keyset pages, never OFFSET). Their filters, in every statement: $1 the
-- event type ('' for any), $2 failed at or after, $3 failed before (null:
-- no bound), $4 the aggregate type and $5 the aggregate id ('' for any),
-- $6 a text the last error contains ('' for any).

-- name: failed_list
-- Up to $9 failed events after the cursor ($7 processed_at, $8 seq; null:
-- from the start), in the columns of scanRecord (get, list).
select id, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       available_at, seq, status, retries, retries, coalesce(last_error, ''), '', null::timestamptz,
       created_at, processed_at
from {schema}.outbox_events
where status = 'failed'
  and ($1::text = '' or event_type = $1::text)
  and ($4::text = '' or aggregate_type = $4::text)
  and ($5::text = '' or aggregate_id = $5::text)
  and ($6::text = '' or strpos(last_error, $6::text) > 0)
  and processed_at >= coalesce($2::timestamptz, '-infinity')
  and processed_at < coalesce($3::timestamptz, 'infinity')
  and (processed_at, seq) < (coalesce($7::timestamptz, 'infinity'), coalesce($8::bigint, 0))
order by processed_at desc, seq desc
limit $9;

-- name: failed_scan
-- Like failed_list, only what grouping by error reads.
select id, processed_at, seq, coalesce(last_error, '')
from {schema}.outbox_events
where status = 'failed'
  and ($1::text = '' or event_type = $1::text)
  and ($4::text = '' or aggregate_type = $4::text)
  and ($5::text = '' or aggregate_id = $5::text)
  and ($6::text = '' or strpos(last_error, $6::text) > 0)
  and processed_at >= coalesce($2::timestamptz, '-infinity')
  and processed_at < coalesce($3::timestamptz, 'infinity')
  and (processed_at, seq) < (coalesce($7::timestamptz, 'infinity'), coalesce($8::bigint, 0))
order by processed_at desc, seq desc
limit $9;

-- name: failed_retry
-- Up to $7 failed events back to the queue, due now, as never attempted
-- (retries 0: the next claim is attempt 1). last_error stays until the next
-- attempt ends. Rows another retry or purge holds are skipped, not waited
-- for.
with picked as (
  select id from {schema}.outbox_events
  where status = 'failed'
    and ($1::text = '' or event_type = $1::text)
    and ($4::text = '' or aggregate_type = $4::text)
    and ($5::text = '' or aggregate_id = $5::text)
    and ($6::text = '' or strpos(last_error, $6::text) > 0)
    and processed_at >= coalesce($2::timestamptz, '-infinity')
    and processed_at < coalesce($3::timestamptz, 'infinity')
  limit $7
  for update skip locked
)
update {schema}.outbox_events e
set status = 'pending', retries = 0, available_at = now(), processed_at = null
from picked
where e.id = picked.id;

-- name: failed_retry_ids
-- failed_retry for the failed events among the ids $7.
update {schema}.outbox_events
set status = 'pending', retries = 0, available_at = now(), processed_at = null
where id = any($7::uuid[])
  and status = 'failed'
  and ($1::text = '' or event_type = $1::text)
  and ($4::text = '' or aggregate_type = $4::text)
  and ($5::text = '' or aggregate_id = $5::text)
  and ($6::text = '' or strpos(last_error, $6::text) > 0)
  and processed_at >= coalesce($2::timestamptz, '-infinity')
  and processed_at < coalesce($3::timestamptz, 'infinity');

-- name: failed_notify
-- Wakes the listening relays after a retry, whether they doze or not (the
-- retried rows were updated, not inserted: the producers' trigger did not
-- run).
select pg_notify('{channel}', '');

-- name: failed_purge
-- Deletes up to $7 failed events.
delete from {schema}.outbox_events
where id in (
  select id from {schema}.outbox_events
  where status = 'failed'
    and ($1::text = '' or event_type = $1::text)
    and ($4::text = '' or aggregate_type = $4::text)
    and ($5::text = '' or aggregate_id = $5::text)
    and ($6::text = '' or strpos(last_error, $6::text) > 0)
    and processed_at >= coalesce($2::timestamptz, '-infinity')
    and processed_at < coalesce($3::timestamptz, 'infinity')
  limit $7
  for update skip locked);

-- name: failed_purge_ids
-- failed_purge for the failed events among the ids $7.
delete from {schema}.outbox_events
where id = any($7::uuid[])
  and status = 'failed'
  and ($1::text = '' or event_type = $1::text)
  and ($4::text = '' or aggregate_type = $4::text)
  and ($5::text = '' or aggregate_id = $5::text)
  and ($6::text = '' or strpos(last_error, $6::text) > 0)
  and processed_at >= coalesce($2::timestamptz, '-infinity')
  and processed_at < coalesce($3::timestamptz, 'infinity');


-- The failed deliveries of webhook endpoints. Their last parameter is the
-- endpoint: one endpoint's id, or null for every endpoint. They go through
-- the partial indexes of migration 0010, in the lists' order:
-- endpoint_deliveries_failed_endpoint_idx (endpoint_id, processed_at, seq)
-- for one endpoint, endpoint_deliveries_failed_seq_idx (processed_at, seq)
-- for every endpoint, endpoint_deliveries_failed_aggregate_idx for one
-- aggregate. A shadow endpoint's dropped deliveries are not failed: never
-- read here. A delivery's id is its event's; its sequence number (seq) is
-- its own, the order the fan-out wrote deliveries in.

-- name: delivery_failed_list
-- Up to $9 failed deliveries of endpoint $10 after the cursor ($7
-- processed_at, $8 seq; null: from the start): their endpoint, then the
-- columns of scanRecord. A delivery's attempts all failed: they are both
-- its retries and its attempts.
select endpoint_id, event_id, aggregate_type, aggregate_id, event_type, payload, '', headers,
       available_at, seq, status, attempts, attempts, coalesce(last_error, ''), '', null::timestamptz,
       created_at, processed_at
from {schema}.endpoint_deliveries
where status = 'failed'
  and ($10::uuid is null or endpoint_id = $10::uuid)
  and ($1::text = '' or event_type = $1::text)
  and ($4::text = '' or aggregate_type = $4::text)
  and ($5::text = '' or aggregate_id = $5::text)
  and ($6::text = '' or strpos(last_error, $6::text) > 0)
  and processed_at >= coalesce($2::timestamptz, '-infinity')
  and processed_at < coalesce($3::timestamptz, 'infinity')
  and (processed_at, seq) < (coalesce($7::timestamptz, 'infinity'), coalesce($8::bigint, 0))
order by processed_at desc, seq desc
limit $9;

-- name: delivery_failed_scan
-- Like delivery_failed_list, only what grouping by error reads.
select event_id, endpoint_id, processed_at, seq, coalesce(last_error, '')
from {schema}.endpoint_deliveries
where status = 'failed'
  and ($10::uuid is null or endpoint_id = $10::uuid)
  and ($1::text = '' or event_type = $1::text)
  and ($4::text = '' or aggregate_type = $4::text)
  and ($5::text = '' or aggregate_id = $5::text)
  and ($6::text = '' or strpos(last_error, $6::text) > 0)
  and processed_at >= coalesce($2::timestamptz, '-infinity')
  and processed_at < coalesce($3::timestamptz, 'infinity')
  and (processed_at, seq) < (coalesce($7::timestamptz, 'infinity'), coalesce($8::bigint, 0))
order by processed_at desc, seq desc
limit $9;

-- name: delivery_failed_retry
-- Up to $7 failed deliveries of endpoint $8 back to their endpoint's queue,
-- due now, as never attempted (attempts 0: the next claim is attempt 1).
-- last_error stays until the next attempt ends. Rows another retry or purge
-- holds are skipped, not waited for. The rows are updated by their ctid,
-- which the lock keeps still until the statement ends: one TID probe per
-- row (a join on the primary key would hash the whole table for a batch
-- of thousands, done deliveries included). A ctid names a row of one
-- table only, and a partitioned table's partitions (Partition) share
-- ctids: each row probed is checked to be a picked one by (tableoid,
-- ctid), the row of one partition, in a hashed subplan ("is true" keeps
-- the IN from becoming a join, which a generic plan may make a nested
-- loop).
with picked as materialized (
  select tableoid, ctid from {schema}.endpoint_deliveries
  where status = 'failed'
    and ($8::uuid is null or endpoint_id = $8::uuid)
    and ($1::text = '' or event_type = $1::text)
    and ($4::text = '' or aggregate_type = $4::text)
    and ($5::text = '' or aggregate_id = $5::text)
    and ($6::text = '' or strpos(last_error, $6::text) > 0)
    and processed_at >= coalesce($2::timestamptz, '-infinity')
    and processed_at < coalesce($3::timestamptz, 'infinity')
  limit $7
  for update skip locked)
update {schema}.endpoint_deliveries
set status = 'pending', attempts = 0, available_at = now(), processed_at = null,
    lease_owner = null, lease_expires_at = null
where ctid = any(array(select ctid from picked))
  and ((tableoid, ctid) in (select tableoid, ctid from picked)) is true;

-- name: delivery_failed_retry_ids
-- delivery_failed_retry for the failed deliveries of endpoint $8 among the
-- event ids $7.
update {schema}.endpoint_deliveries
set status = 'pending', attempts = 0, available_at = now(), processed_at = null,
    lease_owner = null, lease_expires_at = null
where event_id = any($7::uuid[])
  and status = 'failed'
  and ($8::uuid is null or endpoint_id = $8::uuid)
  and ($1::text = '' or event_type = $1::text)
  and ($4::text = '' or aggregate_type = $4::text)
  and ($5::text = '' or aggregate_id = $5::text)
  and ($6::text = '' or strpos(last_error, $6::text) > 0)
  and processed_at >= coalesce($2::timestamptz, '-infinity')
  and processed_at < coalesce($3::timestamptz, 'infinity');

-- name: delivery_failed_purge
-- Deletes up to $7 failed deliveries of endpoint $8, by (tableoid, ctid)
-- as delivery_failed_retry updates them.
with picked as materialized (
  select tableoid, ctid from {schema}.endpoint_deliveries
  where status = 'failed'
    and ($8::uuid is null or endpoint_id = $8::uuid)
    and ($1::text = '' or event_type = $1::text)
    and ($4::text = '' or aggregate_type = $4::text)
    and ($5::text = '' or aggregate_id = $5::text)
    and ($6::text = '' or strpos(last_error, $6::text) > 0)
    and processed_at >= coalesce($2::timestamptz, '-infinity')
    and processed_at < coalesce($3::timestamptz, 'infinity')
  limit $7
  for update skip locked)
delete from {schema}.endpoint_deliveries
where ctid = any(array(select ctid from picked))
  and ((tableoid, ctid) in (select tableoid, ctid from picked)) is true;

-- name: delivery_failed_purge_ids
-- delivery_failed_purge for the failed deliveries of endpoint $8 among the
-- event ids $7.
delete from {schema}.endpoint_deliveries
where event_id = any($7::uuid[])
  and status = 'failed'
  and ($8::uuid is null or endpoint_id = $8::uuid)
  and ($1::text = '' or event_type = $1::text)
  and ($4::text = '' or aggregate_type = $4::text)
  and ($5::text = '' or aggregate_id = $5::text)
  and ($6::text = '' or strpos(last_error, $6::text) > 0)
  and processed_at >= coalesce($2::timestamptz, '-infinity')
  and processed_at < coalesce($3::timestamptz, 'infinity');
