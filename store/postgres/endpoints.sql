-- Named queries of the webhook endpoints (store.Endpoints) of the
-- PostgreSQL store; "{schema}" is filled in as in queries.sql.

-- name: endpoint_create
insert into {schema}.endpoints (id, name, url, types, secret, rate_per_second, concurrency, shadow, state, allow_private)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
returning created_at, updated_at;

-- name: endpoint_columns
select id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
       rate_per_second, concurrency, shadow, allow_private, state, failing_since, created_at, updated_at
from {schema}.endpoints

-- name: endpoint_update
-- The columns of endpoint_columns, as updated.
update {schema}.endpoints
set name = $2, url = $3, types = $4, rate_per_second = $5, concurrency = $6, shadow = $7,
    allow_private = $8, updated_at = now()
where id = $1
returning id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
          rate_per_second, concurrency, shadow, allow_private, state, failing_since, created_at, updated_at;

-- name: endpoint_set_state
update {schema}.endpoints
set state = $2, updated_at = now(),
    failing_since = case when $2 = 'enabled' then null else failing_since end
where id = $1;

-- name: endpoint_wake_pending
-- An enabled endpoint's accumulated deliveries are due at once.
update {schema}.endpoint_deliveries set available_at = now()
where endpoint_id = $1 and status = 'pending' and available_at > now();

-- name: endpoint_delete
delete from {schema}.endpoints where id = $1;

-- name: endpoint_rotate_secret
update {schema}.endpoints
set previous_secret = secret, previous_secret_until = $3, secret = $2, updated_at = now()
where id = $1;

-- name: endpoint_failing
update {schema}.endpoints set failing_since = coalesce(failing_since, $2)
where id = $1
returning failing_since;

-- name: endpoint_recovered
update {schema}.endpoints set failing_since = null where id = $1 and failing_since is not null;

-- name: delivery_insert
-- The deliveries of a batch of routes, one row per (event, endpoint) in
-- $1..$8 (parallel arrays; a null time is now), numbered (seq) in the
-- arrays' order; rows of endpoints no longer in the table are skipped, and
-- a delivery already written for (event, endpoint) is kept.
insert into {schema}.endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at)
select r.event_id, r.endpoint_id, r.aggregate_type, r.aggregate_id, r.event_type, r.payload::jsonb,
       r.headers::jsonb, coalesce(r.available_at, now())
from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[])
       with ordinality as r(event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at, n)
where exists (select 1 from {schema}.endpoints e where e.id = r.endpoint_id)
order by r.n
on conflict (event_id, endpoint_id) do nothing;

-- name: delivery_claim
with picked as (
  select event_id, endpoint_id from {schema}.endpoint_deliveries
  where endpoint_id = $1 and status = 'pending' and available_at <= now()
  order by available_at, seq
  limit $2
  for update skip locked
)
update {schema}.endpoint_deliveries d
set status = 'processing', attempts = least(d.attempts, 999999999) + 1, lease_owner = $3,
    lease_expires_at = now() + $4 * interval '1 microsecond'
from picked
where d.event_id = picked.event_id and d.endpoint_id = picked.endpoint_id
returning d.event_id, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers,
          d.endpoint_id, d.status, d.attempts, d.available_at, coalesce(d.last_error, ''), d.created_at;

-- name: delivery_settle
update {schema}.endpoint_deliveries
set status = $4, available_at = coalesce($5, available_at), last_error = nullif($6, ''),
    lease_owner = null, lease_expires_at = null,
    processed_at = case when $4 = 'pending' then null else now() end
where event_id = $1 and endpoint_id = $2 and lease_owner = $3 and status = 'processing';

-- name: delivery_reclaim
update {schema}.endpoint_deliveries
set status = case when attempts >= $1 then 'failed' else 'pending' end,
    last_error = 'lease expired: the dispatcher ' || lease_owner || ' stopped during the attempt',
    processed_at = case when attempts >= $1 then now() end,
    lease_owner = null, lease_expires_at = null
where status = 'processing' and lease_expires_at < now();

-- name: delivery_retry_failed
update {schema}.endpoint_deliveries d
set status = 'pending', attempts = 0, available_at = now(), processed_at = null
from (select event_id from {schema}.endpoint_deliveries
      where endpoint_id = $1 and status = 'failed' limit $2 for update skip locked) f
where d.endpoint_id = $1 and d.event_id = f.event_id;

-- name: delivery_due
select e.id from unnest($1::uuid[]) e(id)
where exists (select 1 from {schema}.endpoint_deliveries d
              where d.endpoint_id = e.id and d.status = 'pending' and d.available_at <= now());

