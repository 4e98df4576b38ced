-- Named queries of the dead-letter operations (store.DeadLetters) of the
-- MySQL store; "{prefix}" is filled in as in queries.sql.
--
-- The statements named failed_* work on the outbox's failed events, those
-- named delivery_failed_* on the webhook endpoints' failed deliveries
-- (store.FailedFilter.Endpoint); both take the same filters.
--
-- The failed_* statements go through the index outbox_events_done_idx
-- (status, processed_at), which ends with the primary key, seq: the lists
-- are in (processed_at, seq) order, most recent first (keyset pages, never
-- OFFSET). Their filters, in every statement: :event_type ('' for any),
-- :since (failed at or after) and :before (failed before), which the store
-- sets to the first and last times of DATETIME when there is no bound, :aggregate_type and :aggregate_id ('' for
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
  and (processed_at < :at or (processed_at = :at and seq < :seq))
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
  and (processed_at < :at or (processed_at = :at and seq < :seq))
order by processed_at desc, seq desc
limit :limit;

-- name: failed_retry
-- Up to :limit failed events back to the queue, due at :now, as never
-- attempted (attempts 0: the next claim is attempt 1). last_error stays
-- until the next attempt ends.
update {prefix}outbox_events
set status = 'pending', retries = 0, attempts = 0, available_at = :now, processed_at = null
where status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
limit :limit;

-- name: failed_retry_ids
-- failed_retry for the failed events among :ids, a JSON array.
update {prefix}outbox_events
set status = 'pending', retries = 0, attempts = 0, available_at = :now, processed_at = null
where id in (select id from json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j)
  and status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before;

-- name: failed_purge
-- Deletes up to :limit failed events.
delete from {prefix}outbox_events
where status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
limit :limit;

-- name: failed_purge_ids
-- failed_purge for the failed events among :ids, a JSON array.
delete from {prefix}outbox_events
where id in (select id from json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j)
  and status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before;

-- The failed deliveries of webhook endpoints. They go through the
-- indexes of migration 0010, in the lists' order: (endpoint_id, status,
-- processed_at, seq) for one endpoint, and (status, processed_at, seq) for
-- every endpoint. A
-- shadow endpoint's dropped deliveries are not failed: never read here. A
-- delivery's id is its event's; its sequence number (seq) is its own, the
-- order the fan-out wrote deliveries in.
--
-- A test of whether :endpoint is set would keep the lists from the index
-- of one endpoint (a page of an endpoint with few failures would read
-- every failed delivery of the others). The lists, which page, and the scans of
-- grouping have a statement for one endpoint (:endpoint) and one, named
-- *_any, for every endpoint. Retry and purge take their batches in no
-- order, with :endpoint '' for every endpoint: by filter, they read the
-- failed deliveries of every endpoint to find those of one (a cost paid
-- once per batch, not per page); by ids, they find them by event id.

-- name: delivery_failed_list
-- Up to :limit failed deliveries of :endpoint after the cursor (:at,
-- :seq): their endpoint, then the columns of scanRecords. A delivery's
-- attempts all failed: they are both its retries and its attempts.
select endpoint_id, event_id, aggregate_type, aggregate_id, event_type, payload, '', headers,
       available_at, seq, status, attempts, attempts, coalesce(last_error, ''), '', null,
       created_at, processed_at
from {prefix}endpoint_deliveries
where status = 'failed'
  and endpoint_id = :endpoint
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
  and (processed_at < :at or (processed_at = :at and seq < :seq))
order by processed_at desc, seq desc
limit :limit;

-- name: delivery_failed_list_any
-- delivery_failed_list of every endpoint.
select endpoint_id, event_id, aggregate_type, aggregate_id, event_type, payload, '', headers,
       available_at, seq, status, attempts, attempts, coalesce(last_error, ''), '', null,
       created_at, processed_at
from {prefix}endpoint_deliveries
where status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
  and (processed_at < :at or (processed_at = :at and seq < :seq))
order by processed_at desc, seq desc
limit :limit;

-- name: delivery_failed_scan
-- Like delivery_failed_list, only what grouping by error reads.
select event_id, endpoint_id, processed_at, seq, coalesce(last_error, '')
from {prefix}endpoint_deliveries
where status = 'failed'
  and endpoint_id = :endpoint
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
  and (processed_at < :at or (processed_at = :at and seq < :seq))
order by processed_at desc, seq desc
limit :limit;

-- name: delivery_failed_scan_any
-- delivery_failed_scan of every endpoint.
select event_id, endpoint_id, processed_at, seq, coalesce(last_error, '')
from {prefix}endpoint_deliveries
where status = 'failed'
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
  and (processed_at < :at or (processed_at = :at and seq < :seq))
order by processed_at desc, seq desc
limit :limit;

-- name: delivery_failed_retry
-- Up to :limit failed deliveries back to their endpoint's queue, due at
-- :now, as never attempted (attempts 0: the next claim is attempt 1).
-- last_error stays until the next attempt ends.
update {prefix}endpoint_deliveries
set status = 'pending', attempts = 0, available_at = :now, processed_at = null,
    lease_owner = null, lease_expires_at = null
where status = 'failed'
  and (:endpoint = '' or endpoint_id = :endpoint)
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
limit :limit;

-- name: delivery_failed_retry_ids
-- delivery_failed_retry for the failed deliveries among the event ids
-- :ids, a JSON array.
update {prefix}endpoint_deliveries
set status = 'pending', attempts = 0, available_at = :now, processed_at = null,
    lease_owner = null, lease_expires_at = null
where event_id in (select id from json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j)
  and status = 'failed'
  and (:endpoint = '' or endpoint_id = :endpoint)
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before;

-- name: delivery_failed_purge
-- Deletes up to :limit failed deliveries.
delete from {prefix}endpoint_deliveries
where status = 'failed'
  and (:endpoint = '' or endpoint_id = :endpoint)
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before
limit :limit;

-- name: delivery_failed_purge_ids
-- delivery_failed_purge for the failed deliveries among the event ids
-- :ids, a JSON array.
delete from {prefix}endpoint_deliveries
where event_id in (select id from json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j)
  and status = 'failed'
  and (:endpoint = '' or endpoint_id = :endpoint)
  and (:event_type = '' or event_type = :event_type)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:error_contains = '' or instr(last_error, :error_contains) > 0)
  and processed_at >= :since and processed_at < :before;
