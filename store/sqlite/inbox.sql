-- Named queries of the SQLite inbox, in the conventions of queries.sql:
-- "{prefix}" is the table name prefix, parameters are named, times are
-- INTEGER microseconds since the Unix epoch from the caller's clock (:now).
--
-- Every statement runs in a write transaction (BEGIN IMMEDIATE), so it sees
-- every committed row and no other writer, of this process or another, can
-- change them before it commits: where PostgreSQL waits on a row lock,
-- SQLite waits for the write lock, and the row is then read as committed.

-- name: inbox_take
-- Takes the row of event :id: inserts it, or takes over a free row (failed,
-- or pending with an expired lease or none), counting the attempt. :status
-- is 'done' for a handler run (its transaction commits the row done) or
-- 'pending' for a claim leased to :owner until :lease_until. No row
-- returned: the row is done or leased (see inbox_status).
insert into {prefix}inbox_events as e
  (id, received_at, handler_status, processed_at, payload, signature, event_type, aggregate_type, aggregate_id,
   seq, attempts, lease_owner, lease_expires_at)
values (:id, :now, :status, case when :status = 'done' then :now end, :payload, :signature, :event_type,
   :aggregate_type, :aggregate_id, :seq, 1, :owner, :lease_until)
on conflict (id) do update
set handler_status = excluded.handler_status,
    processed_at = excluded.processed_at,
    payload = excluded.payload,
    signature = excluded.signature,
    event_type = excluded.event_type,
    aggregate_type = excluded.aggregate_type,
    aggregate_id = excluded.aggregate_id,
    seq = excluded.seq,
    attempts = min(e.attempts, 999999999) + 1,
    lease_owner = excluded.lease_owner,
    lease_expires_at = excluded.lease_expires_at,
    last_error = case when excluded.handler_status = 'done' then null else e.last_error end
where e.handler_status <> 'done'
  and (e.lease_expires_at is null or e.lease_expires_at < :now)
returning attempts;

-- name: inbox_status
-- Why inbox_take took nothing: is the row done (or else leased)?
select handler_status = 'done' from {prefix}inbox_events where id = :id;

-- name: inbox_advance
-- Advances the last applied sequence number of aggregate (:aggregate_type,
-- :aggregate_id) from :seq - 1 to :seq; the first event (:seq = 1) creates
-- the row. One row changed: it advanced; none: see inbox_last_seq. (The
-- "where" of the select is also what lets SQLite parse the upsert.)
insert into {prefix}inbox_sequences (aggregate_type, aggregate_id, last_seq, updated_at)
select :aggregate_type, :aggregate_id, :seq, :now
where :seq = 1
   or exists (select 1 from {prefix}inbox_sequences
              where aggregate_type = :aggregate_type and aggregate_id = :aggregate_id and last_seq = :seq - 1)
on conflict (aggregate_type, aggregate_id) do update
set last_seq = excluded.last_seq, updated_at = excluded.updated_at
where last_seq = excluded.last_seq - 1;

-- name: inbox_last_seq
-- The last applied sequence number of aggregate (:aggregate_type,
-- :aggregate_id), or 0.
select coalesce((select last_seq from {prefix}inbox_sequences
                 where aggregate_type = :aggregate_type and aggregate_id = :aggregate_id), 0);

-- name: inbox_complete
-- Marks a claimed row done, if claim :owner still holds it.
update {prefix}inbox_events
set handler_status = 'done', processed_at = :now, last_error = null,
    lease_owner = null, lease_expires_at = null
where id = :id and lease_owner = :owner and handler_status = 'pending';

-- name: inbox_fail
-- Gives a claimed row up, if claim :owner still holds it: the next delivery
-- takes it over.
update {prefix}inbox_events
set handler_status = 'failed', last_error = :error, lease_owner = null, lease_expires_at = null
where id = :id and lease_owner = :owner and handler_status = 'pending';

-- name: inbox_record_failure
-- Records a failed handler run of event :id after its transaction rolled
-- back: the row is written, or made, failed with the attempt counted, unless
-- another delivery processed or claimed the event meanwhile.
insert into {prefix}inbox_events as e
  (id, received_at, handler_status, payload, signature, event_type, aggregate_type, aggregate_id, seq,
   attempts, last_error)
values (:id, :now, 'failed', :payload, :signature, :event_type, :aggregate_type, :aggregate_id, :seq, 1, :error)
on conflict (id) do update
set handler_status = 'failed', attempts = min(e.attempts, 999999999) + 1, last_error = excluded.last_error,
    lease_owner = null, lease_expires_at = null
where e.handler_status <> 'done'
  and (e.lease_expires_at is null or e.lease_expires_at < :now);

-- name: inbox_get
select id, event_type, aggregate_type, aggregate_id, coalesce(seq, 0), payload, coalesce(signature, ''),
       handler_status, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''), lease_expires_at,
       received_at, processed_at
from {prefix}inbox_events
where id = :id;

-- name: inbox_delete_processed
-- Retention: up to :limit done rows processed before :before, oldest first.
delete from {prefix}inbox_events
where id in (
  select id from {prefix}inbox_events
  where handler_status = 'done' and processed_at < :before
  order by processed_at
  limit :limit);

-- name: inbox_list_done
-- Up to :limit done rows (:status is 'done'), the most recently processed
-- first (inbox_events_done_idx), in the columns of inbox_get.
select id, event_type, aggregate_type, aggregate_id, coalesce(seq, 0), payload, coalesce(signature, ''),
       handler_status, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''), lease_expires_at,
       received_at, processed_at
from {prefix}inbox_events
where handler_status = 'done' and handler_status = :status
order by processed_at desc
limit :limit;

-- name: inbox_list_open
-- Up to :limit rows with status :status (pending or failed), the most
-- recently received first (inbox_events_open_idx), in the columns of
-- inbox_get.
select id, event_type, aggregate_type, aggregate_id, coalesce(seq, 0), payload, coalesce(signature, ''),
       handler_status, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''), lease_expires_at,
       received_at, processed_at
from {prefix}inbox_events
where handler_status <> 'done' and handler_status = :status
order by received_at desc
limit :limit;
