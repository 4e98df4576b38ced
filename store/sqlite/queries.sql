-- Named queries of the SQLite store. "{prefix}" is replaced by the table name
-- prefix when the store is opened; each query starts at "-- name:".
-- Parameters are named (:now, :owner, ...). Times are INTEGER microseconds
-- since the Unix epoch, computed by the store ("now" is the caller's clock,
-- which is the database's clock: SQLite runs in the process). Lists of ids
-- and outcomes arrive as JSON arrays, read with json_each.
--
-- Every statement that writes runs in a write transaction (BEGIN IMMEDIATE)
-- of its own: SQLite has one writer at a time, which is what makes a claim
-- exclusive without FOR UPDATE SKIP LOCKED.

-- name: migrations_table_exists
select exists (select 1 from sqlite_schema where type = 'table' and name = '{prefix}postbox_migrations');

-- name: migrated_version
-- The highest migration applied (the table exists: see the query above).
select coalesce(max(version), 0) from {prefix}postbox_migrations;

-- name: enqueue
-- One event; a dedup_key already in the outbox skips the row (0 rows
-- affected), a repeated id fails the statement.
insert into {prefix}outbox_events
  (id, aggregate_type, aggregate_id, event_type, payload, dedup_key, headers, available_at, created_at)
values
  (:id, :aggregate_type, :aggregate_id, :event_type, :payload, :dedup_key, :headers, :available_at, :now)
on conflict (dedup_key) where dedup_key is not null do nothing;

-- name: claim
-- Leases up to :limit due events to relay :owner until :lease_until, taking
-- only events after (:after_at, :after_seq) in claim order.
update {prefix}outbox_events
set status = 'processing',
    lease_owner = :owner,
    lease_expires_at = :lease_until,
    -- A value no row should hold (text, out of bounds: migration 0008) is
    -- left as it is, for the claim to report (Delivery.Invalid).
    attempts = case when typeof(attempts) = 'integer' and attempts between 0 and 999999999
      then attempts + 1 else attempts end
where seq in (
  -- With a byte bound (:max_bytes > 0): the events up to the one that would
  -- take the payloads' bytes past it, always the first.
  select seq from (
    select seq,
      sum(case when :max_bytes > 0 then octet_length(payload) else 0 end)
        over (order by available_at, seq rows unbounded preceding) as total,
      row_number() over (order by available_at, seq) as n
    from (
      select seq, available_at, payload from {prefix}outbox_events
      where status = 'pending' and available_at <= :now
        and (available_at, seq) > (:after_at, :after_seq)
      order by available_at, seq
      limit :limit))
  where :max_bytes <= 0 or n = 1 or total <= :max_bytes)
returning id, seq, aggregate_type, aggregate_id, event_type, payload, headers, attempts, created_at, available_at;

-- name: claim_ordered
-- Like claim, but only the oldest unfinished event of each aggregate, and
-- only while no other event of that aggregate is pending or being delivered
-- (and without :after_at, :after_seq).
update {prefix}outbox_events
set status = 'processing',
    lease_owner = :owner,
    lease_expires_at = :lease_until,
    -- A value no row should hold (text, out of bounds: migration 0008) is
    -- left as it is, for the claim to report (Delivery.Invalid).
    attempts = case when typeof(attempts) = 'integer' and attempts between 0 and 999999999
      then attempts + 1 else attempts end
where seq in (
  select seq from (
    select seq,
      sum(case when :max_bytes > 0 then octet_length(payload) else 0 end)
        over (order by available_at, seq rows unbounded preceding) as total,
      row_number() over (order by available_at, seq) as n
    from (
      select e.seq, e.available_at, e.payload from {prefix}outbox_events e
      where e.status = 'pending' and e.available_at <= :now
        and not exists (
          select 1 from {prefix}outbox_events p
          where p.aggregate_type = e.aggregate_type
            and p.aggregate_id = e.aggregate_id
            and p.status in ('pending', 'processing')
            and p.seq < e.seq)
      order by e.available_at, e.seq
      limit :limit))
  where :max_bytes <= 0 or n = 1 or total <= :max_bytes)
returning id, seq, aggregate_type, aggregate_id, event_type, payload, headers, attempts, created_at, available_at;

-- name: hold_keys
-- The dedup keys of the delivered :ids (before settle_done or
-- settle_delete), held until :until (SettleParams.DedupWindow, migration
-- 0008).
insert into {prefix}outbox_held_keys (dedup_key, expires_at)
select dedup_key, :until from {prefix}outbox_events
where id in (select value from json_each(:ids)) and status in ('pending', 'processing')
  and dedup_key is not null
on conflict (dedup_key) do update set expires_at = max(expires_at, excluded.expires_at);

-- name: settle_done
-- :ids, a JSON array of delivered ids, whoever holds them.
update {prefix}outbox_events
set status = 'done', processed_at = :now, lease_owner = null, lease_expires_at = null, last_error = null
where id in (select value from json_each(:ids)) and status in ('pending', 'processing');

-- name: settle_delete
-- :ids, a JSON array of delivered ids, whoever holds them; :now is unused.
delete from {prefix}outbox_events
where id in (select value from json_each(:ids)) and status in ('pending', 'processing') and :now = :now;

-- name: settle_retry
-- :retries, a JSON array of {"id", "at", "error"}, for events still leased
-- to :owner.
update {prefix}outbox_events as e
set status = 'pending', available_at = r.at, retries = e.attempts, last_error = r.error,
    lease_owner = null, lease_expires_at = null
from (select value ->> 'id' as id, value ->> 'at' as at, value ->> 'error' as error
      from json_each(:retries)) as r
where e.id = r.id and e.lease_owner = :owner and e.status = 'processing';

-- name: settle_failed
-- :failures, a JSON array of {"id", "error"}, for events still leased to
-- :owner.
update {prefix}outbox_events as e
set status = 'failed', processed_at = :now, retries = e.attempts, last_error = f.error,
    lease_owner = null, lease_expires_at = null
from (select value ->> 'id' as id, value ->> 'error' as error
      from json_each(:failures)) as f
where e.id = f.id and e.lease_owner = :owner and e.status = 'processing';

-- name: extend_lease
-- Returns the ids still leased to :owner.
update {prefix}outbox_events
set lease_expires_at = :lease_until
where id in (select value from json_each(:ids)) and lease_owner = :owner and status = 'processing'
returning id;

-- name: release
-- Graceful shutdown: the attempt did not happen, so it is not counted.
update {prefix}outbox_events
set status = 'pending', attempts = max(attempts - 1, 0), available_at = :now,
    lease_owner = null, lease_expires_at = null
where id in (select value from json_each(:ids)) and lease_owner = :owner and status = 'processing';

-- name: expired_owners
-- The relays whose lease expired, and how many events each held; run in the
-- transaction of reclaim_expired, before it.
select coalesce(lease_owner, '?'), count(*)
from {prefix}outbox_events
where status = 'processing' and lease_expires_at < :now
group by lease_owner
order by lease_owner;

-- name: reclaim_expired
-- The events of relays that stopped without settling: an expired lease counts
-- as a failed attempt.
update {prefix}outbox_events
set status = case when attempts >= :max_attempts then 'failed' else 'pending' end,
    processed_at = case when attempts >= :max_attempts then :now end,
    retries = attempts,
    available_at = :now,
    last_error = 'lease of relay ' || coalesce(lease_owner, '?') || ' expired before the delivery was settled',
    lease_owner = null,
    lease_expires_at = null
where status = 'processing' and lease_expires_at < :now;

-- name: purge_done
delete from {prefix}outbox_events
where seq in (
  select seq from {prefix}outbox_events
  where status = 'done' and processed_at < :before
  order by processed_at
  limit :limit);

-- name: purge_held_keys
-- Up to :limit dedup keys whose hold (migration 0008) has ended.
delete from {prefix}outbox_held_keys
where dedup_key in (
  select dedup_key from {prefix}outbox_held_keys
  where expires_at <= :now
  limit :limit);

-- name: stats
-- Each count is answered from its partial index.
select
  (select count(*) from {prefix}outbox_events where status = 'pending'),
  (select count(*) from {prefix}outbox_events where status = 'processing'),
  (select count(*) from {prefix}outbox_events where status = 'done'),
  (select count(*) from {prefix}outbox_events where status = 'failed'),
  (select min(created_at) from {prefix}outbox_events where status = 'pending');

-- name: stats_up_to
-- Stats at a bounded cost (the metrics' gauges): each count stops at :limit
-- (reading at most :limit rows of a partial index); the oldest pending age is
-- that of the first due event in claim order (outbox_events_pending_idx).
select
  (select count(*) from (select 1 from {prefix}outbox_events where status = 'pending' limit :limit)),
  (select count(*) from (select 1 from {prefix}outbox_events where status = 'processing' limit :limit)),
  (select count(*) from (select 1 from {prefix}outbox_events where status = 'done' limit :limit)),
  (select count(*) from (select 1 from {prefix}outbox_events where status = 'failed' limit :limit)),
  (select created_at from {prefix}outbox_events
   where status = 'pending' and available_at <= :now
   order by available_at, seq
   limit 1);

-- name: stats_by_type
-- Pending, processing and failed events per type; each branch reads its
-- partial index. Delivered events are not read.
select event_type, sum(pending), sum(processing), sum(failed)
from (
  select event_type, 1 as pending, 0 as processing, 0 as failed from {prefix}outbox_events where status = 'pending'
  union all
  select event_type, 0, 1, 0 from {prefix}outbox_events where status = 'processing'
  union all
  select event_type, 0, 0, 1 from {prefix}outbox_events where status = 'failed'
)
group by event_type
order by count(*) desc, event_type;

-- name: get
select id, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       available_at, seq, status, retries, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''),
       lease_expires_at, created_at, processed_at
from {prefix}outbox_events
where id = :id;

-- name: list
select id, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       available_at, seq, status, retries, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''),
       lease_expires_at, created_at, processed_at
