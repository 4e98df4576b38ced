-- Named queries of the webhook endpoints (store.Endpoints) of the SQLite
-- store; "{prefix}" is the table prefix. Parameters are numbered (?1); times
-- are Unix microseconds, "now" (?9 where used) comes from the caller.

-- name: endpoint_create
insert into {prefix}endpoints (id, name, url, types, secret, rate_per_second, concurrency, shadow, state,
                               created_at, updated_at, allow_private)
values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11);

-- name: endpoint_columns
select id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
       rate_per_second, concurrency, shadow, allow_private, state, failing_since, created_at, updated_at
from {prefix}endpoints

-- name: endpoint_update
-- The columns of endpoint_columns, as updated.
update {prefix}endpoints
set name = ?2, url = ?3, types = ?4, rate_per_second = ?5, concurrency = ?6, shadow = ?7,
    allow_private = ?8, updated_at = ?9
where id = ?1
returning id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
          rate_per_second, concurrency, shadow, allow_private, state, failing_since, created_at, updated_at;

-- name: endpoint_set_state
update {prefix}endpoints
set state = ?2, updated_at = ?3,
    failing_since = case when ?2 = 'enabled' then null else failing_since end
where id = ?1;

-- name: endpoint_wake_pending
update {prefix}endpoint_deliveries set available_at = ?2
where endpoint_id = ?1 and status = 'pending' and available_at > ?2;

-- name: endpoint_delete
delete from {prefix}endpoints where id = ?1;

-- name: endpoint_rotate_secret
update {prefix}endpoints
set previous_secret = secret, previous_secret_until = ?3, secret = ?2, updated_at = ?4
where id = ?1;

-- name: endpoint_failing
update {prefix}endpoints set failing_since = coalesce(failing_since, ?2)
where id = ?1
returning failing_since;

-- name: endpoint_recovered
update {prefix}endpoints set failing_since = null where id = ?1 and failing_since is not null;

-- name: delivery_insert
-- The deliveries of a batch of routes: ?1 is a JSON array of rows, one per
-- (event, endpoint), numbered (seq) in the array's order; ?2 is now. Rows
-- of endpoints no longer in the table are skipped, and a delivery already
-- written for (event, endpoint) is kept.
insert into {prefix}endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at, created_at)
select r.value ->> 'event_id', r.value ->> 'endpoint_id', r.value ->> 'aggregate_type', r.value ->> 'aggregate_id',
       r.value ->> 'event_type', r.value ->> 'payload', r.value ->> 'headers', r.value ->> 'available_at', ?2
from json_each(?1) r
where exists (select 1 from {prefix}endpoints e where e.id = r.value ->> 'endpoint_id')
order by r.key
on conflict (event_id, endpoint_id) do nothing;

-- name: delivery_claim
update {prefix}endpoint_deliveries
set status = 'processing', attempts = min(attempts, 999999999) + 1, lease_owner = ?3, lease_expires_at = ?4 + ?5
where seq in (select seq from {prefix}endpoint_deliveries
              where endpoint_id = ?1 and status = 'pending' and available_at <= ?4
              order by available_at, seq limit ?2)
returning event_id, aggregate_type, aggregate_id, event_type, payload, headers,
          endpoint_id, status, attempts, available_at, coalesce(last_error, ''), created_at, seq;

-- name: delivery_settle
update {prefix}endpoint_deliveries
set status = ?4, available_at = coalesce(?5, available_at), last_error = nullif(?6, ''),
    lease_owner = null, lease_expires_at = null,
    processed_at = case when ?4 = 'pending' then null else ?7 end
where event_id = ?1 and endpoint_id = ?2 and lease_owner = ?3 and status = 'processing';

-- name: delivery_reclaim
update {prefix}endpoint_deliveries
set status = case when attempts >= ?1 then 'failed' else 'pending' end,
    last_error = 'lease expired: the dispatcher ' || lease_owner || ' stopped during the attempt',
    processed_at = case when attempts >= ?1 then ?2 end,
    lease_owner = null, lease_expires_at = null
where status = 'processing' and lease_expires_at < ?2;