-- name: delivery_counts
select count(*) filter (where status = 'pending'), count(*) filter (where status = 'processing'),
       count(*) filter (where status = 'done'), count(*) filter (where status = 'failed'),
       count(*) filter (where status = 'dropped'),
       coalesce(extract(epoch from now() - min(created_at) filter (where status = 'pending' and isfinite(created_at))), 0)::float8
from {schema}.endpoint_deliveries where endpoint_id = $1;

-- name: delivery_list
select event_id, aggregate_type, aggregate_id, event_type, payload, headers,
       endpoint_id, status, attempts, available_at, coalesce(last_error, ''), created_at
from {schema}.endpoint_deliveries
where endpoint_id = $1 and ($2 = '' or status = $2)
order by seq
limit $3;

-- name: attempt_insert
insert into {schema}.endpoint_attempts
  (endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at)
select * from unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::int[], $6::bigint[], $7::text[], $8::text[], $9::timestamptz[]);

-- name: attempt_list
select endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at
from {schema}.endpoint_attempts
where endpoint_id = $1
order by id desc
limit $2;

-- name: attempt_purge
delete from {schema}.endpoint_attempts
where id in (select id from {schema}.endpoint_attempts where at < $1 limit $2);

-- name: delivery_purge
delete from {schema}.endpoint_deliveries d
using (select event_id, endpoint_id from {schema}.endpoint_deliveries
       where status in ('done', 'dropped') and processed_at < $1 limit $2) old
where d.event_id = old.event_id and d.endpoint_id = old.endpoint_id;

-- Queries of an endpoint's lane (store.Endpoints.EndpointLane), the Source
-- a relay drains to deliver the endpoint's deliveries. Unlike the
-- outbox's claims, a lane's claim leases each row on its own: status
-- 'processing', lease_owner, lease_expires_at. Each query's $1 is the
-- endpoint. The attempt is counted at the claim (attempts), saturating
-- below the bound of the outbox's retries, so that no row can make a
-- claim, a settle or a reclaim fail; the claim returns the attempts
-- before it, which the store reads defensively (a row it cannot read
-- fails alone). A claim locks the rows it takes (FOR UPDATE SKIP LOCKED:
-- concurrent claims of one lane skip each other's rows) and updates them
-- by their ctid, which the lock keeps still until the statement ends: one
-- TID probe per row, whatever the endpoint's backlog.

-- name: lane_claim
-- Leases to relay $3, for $4 milliseconds, up to $2 due pending deliveries
-- after ($5, $6) in claim order (available_at, seq: the outbox's After
-- cursor; '-infinity' from the head), none while the endpoint is not
-- enabled; $7, when positive, bounds the claim by payload bytes as the
-- outbox's claim_bounded does (the first row always taken; payloads are
-- rendered as text only then).
with due as (
  select d.ctid as row_id, d.seq, d.available_at, d.attempts, d.payload
  from {schema}.endpoint_deliveries d
  where d.endpoint_id = $1 and d.status = 'pending' and d.available_at <= now()
    and (d.available_at, d.seq) > ($5::timestamptz, $6::bigint)
    and exists (select 1 from {schema}.endpoints e where e.id = $1 and e.state = 'enabled')
  order by d.available_at, d.seq
  limit $2
  for update skip locked
), taken as (
  select t.row_id, t.attempts from (
    select u.row_id, u.attempts,
      sum(case when $7::bigint > 0 then octet_length(u.payload::text) else 0 end)
        over (order by u.available_at, u.seq rows unbounded preceding) as total,
      row_number() over (order by u.available_at, u.seq) as n
    from due u) t
  where $7::bigint <= 0 or t.n = 1 or t.total <= $7::bigint
)
update {schema}.endpoint_deliveries d
set status = 'processing', attempts = least(d.attempts, 999999999) + 1, lease_owner = $3,
    lease_expires_at = now() + $4::bigint * interval '1 millisecond'
from taken
where d.ctid = taken.row_id
returning d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers,
          taken.attempts::bigint, d.created_at, d.available_at;

