-- Named queries of the PostgreSQL store. "{schema}" is replaced by the quoted
-- schema name when the store is created; each query starts at "-- name:".

-- name: claim
-- Leases up to $2 due events to relay $1 for $3 milliseconds, in one short
-- statement: no transaction or row lock outlives it.
with due as (
  select id from {schema}.outbox_events
  where status = 'pending' and available_at <= now()
  order by available_at, seq
  limit $2
  for update skip locked
)
update {schema}.outbox_events e
set status = 'processing',
    lease_owner = $1,
    lease_expires_at = now() + $3::bigint * interval '1 millisecond',
    attempts = e.attempts + 1
from due
where e.id = due.id
returning e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload, e.headers, e.attempts, e.created_at;

-- name: claim_ordered
-- Like claim, but only the oldest unfinished event of each aggregate, and
-- only while no other event of that aggregate is pending or being delivered.
-- A row lower in sequence that is not yet committed is invisible here; it is
-- taken after the ones committed before it (commit order).
with due as (
  select e.id from {schema}.outbox_events e
  where e.status = 'pending' and e.available_at <= now()
    and not exists (
      select 1 from {schema}.outbox_events p
      where p.aggregate_type = e.aggregate_type
        and p.aggregate_id = e.aggregate_id
        and p.status in ('pending', 'processing')
        and p.seq < e.seq)
  order by e.available_at, e.seq
  limit $2
  for update skip locked
)
update {schema}.outbox_events e
set status = 'processing',
    lease_owner = $1,
    lease_expires_at = now() + $3::bigint * interval '1 millisecond',
    attempts = e.attempts + 1
from due
where e.id = due.id
returning e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload, e.headers, e.attempts, e.created_at;

-- name: settle
-- Records a batch of outcomes in one statement. $2 delivered ids (whoever
-- holds them); retries ($3 ids, $4 times, $5 errors) and failures ($6 ids,
-- $7 errors) only for events still leased to relay $1.
with done as (
  update {schema}.outbox_events
  set status = 'done', processed_at = now(), lease_owner = null, lease_expires_at = null, last_error = null
  where id = any($2::uuid[]) and status in ('pending', 'processing')
  returning 1
), retried as (
  update {schema}.outbox_events e
  set status = 'pending', available_at = r.available_at, retries = e.attempts, last_error = r.last_error,
      lease_owner = null, lease_expires_at = null
  from unnest($3::uuid[], $4::timestamptz[], $5::text[]) as r(id, available_at, last_error)
  where e.id = r.id and e.lease_owner = $1 and e.status = 'processing'
  returning 1
), failed as (
  update {schema}.outbox_events e
  set status = 'failed', processed_at = now(), retries = e.attempts, last_error = f.last_error,
      lease_owner = null, lease_expires_at = null
  from unnest($6::uuid[], $7::text[]) as f(id, last_error)
  where e.id = f.id and e.lease_owner = $1 and e.status = 'processing'
  returning 1
)
select (select count(*) from done), (select count(*) from retried), (select count(*) from failed);

-- name: extend_lease
update {schema}.outbox_events
set lease_expires_at = now() + $3::bigint * interval '1 millisecond'
where id = any($2::uuid[]) and lease_owner = $1 and status = 'processing';

-- name: release
-- Graceful shutdown: the attempt did not happen, so it is not counted.
update {schema}.outbox_events
set status = 'pending', attempts = greatest(attempts - 1, 0), available_at = now(),
    lease_owner = null, lease_expires_at = null
where id = any($2::uuid[]) and lease_owner = $1 and status = 'processing';

-- name: reclaim_expired
-- The events of relays that stopped without settling: an expired lease counts
-- as a failed attempt.
update {schema}.outbox_events
set status = case when attempts >= $1 then 'failed' else 'pending' end,
    processed_at = case when attempts >= $1 then now() end,
    retries = attempts,
    available_at = now(),
    last_error = 'lease of relay ' || coalesce(lease_owner, '?') || ' expired before the delivery was settled',
    lease_owner = null,
    lease_expires_at = null
where status = 'processing' and lease_expires_at < now();

-- name: purge_done
delete from {schema}.outbox_events
where id in (
  select id from {schema}.outbox_events
  where status = 'done' and processed_at < $1
  order by processed_at
  limit $2);

-- name: stats
select
  (select count(*) from {schema}.outbox_events where status = 'pending'),
  (select count(*) from {schema}.outbox_events where status = 'processing'),
  (select count(*) from {schema}.outbox_events where status = 'done'),
  (select count(*) from {schema}.outbox_events where status = 'failed'),
  (select coalesce(extract(epoch from now() - min(created_at)), 0)::float8
     from {schema}.outbox_events where status = 'pending');

-- name: get
select id, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       available_at, seq, status, retries, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''),
       lease_expires_at, created_at, processed_at
from {schema}.outbox_events
where id = $1;

-- name: list
select id, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       available_at, seq, status, retries, attempts, coalesce(last_error, ''), coalesce(lease_owner, ''),
       lease_expires_at, created_at, processed_at
from {schema}.outbox_events
where status = $1
order by seq
limit $2;