from {prefix}outbox_events
where status = :status
order by seq
limit :limit;

-- name: get_by_dedup_key
-- The id of the event written with dedup key :dedup_key; get reads the
-- rest.
select id from {prefix}outbox_events where dedup_key = :dedup_key;

-- name: relays
-- The relays that hold leases (outbox_events_lease_idx): how many events,
-- and when the leases end.
select lease_owner, count(*), min(lease_expires_at), max(lease_expires_at)
from {prefix}outbox_events
where status = 'processing' and lease_owner is not null
group by lease_owner
order by lease_owner;

-- name: last_seq
-- The last seq given out (autoincrement keeps it in sqlite_sequence, also
-- after the rows are deleted); zero before the first event.
select coalesce((select seq from sqlite_sequence where name = '{prefix}outbox_events'), 0);

-- name: history_read
-- A page of HistoryRead (sqlstore.ReadHistory): up to :limit delivered
-- events in id order after :after ('' from the first: every id is
-- greater), written from :since to before :until (null: open), of
-- aggregate type :aggregate_type and id :aggregate_id (empty: any), whose
-- type one of the globs :types matches (postbox_types_match, the store's
-- function: path.Match; null: any type).
select id, seq, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       created_at, processed_at
from {prefix}outbox_events
where status = 'done'
  and id > :after
  and (:since is null or created_at >= :since)
  and (:until is null or created_at < :until)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
  and (:types is null or postbox_types_match(:types, event_type))