-- name: lane_claim_ordered
-- lane_claim in ordered mode (After is ignored): only the head of each
-- aggregate, the lowest seq among the endpoint's pending or processing
-- deliveries of the aggregate, when it is pending and due. Failed, done and
-- dropped deliveries hold nothing back. As the outbox's claim_ordered, two
-- ways find heads, so that no claim reads the whole backlog:
-- - window: the oldest due deliveries (4 × $2 of them, in claim order),
--   those of them that are heads, each checked with one probe of
--   endpoint_deliveries_aggregate_open_idx: the common case;
-- - walk: only when the window was full yet holds fewer than $2 heads (a
--   head waiting for a retry, or reclaimed, behind its successors in claim
--   order), the head of each aggregate of the endpoint from the first ($8)
--   or after ($5, $6) in key order, one index probe each, until $2 due
--   heads are found. Its cost grows with the endpoint's aggregates walked,
--   never with the deliveries queued behind their heads. The last column,
--   walk_end, marks the row of the last aggregate the walk took: the next
--   walk starts after it; a claim that finds fewer heads than it asks for
--   makes the next walk start at the first aggregate (the walk does not
--   wrap round within one claim, as the outbox's does: an aggregate before
--   ($5, $6) waits for the next claim).
-- $7 is lane_claim's byte bound, on the heads.
with recursive enabled as (
  select exists (select 1 from {schema}.endpoints e where e.id = $1 and e.state = 'enabled') as yes
), window_rows as (
  select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.available_at
  from {schema}.endpoint_deliveries d
  where d.endpoint_id = $1 and d.status = 'pending' and d.available_at <= now()
    and (select yes from enabled)
  order by d.available_at, d.seq
  limit 4 * $2::int
), window_heads as (
  -- A scalar subquery per row: one index probe each, never a join that
  -- reads every open delivery.
  select w.event_id, w.seq, w.aggregate_type, w.aggregate_id, w.available_at, null::int as step
  from window_rows w
  where w.seq = (
    select min(p.seq) from {schema}.endpoint_deliveries p
    where p.endpoint_id = $1 and p.aggregate_type = w.aggregate_type
      and p.aggregate_id = w.aggregate_id and p.status in ('pending', 'processing'))
  limit $2
), heads as (
  -- The walk: the head of the first aggregate ($8, the events without one
  -- included: ("", "") is the least key) or of the first after ($5, $6),
  -- then of the next aggregate each time; each step is one index probe (a
  -- branch whose $8 is false runs none).
  select s.*, 1 as step from (
    (select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.available_at, d.status
     from {schema}.endpoint_deliveries d
     where $8::bool and d.endpoint_id = $1 and d.status in ('pending', 'processing')
     order by d.aggregate_type, d.aggregate_id, d.seq
     limit 1)
    union all
    (select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.available_at, d.status
     from {schema}.endpoint_deliveries d
     where not $8::bool and d.endpoint_id = $1 and d.status in ('pending', 'processing')
       and (d.aggregate_type, d.aggregate_id) > ($5::text, $6::text)
     order by d.aggregate_type, d.aggregate_id, d.seq
     limit 1)) s
  union all
  select n.event_id, n.seq, n.aggregate_type, n.aggregate_id, n.available_at, n.status, h.step + 1
  from heads h, lateral (
    select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.available_at, d.status
    from {schema}.endpoint_deliveries d
    where d.endpoint_id = $1 and d.status in ('pending', 'processing')
      and (d.aggregate_type, d.aggregate_id) > (h.aggregate_type, h.aggregate_id)
    order by d.aggregate_type, d.aggregate_id, d.seq
    limit 1) n
), walked as (
  -- Only when the window was full: a window that is not full saw every
  -- due delivery, so every due head.
  select h.event_id, h.seq, h.aggregate_type, h.aggregate_id, h.available_at, h.step
  from heads h
  where (select count(*) from window_heads) < $2
    and (select count(*) from window_rows) = 4 * $2::bigint
    and h.status = 'pending' and h.available_at <= now()
    and h.event_id not in (select event_id from window_heads)
  limit $2
), candidates as (
  select c.event_id, c.step from (select * from window_heads union all select * from walked) c
  order by c.available_at, c.seq
  limit $2
), due as (
  select d.ctid as row_id, d.seq, d.available_at, d.attempts, d.payload, c.step
  from {schema}.endpoint_deliveries d
  join candidates c on c.event_id = d.event_id
  where d.endpoint_id = $1 and d.status = 'pending'
  for update of d skip locked
), taken as (
  select t.row_id, t.attempts, t.step from (
    select u.row_id, u.attempts, u.step,
      sum(case when $7::bigint > 0 then octet_length(u.payload::text) else 0 end)
        over (order by u.available_at, u.seq rows unbounded preceding) as total,
      row_number() over (order by u.available_at, u.seq) as n
    from due u) t
  where $7::bigint <= 0 or t.n = 1 or t.total <= $7::bigint
)
update {schema}.endpoint_deliveries d
set status = 'processing', attempts = least(d.attempts, 999999999) + 1, lease_owner = $3,
    lease_expires_at = now() + $4::bigint * interval '1 millisecond'
from taken
where d.ctid = taken.row_id
returning d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers,
          taken.attempts::bigint, d.created_at, d.available_at,
          coalesce(taken.step = (select max(step) from taken), false);

