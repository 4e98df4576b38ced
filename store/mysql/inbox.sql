-- Named queries of the MySQL inbox, in the conventions of queries.sql:
-- "{prefix}" is the table name prefix, parameters are named, times are
-- DATETIME(6) in UTC from the caller's clock (:now).
--
-- Where PostgreSQL's upsert waits on the event's row lock, the store locks
-- the row with a locking read (inbox_lock: it sees the latest committed
-- row) and takes it over when it is free, or inserts it when it is not
-- there (inbox_insert). Two deliveries of one event run
-- one after the other: the second waits for the first's lock (or, when the
-- row is new, for its insert), then sees its committed row.

-- name: inbox_lock
-- The row of event :id, locked until the transaction ends.
select handler_status, lease_expires_at, attempts
from {prefix}inbox_events
where id = :id
for update;

-- name: inbox_insert
-- A new row for event :id, as :status ('done' for a handler run, 'pending'
-- for a claim leased to :owner until :lease_until, 'failed' for a handler
-- run that rolled back, with :error), its first attempt counted; a row
-- inserted meanwhile is left as it is (no row changed), locked: a
-- duplicate key of ON DUPLICATE KEY UPDATE takes the row's exclusive lock,
-- where a plain insert's would take a shared one, and two transactions
-- waiting on one event's insert would deadlock when both went on to lock
-- it.
insert into {prefix}inbox_events
  (id, received_at, handler_status, processed_at, payload, signature, event_type, aggregate_type, aggregate_id,
   seq, attempts, lease_owner, lease_expires_at, last_error)
values (:id, :now, :status, if(:status = 'done', :now, null), :payload, :signature, :event_type,
   :aggregate_type, :aggregate_id, :seq, 1, :owner, :lease_until, :error)
on duplicate key update id = id;

-- name: inbox_take_over
-- Takes over the free row of event :id (failed, or pending with an expired
-- lease or none: inbox_lock said so) as inbox_insert writes a new one,
-- counting the attempt.
update {prefix}inbox_events
set handler_status = :status,
    processed_at = if(:status = 'done', :now, null),
    payload = :payload,
    signature = :signature,
    event_type = :event_type,
    aggregate_type = :aggregate_type,
    aggregate_id = :aggregate_id,
    seq = :seq,
    last_error = if(:status = 'done', null, coalesce(:error, last_error)),
    attempts = least(greatest(attempts, 0), 999999999) + 1,
    lease_owner = :owner,
    lease_expires_at = :lease_until
where id = :id;

-- name: inbox_attempts
select attempts from {prefix}inbox_events where id = :id;

-- name: inbox_seq_lock
-- The last applied sequence number of aggregate (:aggregate_type,
-- :aggregate_id), its row locked until the transaction ends.
select last_seq from {prefix}inbox_sequences
where agg_hash = unhex(sha2(concat(:aggregate_type, char(0), :aggregate_id), 256))
for update;

-- name: inbox_advance
-- Advances the last applied sequence number of aggregate (:aggregate_type,
-- :aggregate_id) from :seq - 1 (inbox_seq_lock read it) to :seq.
update {prefix}inbox_sequences
set updated_at = :now, last_seq = :seq
where agg_hash = unhex(sha2(concat(:aggregate_type, char(0), :aggregate_id), 256))
  and last_seq = :seq - 1;

-- name: inbox_first_seq
-- The first event of aggregate (:aggregate_type, :aggregate_id): a
-- duplicate key when another transaction wrote it first.
insert into {prefix}inbox_sequences (aggregate_type, aggregate_id, last_seq, updated_at)
values (:aggregate_type, :aggregate_id, 1, :now);

-- name: inbox_last_seq
-- The last applied sequence number of aggregate (:aggregate_type,
-- :aggregate_id), or 0.
select coalesce((select last_seq from {prefix}inbox_sequences
                 where agg_hash = unhex(sha2(concat(:aggregate_type, char(0), :aggregate_id), 256))), 0);

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

-- name: inbox_get
select id, event_type, aggregate_type, aggregate_id, coalesce(seq, 0), payload, coalesce(signature, ''),
       handler_status, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''), lease_expires_at,
       received_at, processed_at
from {prefix}inbox_events
where id = :id;

-- name: inbox_delete_processed
-- Retention: up to :limit done rows processed before :before, oldest first.
delete from {prefix}inbox_events
where handler_status = 'done' and processed_at < :before
order by processed_at
limit :limit;

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
where handler_status = :status
order by received_at desc
limit :limit;
