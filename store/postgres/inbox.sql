-- Named queries of the PostgreSQL inbox. "{schema}" is replaced by the
-- quoted schema name; each query starts at "-- name:".

-- name: inbox_take
-- Takes the row of event $1, in the caller's transaction: inserts it, or
-- takes over a free row (failed, or pending with an expired lease or none),
-- counting the attempt. $2 is 'done' for a handler run (its transaction
-- commits the row done) or 'pending' for a claim leased to $9 for $10
-- milliseconds. An uncommitted row of the same id is waited for. No row
-- returned: the row is done or leased, and locked until the transaction
-- ends (see inbox_status).
insert into {schema}.inbox_events as e
  (id, handler_status, processed_at, payload, signature, event_type, aggregate_type, aggregate_id, seq,
   attempts, lease_owner, lease_expires_at)
values ($1, $2::text, case when $2::text = 'done' then now() end, $3::jsonb, $4, $5, $6, $7, $8,
   1, $9, now() + $10::bigint * interval '1 millisecond')
on conflict (id) do update
set handler_status = excluded.handler_status,
    processed_at = excluded.processed_at,
    payload = excluded.payload,
    signature = excluded.signature,
    event_type = excluded.event_type,
    aggregate_type = excluded.aggregate_type,
    aggregate_id = excluded.aggregate_id,
    seq = excluded.seq,
    attempts = least(e.attempts, 999999999) + 1,
    lease_owner = excluded.lease_owner,
    lease_expires_at = excluded.lease_expires_at,
    last_error = case when excluded.handler_status = 'done' then null else e.last_error end
where e.handler_status <> 'done'
  and (e.lease_expires_at is null or e.lease_expires_at < now())
returning e.attempts;

-- name: inbox_status
-- Why inbox_take took nothing: is the row done (or else leased)?
select handler_status = 'done' from {schema}.inbox_events where id = $1;

-- name: inbox_advance
-- Advances the last applied sequence number of aggregate ($1, $2) from
-- $3 - 1 to $3; the first event ($3 = 1) creates the row. Waits for a
-- transaction advancing the same aggregate. Returns whether it advanced,
-- and the last applied number as of the statement's start.
with advanced as (
  update {schema}.inbox_sequences
  set last_seq = $3::bigint, updated_at = now()
  where aggregate_type = $1 and aggregate_id = $2 and last_seq = $3::bigint - 1
  returning 1
), created as (
  insert into {schema}.inbox_sequences (aggregate_type, aggregate_id, last_seq)
  select $1, $2, $3::bigint where $3::bigint = 1 and not exists (select 1 from advanced)
  on conflict do nothing
  returning 1
)
select exists (select 1 from advanced) or exists (select 1 from created),
       coalesce((select last_seq from {schema}.inbox_sequences
                 where aggregate_type = $1 and aggregate_id = $2), 0);

-- name: inbox_last_seq
-- The last applied sequence number of aggregate ($1, $2), or 0.
select coalesce((select last_seq from {schema}.inbox_sequences
                 where aggregate_type = $1 and aggregate_id = $2), 0);

-- name: inbox_complete
-- Marks a claimed row done, if claim $2 still holds it.
update {schema}.inbox_events
set handler_status = 'done', processed_at = now(), last_error = null,
    lease_owner = null, lease_expires_at = null
where id = $1 and lease_owner = $2 and handler_status = 'pending';

-- name: inbox_fail
-- Gives a claimed row up, if claim $2 still holds it: the next delivery
-- takes it over.
update {schema}.inbox_events
set handler_status = 'failed', last_error = $3, lease_owner = null, lease_expires_at = null
where id = $1 and lease_owner = $2 and handler_status = 'pending';

-- name: inbox_record_failure
-- Records a failed handler run of event $1 after its transaction rolled
-- back: the row is written, or made, failed with the attempt counted, unless
-- another delivery processed or claimed the event meanwhile.
insert into {schema}.inbox_events as e
  (id, handler_status, payload, signature, event_type, aggregate_type, aggregate_id, seq, attempts, last_error)
values ($1, 'failed', $2::jsonb, $3, $4, $5, $6, $7, 1, $8)
on conflict (id) do update
set handler_status = 'failed', attempts = least(e.attempts, 999999999) + 1, last_error = excluded.last_error,
    lease_owner = null, lease_expires_at = null
where e.handler_status <> 'done'
  and (e.lease_expires_at is null or e.lease_expires_at < now());

-- name: inbox_get
select id, event_type, aggregate_type, aggregate_id, coalesce(seq, 0), payload, coalesce(signature, ''),
       handler_status, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''), lease_expires_at,
       received_at, processed_at
from {schema}.inbox_events
where id = $1;

-- name: inbox_delete_processed
-- Retention: up to $2 done rows processed before $1, oldest first.
delete from {schema}.inbox_events
where id in (
  select id from {schema}.inbox_events
  where handler_status = 'done' and processed_at < $1
  order by processed_at
  limit $2);

-- name: inbox_list_done
-- Up to $2 done rows ($1 is 'done'), the most recently processed first
-- (inbox_events_done_idx), in the columns of inbox_get.
select id, event_type, aggregate_type, aggregate_id, coalesce(seq, 0), payload, coalesce(signature, ''),
       handler_status, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''), lease_expires_at,
       received_at, processed_at
from {schema}.inbox_events
where handler_status = 'done' and handler_status = $1::text
order by processed_at desc
limit $2;

-- name: inbox_list_open
-- Up to $2 rows with status $1 (pending or failed), the most recently
-- received first (inbox_events_open_idx), in the columns of inbox_get.
select id, event_type, aggregate_type, aggregate_id, coalesce(seq, 0), payload, coalesce(signature, ''),
       handler_status, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''), lease_expires_at,
       received_at, processed_at
from {schema}.inbox_events
where handler_status <> 'done' and handler_status = $1::text
order by received_at desc
limit $2;