-- name: lane_settle
-- A batch of outcomes in one statement. Delivered ($3, whoever holds them)
-- are deleted, or marked done when $4 keeps them; retries ($5 ids, $6
-- times, $7 errors) go back to pending at their time, failures ($8 ids, $9
-- errors) end failed, or dropped for a shadow endpoint ($10), and releases
-- ($11) go back to pending without the attempt the claim counted: all
-- three only for rows still leased to relay $2. Each kind finds its rows
-- with "event_id in (select unnest(ids))": one primary-key probe per id,
-- whatever the endpoint's backlog (written "event_id = any(ids)", the
-- planner reads the endpoint's whole backlog, or every row in flight, as
-- soon as a batch has a few hundred ids).
with delivered as (
  delete from {schema}.endpoint_deliveries
  where not $4::bool and event_id in (select unnest($3::uuid[])) and endpoint_id = $1
    and status in ('pending', 'processing')
), kept as (
  update {schema}.endpoint_deliveries
  set status = 'done', processed_at = now(), last_error = null, lease_owner = null, lease_expires_at = null
  where $4::bool and event_id in (select unnest($3::uuid[])) and endpoint_id = $1
    and status in ('pending', 'processing')
), retried as (
  update {schema}.endpoint_deliveries d
  set status = 'pending', available_at = r.available_at, last_error = r.last_error,
      lease_owner = null, lease_expires_at = null
  from unnest($5::uuid[], $6::timestamptz[], $7::text[]) as r(id, available_at, last_error)
  where d.event_id in (select unnest($5::uuid[])) and d.endpoint_id = $1 and d.event_id = r.id
    and d.status = 'processing' and d.lease_owner = $2
), failed as (
  update {schema}.endpoint_deliveries d
  set status = case when $10::bool then 'dropped' else 'failed' end, processed_at = now(),
      last_error = f.last_error, lease_owner = null, lease_expires_at = null
  from unnest($8::uuid[], $9::text[]) as f(id, last_error)
  where d.event_id in (select unnest($8::uuid[])) and d.endpoint_id = $1 and d.event_id = f.id
    and d.status = 'processing' and d.lease_owner = $2
)
update {schema}.endpoint_deliveries
set status = 'pending', attempts = greatest(attempts - 1, 0), lease_owner = null, lease_expires_at = null
where event_id in (select unnest($11::uuid[])) and endpoint_id = $1 and status = 'processing' and lease_owner = $2;

-- name: lane_extend_lease
-- Renews, for $4 milliseconds, the leases of those of $3 still leased to
-- relay $2, and returns them.
update {schema}.endpoint_deliveries
set lease_expires_at = now() + $4::bigint * interval '1 millisecond'
where event_id in (select unnest($3::uuid[])) and endpoint_id = $1 and status = 'processing' and lease_owner = $2
returning event_id;

-- name: lane_reclaim_expired
-- The endpoint's deliveries whose lease expired: the attempt the claim
-- counted failed; they go back to pending, due now, or end failed (dropped
-- for a shadow endpoint, $3) once they have used $2 attempts. Returns, for
-- each relay, how many of its deliveries changed.
with expired as (
  select event_id, lease_owner from {schema}.endpoint_deliveries
  where endpoint_id = $1 and status = 'processing' and lease_expires_at < now()
), changed as (
  update {schema}.endpoint_deliveries d
  set status = case when d.attempts < $2 then 'pending' when $3::bool then 'dropped' else 'failed' end,
      processed_at = case when d.attempts >= $2 then now() end,
      available_at = now(),
      last_error = 'lease of relay ' || x.lease_owner || ' expired before the delivery was settled',
      lease_owner = null, lease_expires_at = null
  from expired x
  where d.endpoint_id = $1 and d.event_id = x.event_id and d.status = 'processing'
    and d.lease_owner = x.lease_owner and d.lease_expires_at < now()
  returning x.lease_owner as owner
)
select owner, count(*) from changed group by owner order by owner;

-- name: lane_purge_done
-- Up to $3 of the endpoint's finished (done or dropped) deliveries
-- processed before $2, and up to $3 of its attempts made before $2.
with deliveries as (
  delete from {schema}.endpoint_deliveries
  where endpoint_id = $1 and event_id in (
    select event_id from {schema}.endpoint_deliveries
    where endpoint_id = $1 and status in ('done', 'dropped') and processed_at < $2
    limit $3)
  returning 1
), attempts as (
  delete from {schema}.endpoint_attempts
  where id in (
    select id from {schema}.endpoint_attempts
    where endpoint_id = $1 and at < $2
    limit $3)
  returning 1
)
select (select count(*) from deliveries) + (select count(*) from attempts);