-- name: delivery_retry_failed
update {prefix}endpoint_deliveries
set status = 'pending', attempts = 0, available_at = ?3, processed_at = null
where seq in (select seq from {prefix}endpoint_deliveries
              where endpoint_id = ?1 and status = 'failed' limit ?2);

-- name: delivery_due
-- ?1 is a JSON array of endpoint ids, ?2 now.
select e.value from json_each(?1) e
where exists (select 1 from {prefix}endpoint_deliveries d
              where d.endpoint_id = e.value and d.status = 'pending' and d.available_at <= ?2);

-- name: delivery_counts
select count(*) filter (where status = 'pending'), count(*) filter (where status = 'processing'),
       count(*) filter (where status = 'done'), count(*) filter (where status = 'failed'),
       count(*) filter (where status = 'dropped'),
       min(created_at) filter (where status = 'pending')
from {prefix}endpoint_deliveries where endpoint_id = ?1;

-- name: delivery_list
select event_id, aggregate_type, aggregate_id, event_type, payload, headers,
       endpoint_id, status, attempts, available_at, coalesce(last_error, ''), created_at, seq
from {prefix}endpoint_deliveries
where endpoint_id = ?1 and (?2 = '' or status = ?2)
order by seq
limit ?3;

-- name: attempt_insert
-- The attempts are a JSON array of objects.
insert into {prefix}endpoint_attempts
  (endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at)
select value ->> 'endpoint_id', value ->> 'event_id', value ->> 'event_type', value ->> 'attempt',
       value ->> 'status_code', value ->> 'duration_us', value ->> 'response', value ->> 'error', value ->> 'at'
from json_each(?1);

-- name: attempt_list
select endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at
from {prefix}endpoint_attempts
where endpoint_id = ?1
order by id desc
limit ?2;

-- name: attempt_purge
delete from {prefix}endpoint_attempts
where id in (select id from {prefix}endpoint_attempts where at < ?1 limit ?2);

-- name: delivery_purge
delete from {prefix}endpoint_deliveries
where seq in (select seq from {prefix}endpoint_deliveries
              where status in ('done', 'dropped') and processed_at < ?1 limit ?2);

-- Queries of an endpoint's lane (store.Endpoints.EndpointLane), the Source
-- a relay drains to deliver the endpoint's deliveries, with named
-- parameters as queries.sql: :endpoint is the endpoint. A claim leases
-- each row (status 'processing', lease_owner, lease_expires_at) and counts
-- the attempt in it, leaving a value no row should hold as it is, for the
-- claim to report (Delivery.Invalid). Write transactions run one at a
-- time: claims wait for each other instead of skipping each other's rows.

-- name: lane_claim
-- Leases to relay :owner, until :lease_until, up to :limit due pending
-- deliveries after (:after_at, :after_seq) in claim order, none while the
-- endpoint is not enabled; :max_bytes, when positive, bounds the claim by
-- payload bytes as the outbox's claim does.
update {prefix}endpoint_deliveries
set status = 'processing', lease_owner = :owner, lease_expires_at = :lease_until,
    attempts = case when typeof(attempts) = 'integer' and attempts between 0 and 999999999
      then attempts + 1 else attempts end
where seq in (
  select seq from (
    select seq,
      sum(case when :max_bytes > 0 then octet_length(payload) else 0 end)
        over (order by available_at, seq rows unbounded preceding) as total,
      row_number() over (order by available_at, seq) as n
    from (
      select seq, available_at, payload from {prefix}endpoint_deliveries
      where endpoint_id = :endpoint and status = 'pending' and available_at <= :now
        and (available_at, seq) > (:after_at, :after_seq)
        and exists (select 1 from {prefix}endpoints where id = :endpoint and state = 'enabled')
      order by available_at, seq
      limit :limit))
  where :max_bytes <= 0 or n = 1 or total <= :max_bytes)
returning event_id, seq, aggregate_type, aggregate_id, event_type, payload, headers, attempts, created_at, available_at;

