-- Named queries of the MySQL store. "{prefix}" is replaced by the table name
-- prefix when the store is opened; each query starts at "-- name:".
-- Parameters are named (:now, :owner, ...), rewritten to "?" by the store
-- (named.go). Times are DATETIME(6) in UTC; "now" is the caller's clock,
-- except in the SQL defaults and triggers (utc_timestamp(6), the server's).
-- Lists of ids and outcomes arrive as JSON arrays, read with json_table.
--
-- The store's transactions run at READ COMMITTED. A claim locks the rows it
-- takes with SELECT ... FOR UPDATE SKIP LOCKED, so that relays claiming at
-- once skip each other's rows, then updates them by seq: MySQL has no
-- UPDATE ... RETURNING (MariaDB has it for INSERT and DELETE only).

-- name: migrations_table_exists
select count(*) > 0 from information_schema.tables
where table_schema = database() and table_name = '{prefix}postbox_migrations';

-- name: migrated_version
-- The highest migration applied (the table exists: see the query above).
select coalesce(max(version), 0) from {prefix}postbox_migrations;

-- name: enqueue
-- One event; a dedup_key already in the outbox (or held: migration 0008)
-- fails the statement with a duplicate key (1062) naming
-- outbox_events_dedup_key_uq (or dedup_key), a repeated id with one naming
-- outbox_events_id_uq. The transaction stays usable.
insert into {prefix}outbox_events
  (id, aggregate_type, aggregate_id, event_type, payload, dedup_key, headers, available_at, created_at)
values
  (:id, :aggregate_type, :aggregate_id, :event_type, :payload, :dedup_key, :headers, :available_at, :now);

-- name: claim_lock
-- Locks up to :limit due events, after (:after_at, :after_seq) in claim
-- order, skipping those another claim holds; returns what the claim needs
-- to bound its bytes.
select seq, octet_length(payload)
from {prefix}outbox_events
where status = 'pending' and available_at <= :now
  and (available_at > :after_at or (available_at = :after_at and seq > :after_seq))
order by available_at, seq
limit :limit
for update skip locked;

-- name: claim_heads
-- Ordered claims, step 1 (a plain read, no lock): the oldest unfinished
-- event of up to :limit aggregates, each due, pending, and the only
-- unfinished event of its aggregate before it.
select e.seq
from {prefix}outbox_events e
where e.status = 'pending' and e.available_at <= :now
  and not exists (
    select 1 from {prefix}outbox_events p
    where p.aggregate_type = e.aggregate_type
      and p.aggregate_id = e.aggregate_id
      and p.status in ('pending', 'processing')
      and p.seq < e.seq)
order by e.available_at, e.seq
limit :limit;

-- name: claim_lock_heads
-- Ordered claims, step 2: locks those of the heads (:seqs, a JSON array)
-- still pending, skipping those another claim holds. A head cannot stop
-- being one meanwhile: only an event written later could come before it.
select seq, octet_length(payload)
from {prefix}outbox_events
where seq in (select seq from json_table(:seqs, '$[*]' columns (seq bigint path '$')) j)
  and status = 'pending'
order by available_at, seq
for update skip locked;

-- name: claim_update
-- Leases the locked events :seqs to :owner until :lease_until, counting the
-- attempt (a value out of bounds, which migration 0008 refuses, is left as
-- it is, for the claim to report: ClaimedEvent.Invalid).
update {prefix}outbox_events e
join json_table(:seqs, '$[*]' columns (seq bigint path '$')) j on e.seq = j.seq
set e.status = 'processing', e.lease_owner = :owner, e.lease_expires_at = :lease_until,
    e.attempts = if(e.attempts between 0 and 999999999, e.attempts + 1, e.attempts);

-- name: claim_read
-- The leased events :seqs, read as the claim returns them.
select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload, e.headers, e.attempts,
       e.created_at, e.available_at
from {prefix}outbox_events e
join json_table(:seqs, '$[*]' columns (seq bigint path '$')) j on e.seq = j.seq;

-- name: hold_keys
-- The dedup keys of the delivered :ids (before settle_done or
-- settle_delete), held until :until (SettleParams.DedupWindow, migration
-- 0008).
insert into {prefix}outbox_held_keys (dedup_key, expires_at)
select e.dedup_key, :until from {prefix}outbox_events e
join json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j on e.id = j.id
where e.status in ('pending', 'processing') and e.dedup_key is not null
on duplicate key update expires_at = greatest(expires_at, values(expires_at));

-- name: settle_done
-- :ids, a JSON array of delivered ids, whoever holds them.
update {prefix}outbox_events e
join json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j on e.id = j.id
set e.status = 'done', e.processed_at = :now, e.lease_owner = null, e.lease_expires_at = null, e.last_error = null
where e.status in ('pending', 'processing');

-- name: settle_delete
-- :ids, a JSON array of delivered ids, whoever holds them.
delete e from {prefix}outbox_events e
join json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j on e.id = j.id
where e.status in ('pending', 'processing');

-- name: settle_retry
-- :retries, a JSON array of {"id", "at", "error"}, for events still leased
-- to :owner.
update {prefix}outbox_events e
join json_table(:retries, '$[*]' columns (
  id char(36) character set ascii collate ascii_bin path '$.id',
  at datetime(6) path '$.at',
  error mediumtext path '$.error')) r on e.id = r.id
set e.status = 'pending', e.available_at = r.at, e.retries = e.attempts, e.last_error = r.error,
    e.lease_owner = null, e.lease_expires_at = null
where e.lease_owner = :owner and e.status = 'processing';

-- name: settle_failed
-- :failures, a JSON array of {"id", "error"}, for events still leased to
-- :owner.
update {prefix}outbox_events e
join json_table(:failures, '$[*]' columns (
  id char(36) character set ascii collate ascii_bin path '$.id',
  error mediumtext path '$.error')) f on e.id = f.id
set e.status = 'failed', e.processed_at = :now, e.retries = e.attempts, e.last_error = f.error,
    e.lease_owner = null, e.lease_expires_at = null
where e.lease_owner = :owner and e.status = 'processing';

-- name: extend_lease
update {prefix}outbox_events e
join json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j on e.id = j.id
set e.lease_expires_at = :lease_until
where e.lease_owner = :owner and e.status = 'processing';

-- name: leased
-- Those of :ids leased to :owner (after extend_lease, in its transaction).
select e.id from {prefix}outbox_events e
join json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j on e.id = j.id
where e.lease_owner = :owner and e.status = 'processing';

-- name: release
-- Graceful shutdown: the attempt did not happen, so it is not counted.
update {prefix}outbox_events e
join json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j on e.id = j.id
set e.status = 'pending', e.attempts = greatest(e.attempts - 1, 0), e.available_at = :now,
    e.lease_owner = null, e.lease_expires_at = null
where e.lease_owner = :owner and e.status = 'processing';

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
-- as a failed attempt. (MySQL assigns left to right: last_error reads
-- lease_owner before it is cleared.)
update {prefix}outbox_events
set status = case when attempts >= :max_attempts then 'failed' else 'pending' end,
    processed_at = case when attempts >= :max_attempts then :now end,
    retries = attempts,
    available_at = :now,
    last_error = concat('lease of relay ', coalesce(lease_owner, '?'), ' expired before the delivery was settled'),
    lease_owner = null,
    lease_expires_at = null
where status = 'processing' and lease_expires_at < :now;

-- name: purge_done
delete from {prefix}outbox_events
where status = 'done' and processed_at < :before
order by processed_at
limit :limit;

-- name: purge_held_keys
-- Up to :limit dedup keys whose hold (migration 0008) has ended.
delete from {prefix}outbox_held_keys
where expires_at <= :now
order by expires_at
limit :limit;

-- name: stats
select
  (select count(*) from {prefix}outbox_events where status = 'pending'),
  (select count(*) from {prefix}outbox_events where status = 'processing'),
  (select count(*) from {prefix}outbox_events where status = 'done'),
  (select count(*) from {prefix}outbox_events where status = 'failed'),
  (select min(created_at) from {prefix}outbox_events where status = 'pending');

-- name: stats_up_to
-- Stats at a bounded cost (the metrics' gauges): each count stops at :limit;
-- the oldest pending age is that of the first due event in claim order
-- (outbox_events_pending_idx).
select
  (select count(*) from (select 1 from {prefix}outbox_events where status = 'pending' limit :limit) x),
  (select count(*) from (select 1 from {prefix}outbox_events where status = 'processing' limit :limit) x),
  (select count(*) from (select 1 from {prefix}outbox_events where status = 'done' limit :limit) x),
  (select count(*) from (select 1 from {prefix}outbox_events where status = 'failed' limit :limit) x),
  (select created_at from {prefix}outbox_events
   where status = 'pending' and available_at <= :now
   order by available_at, seq
   limit 1);

-- name: stats_by_type
-- Pending, processing and failed events per type. Delivered events are not
-- read.
select event_type, sum(status = 'pending'), sum(status = 'processing'), sum(status = 'failed')
from {prefix}outbox_events
where status in ('pending', 'processing', 'failed')
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
select id from {prefix}outbox_events where dedup_hash = unhex(sha2(:dedup_key, 256)) and dedup_key = :dedup_key;

-- name: relays
-- The relays that hold leases: how many events, and when the leases end.
select lease_owner, count(*), min(lease_expires_at), max(lease_expires_at)
from {prefix}outbox_events
where status = 'processing' and lease_owner is not null
group by lease_owner
order by lease_owner;

-- name: last_seq
-- The next seq InnoDB gives out, less one: also after the rows are deleted
-- (inserts that rolled back advanced it too). On MySQL the session reads it
-- with information_schema_stats_expiry = 0, uncached.
select coalesce((select auto_increment - 1 from information_schema.tables
                 where table_schema = database() and table_name = '{prefix}outbox_events'), 0);

-- name: newest_seq
-- The wake-up poll (listen.go): the newest event's seq, read from the end
-- of the primary key alone.
select seq from {prefix}outbox_events order by seq desc limit 1;

-- name: history_read
-- A page of HistoryRead: up to :limit delivered events in id order after
-- :after ('' from the first: every id is greater), written from :since to
-- before :until (null: open), of aggregate type :aggregate_type and id
-- :aggregate_id (empty: any). The globs of the types are applied by the
-- store (history.go).
select id, seq, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       created_at, processed_at
from {prefix}outbox_events
where status = 'done'
  and id > :after
  and (:since is null or created_at >= :since)
  and (:until is null or created_at < :until)
  and (:aggregate_type = '' or aggregate_type = :aggregate_type)
  and (:aggregate_id = '' or aggregate_id = :aggregate_id)
order by id
limit :limit;

-- name: requeue_kept
-- Requeue's kept rows: done rows of :ids (a JSON array) back to the queue,
-- due :now, as never attempted, their headers marked with the replay's name
-- :replay under the header :header (postbox.HeaderReplay; headers that are
-- no object, which a claim would refuse, become the mark alone).
update {prefix}outbox_events e
join json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j on e.id = j.id
set e.status = 'pending', e.available_at = :now, e.retries = 0, e.attempts = 0, e.last_error = null,
    e.processed_at = null, e.lease_owner = null, e.lease_expires_at = null,
    e.headers = json_set(if(json_type(e.headers) = 'OBJECT', e.headers, '{}'),
                         concat('$.', json_quote(:header)), :replay)
where e.status = 'done';

-- name: requeue_insert
-- Requeue's events whose row is gone: :events, a JSON array of {"id",
-- "aggregate_type", "aggregate_id", "event_type", "payload", "headers"
-- (with the mark), "created_at" (absent: :now)}, written again pending
-- without a dedup key, in the array's order; an id that has a row is left
-- to requeue_kept.
insert into {prefix}outbox_events
  (id, aggregate_type, aggregate_id, event_type, payload, headers, available_at, created_at)
select r.id, r.aggregate_type, r.aggregate_id, r.event_type, r.payload, r.headers, :now, coalesce(r.created_at, :now)
from json_table(:events, '$[*]' columns (
  n for ordinality,
  id char(36) character set ascii collate ascii_bin path '$.id',
  aggregate_type mediumtext path '$.aggregate_type',
  aggregate_id mediumtext path '$.aggregate_id',
  event_type mediumtext path '$.event_type',
  payload longtext path '$.payload',
  headers longtext path '$.headers',
  created_at datetime(6) path '$.created_at')) r
where not exists (select 1 from {prefix}outbox_events e where e.id = r.id)
order by r.n;

-- name: expire_read
-- Retention with a Keep: up to :limit delivered events processed before
-- :before, oldest first, read as history_read reads them.
select id, seq, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       created_at, processed_at
from {prefix}outbox_events
where status = 'done' and processed_at < :before
order by processed_at, id
limit :limit;

-- name: expire_delete
-- The events expire_read returned (:ids, a JSON array), once kept: those
-- still done (a replay may have requeued one since).
delete e from {prefix}outbox_events e
join json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j on e.id = j.id
where e.status = 'done';