order by id
limit :limit;

-- name: requeue_kept
-- Requeue's kept rows: done rows of :ids (a JSON array) back to the
-- queue, due :now, as never attempted, their headers marked with the
-- replay's name :replay under the header :header (postbox.HeaderReplay;
-- headers that are no object, which a claim would
-- refuse, become the mark alone). Updated rows wake no relay by
-- themselves: the store wakes them after the commit.
update {prefix}outbox_events
set status = 'pending', available_at = :now, retries = 0, attempts = 0, last_error = null, processed_at = null,
    lease_owner = null, lease_expires_at = null,
    headers = json_set(
      case when json_valid(headers) then case when json_type(headers) = 'object' then headers else '{}' end else '{}' end,
      '$.' || json_quote(:header), :replay)
where id in (select value from json_each(:ids)) and status = 'done';

-- name: requeue_kept_page
-- RequeueKept in one statement: the page history_read returns (its very
-- statement, which RequeueKept puts in picked's place, with its
-- parameters) goes back to the queue as requeue_kept sends it, no row
-- read out: in one statement, so every row of the page is still done when
-- it is updated (writers take turns), and the ids returned are the page.
with picked as (
{history_read}
)
update {prefix}outbox_events
set status = 'pending', available_at = :now, retries = 0, attempts = 0, last_error = null, processed_at = null,
    lease_owner = null, lease_expires_at = null,
    headers = json_set(
      case when json_valid(headers) then case when json_type(headers) = 'object' then headers else '{}' end else '{}' end,
      '$.' || json_quote(:header), :replay)
where id in (select id from picked) and status = 'done'
returning id;

-- name: requeue_insert
-- Requeue's events whose row is gone: :events, a JSON array of {"id",
-- "aggregate_type", "aggregate_id", "event_type", "payload", "headers"
-- (with the mark), "created_at" (absent: :now)}, written again pending
-- without a dedup key (migration 0008's trigger of held keys is not
-- asked), in the array's order; an id that has a row is left to
-- requeue_kept.
insert into {prefix}outbox_events
  (id, aggregate_type, aggregate_id, event_type, payload, headers, available_at, created_at)
select r.value ->> 'id', r.value ->> 'aggregate_type', r.value ->> 'aggregate_id', r.value ->> 'event_type',
       r.value ->> 'payload', r.value ->> 'headers', :now, coalesce(r.value ->> 'created_at', :now)
from json_each(:events) r
where not exists (select 1 from {prefix}outbox_events e where e.id = r.value ->> 'id')
order by r.key;

-- name: expire_read
-- Retention with a Keep: up to :limit delivered events processed before
-- :before, oldest first (outbox_events_done_idx), read as history_read
-- reads them.
select id, seq, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       created_at, processed_at
from {prefix}outbox_events
where status = 'done' and processed_at < :before
order by processed_at, id
limit :limit;

-- name: expire_delete
-- The events expire_read returned (:ids, a JSON array), once kept: those
-- still done (a replay may have requeued one since).
delete from {prefix}outbox_events
where id in (select value from json_each(:ids)) and status = 'done';
