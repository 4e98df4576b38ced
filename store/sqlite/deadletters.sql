-- Named queries of the dead-letter operations (store.DeadLetters) of the
-- SQLite store; "{prefix}" is filled in as in queries.sql.
--
-- They go through the partial index outbox_events_failed_seq_idx
-- (processed_at, seq) where status = 'failed' (seq is the rowid): the
-- lists are in (processed_at, seq) order, most recent first
-- (keyset pages, never OFFSET). Their filters, in every statement:
-- :event_type ('' for any), :since (failed at or after) and :before
-- (failed before), which the store sets to the smallest and largest
-- integers when there is no bound, :aggregate_type and :aggregate_id ('' for
-- any), :error_contains (a text the last error contains, '' for any).

-- name: failed_list
-- Up to :limit failed events after the cursor (:at, :seq), in the columns
-- of scanRecords (get, list).
select id, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       available_at, seq, status, retries, attempts, coalesce(last_error, ''), '', null,
       created_at, processed_at
from {prefix}outbox_events
where status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
  and (processed_at, seq) < (:at, :seq)
order by processed_at desc, seq desc
limit :limit;

-- name: failed_scan
-- Like failed_list, only what grouping by error reads.
select id, processed_at, seq, coalesce(last_error, '')
from {prefix}outbox_events
where status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
  and (processed_at, seq) < (:at, :seq)
order by processed_at desc, seq desc
limit :limit;

-- name: failed_retry
-- Up to :limit failed events back to the queue, due at :now, as never
-- attempted (attempts 0: the next claim is attempt 1). last_error stays
-- until the next attempt ends.
update {prefix}outbox_events
set status = 'pending', retries = 0, attempts = 0, available_at = :now, processed_at = null
where seq in (
  select seq from {prefix}outbox_events
  where status = 'failed'
    and (:event_type = '' or event_type = :event_type)
    and (:aggregate_type = '' or aggregate_type = :aggregate_type)
    and (:aggregate_id = '' or aggregate_id = :aggregate_id)
    and (:error_contains = '' or instr(last_error, :error_contains) > 0)
    and processed_at >= :since and processed_at < :before
  limit :limit);

-- name: failed_retry_ids
-- failed_retry for the failed events among :ids, a JSON array.
update {prefix}outbox_events
set status = 'pending', retries = 0, attempts = 0, available_at = :now, processed_at = null
where id in (select value from json_each(:ids))
  and status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before;

-- name: failed_purge
-- Deletes up to :limit failed events.
delete from {prefix}outbox_events
where seq in (
  select seq from {prefix}outbox_events
  where status = 'failed'
    and (:event_type = '' or event_type = :event_type)
    and (:aggregate_type = '' or aggregate_type = :aggregate_type)
    and (:aggregate_id = '' or aggregate_id = :aggregate_id)
    and (:error_contains = '' or instr(last_error, :error_contains) > 0)
    and processed_at >= :since and processed_at < :before
  limit :limit);

-- name: failed_purge_ids
-- failed_purge for the failed events among :ids, a JSON array.
delete from {prefix}outbox_events
where id in (select value from json_each(:ids))
  and status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before;