-- name: lane_window_heads
-- The first step of an ordered claim: the endpoint's oldest due
-- deliveries (a window of :window in claim order), none while the endpoint
-- is not enabled, each with whether it is a head: the lowest seq among the
-- endpoint's pending or processing deliveries of its aggregate (one probe
-- of endpoint_deliveries_aggregate_open_idx each). The store takes heads
-- from the start of the window, up to the claim's limit.
select w.seq, not exists (
  select 1 from {prefix}endpoint_deliveries p
  where p.endpoint_id = :endpoint and p.aggregate_type = w.aggregate_type and p.aggregate_id = w.aggregate_id
    and p.status in ('pending', 'processing') and p.seq < w.seq)
from (
  select seq, aggregate_type, aggregate_id, available_at from {prefix}endpoint_deliveries
  where endpoint_id = :endpoint and status = 'pending' and available_at <= :now
    and exists (select 1 from {prefix}endpoints where id = :endpoint and state = 'enabled')
  order by available_at, seq
  limit :window) w
order by w.available_at, w.seq;

-- name: lane_walk_heads
-- The second step of an ordered claim, run only when the window was full
-- yet held fewer than :limit heads (a head waiting for a retry, or
-- reclaimed, behind its successors in claim order): the head of each of
-- the endpoint's aggregates from the first (:from_start) or after
-- (:walk_type, :walk_id) in key order, one
-- index probe each, up to :limit due pending ones; each row with its
-- aggregate, where the next walk starts. Its cost grows with the
-- aggregates walked, never with the deliveries queued behind their heads.
with recursive walk(seq, aggregate_type, aggregate_id) as (
  -- The first aggregate (:from_start, the events without one included:
  -- ("", "") is the least key), or the first after the last walk's.
  select * from (
    select * from (
      select seq, aggregate_type, aggregate_id from {prefix}endpoint_deliveries
      where :from_start and endpoint_id = :endpoint and status in ('pending', 'processing')
      order by aggregate_type, aggregate_id, seq
      limit 1)
    union all
    select * from (
      select seq, aggregate_type, aggregate_id from {prefix}endpoint_deliveries
      where not :from_start and endpoint_id = :endpoint and status in ('pending', 'processing')
        and (aggregate_type, aggregate_id) > (:walk_type, :walk_id)
      order by aggregate_type, aggregate_id, seq
      limit 1))
  union all
  select n.seq, n.aggregate_type, n.aggregate_id
  from walk w
  join {prefix}endpoint_deliveries n on n.seq = (
    select d.seq from {prefix}endpoint_deliveries d
    where d.endpoint_id = :endpoint and d.status in ('pending', 'processing')
      and (d.aggregate_type, d.aggregate_id) > (w.aggregate_type, w.aggregate_id)
    order by d.aggregate_type, d.aggregate_id, d.seq
    limit 1)
)
-- CROSS JOIN keeps the walk the outer loop (SQLite never reorders it): its
-- rows come in key order, and the walk stops once :limit are taken.
select w.seq, w.aggregate_type, w.aggregate_id
from walk w
cross join {prefix}endpoint_deliveries d on d.seq = w.seq
where d.status = 'pending' and d.available_at <= :now
limit :limit;

-- name: lane_take
-- The last step of an ordered claim: leases the heads found (:seqs, a JSON
-- array), in claim order up to :max_bytes as lane_claim does.
update {prefix}endpoint_deliveries
set status = 'processing', lease_owner = :owner, lease_expires_at = :lease_until,
    attempts = case when typeof(attempts) = 'integer' and attempts between 0 and 999999999
      then attempts + 1 else attempts end
where seq in (
  select seq from (
    select seq,
      sum(case when :max_bytes > 0 then octet_length(payload) else 0 end)
        over (order by available_at, seq rows unbounded preceding) as total,
      row_number() over (order by available_at, seq) as n
    from {prefix}endpoint_deliveries
    where seq in (select value from json_each(:seqs)) and endpoint_id = :endpoint and status = 'pending')
  where :max_bytes <= 0 or n = 1 or total <= :max_bytes)
returning event_id, seq, aggregate_type, aggregate_id, event_type, payload, headers, attempts, created_at, available_at;

-- name: lane_settle_delete
-- :ids, a JSON array of delivered ids, whoever holds them.
delete from {prefix}endpoint_deliveries
where event_id in (select value from json_each(:ids)) and endpoint_id = :endpoint
  and status in ('pending', 'processing');

-- name: lane_settle_done
-- :ids, a JSON array of delivered ids, whoever holds them, kept done.
update {prefix}endpoint_deliveries
set status = 'done', processed_at = :now, last_error = null, lease_owner = null, lease_expires_at = null
where event_id in (select value from json_each(:ids)) and endpoint_id = :endpoint
  and status in ('pending', 'processing');

-- name: lane_settle_retry
-- :retries, a JSON array of {"id", "at", "error"}, for deliveries still
-- leased to :owner: pending again, due at their time.
update {prefix}endpoint_deliveries as d
set status = 'pending', available_at = r.at, last_error = r.error, lease_owner = null, lease_expires_at = null
from (select value ->> 'id' as id, value ->> 'at' as at, value ->> 'error' as error
      from json_each(:retries)) as r
where d.event_id = r.id and d.endpoint_id = :endpoint and d.lease_owner = :owner and d.status = 'processing';

-- name: lane_settle_failed
-- :failures, a JSON array of {"id", "error"}, for deliveries still leased
-- to :owner: failed, or dropped for a shadow endpoint (:shadow).
update {prefix}endpoint_deliveries as d
set status = case when :shadow then 'dropped' else 'failed' end, processed_at = :now, last_error = f.error,
    lease_owner = null, lease_expires_at = null
from (select value ->> 'id' as id, value ->> 'error' as error
      from json_each(:failures)) as f
where d.event_id = f.id and d.endpoint_id = :endpoint and d.lease_owner = :owner and d.status = 'processing';

-- name: lane_release
-- :ids, leased to :owner, go back to pending without the attempt the
-- claim counted.
update {prefix}endpoint_deliveries
set status = 'pending', attempts = max(attempts - 1, 0), lease_owner = null, lease_expires_at = null
where event_id in (select value from json_each(:ids)) and endpoint_id = :endpoint
  and lease_owner = :owner and status = 'processing';

-- name: lane_extend_lease
-- Renews the leases of those of :ids still leased to :owner, and returns
-- them.
update {prefix}endpoint_deliveries
set lease_expires_at = :lease_until
where event_id in (select value from json_each(:ids)) and endpoint_id = :endpoint
  and lease_owner = :owner and status = 'processing'
returning event_id;

-- name: lane_expired_owners
-- The relays whose lease of the endpoint's deliveries expired, and how
-- many deliveries each held; run in the transaction of
-- lane_reclaim_expired, before it.
select coalesce(lease_owner, '?'), count(*)
from {prefix}endpoint_deliveries
where endpoint_id = :endpoint and status = 'processing' and lease_expires_at < :now
group by lease_owner
order by lease_owner;

-- name: lane_reclaim_expired
-- The endpoint's deliveries whose lease expired: the attempt the claim
-- counted failed; they go back to pending, due now, or end failed (dropped
-- for a shadow endpoint) once they have used :max_attempts.
update {prefix}endpoint_deliveries
set status = case when attempts < :max_attempts then 'pending' when :shadow then 'dropped' else 'failed' end,
    processed_at = case when attempts >= :max_attempts then :now end,
    available_at = :now,
    last_error = 'lease of relay ' || coalesce(lease_owner, '?') || ' expired before the delivery was settled',
    lease_owner = null, lease_expires_at = null
where endpoint_id = :endpoint and status = 'processing' and lease_expires_at < :now;

-- name: lane_purge_deliveries
-- Up to :limit of the endpoint's finished (done or dropped) deliveries
-- processed before :before.
delete from {prefix}endpoint_deliveries
where seq in (
  select seq from {prefix}endpoint_deliveries
  where endpoint_id = :endpoint and status in ('done', 'dropped') and processed_at < :before
  limit :limit);

-- name: lane_purge_attempts
-- Up to :limit of the endpoint's attempts made before :before.
delete from {prefix}endpoint_attempts
where id in (
  select id from {prefix}endpoint_attempts
  where endpoint_id = :endpoint and at < :before
  limit :limit);
