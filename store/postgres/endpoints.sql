-- Named queries of the webhook endpoints (store.Endpoints) of the
-- PostgreSQL store; "{schema}" is filled in as in queries.sql.

-- name: endpoint_create
-- $5 is the clear secret of an unsealed endpoint, '' for a sealed one
-- ($11: its sealed secrets; null: not sealed).
insert into {schema}.endpoints (id, name, url, types, secret, rate_per_second, concurrency, shadow, state, allow_private,
                                sealed, sealed_key, sealed_fingerprint, auth, filter, envelope, signature)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
returning created_at, updated_at;

-- name: endpoint_columns
select id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
       rate_per_second, concurrency, shadow, allow_private, state, failing_since, breaker_open_until,
       created_at, updated_at, sealed, sealed_key, sealed_fingerprint, auth, filter, envelope, signature
from {schema}.endpoints

-- name: endpoint_update
-- The columns of endpoint_columns, as updated. A compare-and-swap on
-- updated_at: only if it is still $12 (null: whatever it is). A concurrent
-- change of the same row holds the row's lock; once it commits, the
-- condition is checked again on the row as it left it, whose updated_at it
-- bumped: nothing is written (endpoint_exists then tells a row that changed
-- from one not there).
--
-- Every change of an endpoint's settings, secrets or state bumps updated_at
-- (here, endpoint_set_state, endpoint_rotate_secret, endpoint_seal) to now,
-- or one microsecond past its value when that is now or later (a clock that
-- went back, two changes in one microsecond): a bump always changes it, and
-- never back to a value a reader may hold. An updated_at past year 9999 or
-- infinite (a row written by hand) becomes now.
update {schema}.endpoints
set name = $2, url = $3, types = $4, rate_per_second = $5, concurrency = $6, shadow = $7,
    allow_private = $8, filter = $9, envelope = $10, signature = $11,
    updated_at = case when updated_at >= now() and updated_at < '10000-01-01' then updated_at + interval '1 microsecond' else now() end
where id = $1 and ($12::timestamptz is null or updated_at = $12)
returning id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
          rate_per_second, concurrency, shadow, allow_private, state, failing_since, breaker_open_until,
          created_at, updated_at, sealed, sealed_key, sealed_fingerprint, auth, filter, envelope, signature;

-- name: endpoint_set_state
update {schema}.endpoints
set state = $2, failing_since = case when $2 = 'enabled' then null else failing_since end,
    updated_at = case when updated_at >= now() and updated_at < '10000-01-01' then updated_at + interval '1 microsecond' else now() end
where id = $1;

-- name: endpoint_wake_pending
-- An enabled endpoint's accumulated deliveries are due at once.
update {schema}.endpoint_deliveries set available_at = now()
where endpoint_id = $1 and status = 'pending' and available_at > now();

-- name: endpoint_delete
delete from {schema}.endpoints where id = $1;

-- name: endpoint_rotate_secret
-- The clear secrets of an unsealed endpoint; a sealed one is left as it
-- is. It returns whether the endpoint is there (found) and whether it
-- rotated: the CTE's read of the table sees the row as it was before the
-- update.
with rotated as (
  update {schema}.endpoints
  set previous_secret = secret, previous_secret_until = $3, secret = $2,
      updated_at = case when updated_at >= now() and updated_at < '10000-01-01' then updated_at + interval '1 microsecond' else now() end
  where id = $1 and sealed is null
  returning 1
)
select exists (select 1 from rotated), exists (select 1 from {schema}.endpoints where id = $1);

-- name: endpoint_seal
-- A compare-and-swap of the endpoint's sealed secrets ($2..$5): only if
-- its sealed data is still $7 (null: not sealed yet). It empties the
-- clear secrets and sets previous_secret_until to $6 (null: none). A
-- concurrent seal of the same row waits for the row's lock and then finds
-- the new sealed data: it changes nothing. It returns whether it sealed
-- and whether the endpoint is there (as endpoint_rotate_secret). A $8
-- that is not empty becomes the URL in the same statement.
with sealed as (
  update {schema}.endpoints
  set sealed = $2, sealed_key = $3, sealed_fingerprint = $4, auth = $5, previous_secret_until = $6,
      secret = '', previous_secret = null, url = coalesce(nullif($8::text, ''), url),
      updated_at = case when updated_at >= now() and updated_at < '10000-01-01' then updated_at + interval '1 microsecond' else now() end
  where id = $1 and sealed is not distinct from $7::bytea
  returning 1
)
select exists (select 1 from sealed), exists (select 1 from {schema}.endpoints where id = $1);

-- name: endpoint_exists
select exists (select 1 from {schema}.endpoints where id = $1);

-- name: endpoint_failing
update {schema}.endpoints set failing_since = coalesce(failing_since, $2)
where id = $1
returning failing_since;

-- name: endpoint_recovered
update {schema}.endpoints set failing_since = null where id = $1 and failing_since is not null;

-- name: endpoint_breaker
-- $2 null: the breaker closed.
update {schema}.endpoints set breaker_open_until = $2 where id = $1;

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

-- name: delivery_insert_tried
-- delivery_insert for a batch in which some endpoints were tried before
-- their delivery was written (store.Route.Tried), each row as the lane's
-- settle of that attempt would have left it: $9 its status, $10 the
-- attempts that ended, $11 when a pending one is due again (null: when the
-- event is), $12 its last error (null: none). A finished one (failed,
-- dropped, done) is processed now. A statement of its own, so that
-- delivery_insert, the fan-out's common case, carries none of these
-- arrays.
insert into {schema}.endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at,
   status, attempts, last_error, processed_at)
select r.event_id, r.endpoint_id, r.aggregate_type, r.aggregate_id, r.event_type, r.payload::jsonb,
       r.headers::jsonb, coalesce(r.retry_at, r.available_at, now()),
       r.status, r.attempts, r.last_error, case when r.status <> 'pending' then now() end
from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[],
            $9::text[], $10::int[], $11::timestamptz[], $12::text[])
       with ordinality as r(event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at,
                            status, attempts, retry_at, last_error, n)
where exists (select 1 from {schema}.endpoints e where e.id = r.endpoint_id)
order by r.n
on conflict (event_id, endpoint_id) do nothing;

-- name: delivery_pending
-- An endpoint has a pending delivery, due or not, leased or not: one
-- index-only probe per endpoint of a partial index of pending deliveries
-- that begins with endpoint_id (endpoint_deliveries_pending_idx or
-- endpoint_deliveries_aggregate_pending_idx, as the planner picks), which
-- the endpoint's first entry answers, whatever its backlog; the finished
-- deliveries are in neither.
select e.id from unnest($1::uuid[]) e(id)
where exists (select 1 from {schema}.endpoint_deliveries d
              where d.endpoint_id = e.id and d.status = 'pending');

-- name: delivery_due
-- An endpoint has deliveries due when one of its due pending deliveries is
-- not leased: the leased ids of the endpoints asked about are hashed once
-- (an uncorrelated NOT IN), and each endpoint's probe skips its deliveries
-- in flight.
with leased as materialized (
  select l.endpoint_id, unnest(l.ids) as id from {schema}.endpoint_leases l
  where l.endpoint_id = any($1::uuid[])
)
select e.id from unnest($1::uuid[]) e(id)
where exists (select 1 from {schema}.endpoint_deliveries d
              where d.endpoint_id = e.id and d.status = 'pending' and d.available_at <= now()
                and (d.endpoint_id, d.event_id) not in (select endpoint_id, id from leased));

-- name: delivery_counts
-- Leased deliveries (pending rows that a lease of the endpoint lists, until
-- the lease ends or is reclaimed) count as processing, not pending; the
-- oldest pending age is that of the oldest delivery no relay holds.
with leased as materialized (
  select distinct unnest(ids) as id from {schema}.endpoint_leases where endpoint_id = $1
), rows as (
  select d.status, d.created_at, d.status = 'pending' and d.event_id in (select id from leased) as in_flight
  from {schema}.endpoint_deliveries d where d.endpoint_id = $1
)
select count(*) filter (where status = 'pending' and not in_flight), count(*) filter (where in_flight),
       count(*) filter (where status = 'done'), count(*) filter (where status = 'failed'),
       count(*) filter (where status = 'dropped'),
       coalesce(extract(epoch from now() - min(created_at) filter (where status = 'pending' and not in_flight and isfinite(created_at))), 0)::float8
from rows;

-- name: delivery_counts_all
-- delivery_counts for every endpoint at once (store.Endpoints.
-- DeliveryCountsAll): one row per endpoint, zeros for one without
-- deliveries. A delivery is leased when a lease of its own endpoint lists
-- it, as in delivery_counts; the leases are read once, hashed.
with leased as materialized (
  select distinct l.endpoint_id, x.id from {schema}.endpoint_leases l, unnest(l.ids) as x(id)
), counts as (
  select d.endpoint_id,
         count(*) filter (where d.status = 'pending' and l.id is null) as pending,
         count(l.id) as processing,
         count(*) filter (where d.status = 'done') as done,
         count(*) filter (where d.status = 'failed') as failed,
         count(*) filter (where d.status = 'dropped') as dropped,
         min(d.created_at) filter (where d.status = 'pending' and l.id is null and isfinite(d.created_at)) as oldest
  from {schema}.endpoint_deliveries d
  left join leased l on l.endpoint_id = d.endpoint_id and l.id = d.event_id and d.status = 'pending'
  group by d.endpoint_id
)
select e.id, coalesce(c.pending, 0), coalesce(c.processing, 0), coalesce(c.done, 0), coalesce(c.failed, 0),
       coalesce(c.dropped, 0), coalesce(extract(epoch from now() - c.oldest), 0)::float8
from {schema}.endpoints e
left join counts c on c.endpoint_id = e.id;

-- name: delivery_list
-- A leased delivery reads as 'processing', its attempt in flight counted
-- (as the attempt a claim returned); $2 'processing' lists those.
with leased as materialized (
  select distinct unnest(ids) as id from {schema}.endpoint_leases where endpoint_id = $1
)
select event_id, aggregate_type, aggregate_id, event_type, payload, headers,
       endpoint_id, status, attempts, available_at, last_error, created_at
from (
  select d.event_id, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers, d.endpoint_id,
         case when f.in_flight then 'processing' else d.status end as status,
         d.attempts::bigint + f.in_flight::int as attempts,
         d.available_at, coalesce(d.last_error, '') as last_error, d.created_at, d.seq
  from {schema}.endpoint_deliveries d,
       lateral (select d.status = 'pending' and d.event_id in (select id from leased) as in_flight) f
  where d.endpoint_id = $1 and ($2 = '' or d.status = case when $2 = 'processing' then 'pending' else $2 end)
) x
where $2 = '' or x.status = $2
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

-- name: attempt_summary
-- The attempts of every endpoint made at or after $1 ('-infinity': every
-- one), per endpoint that has any (store.Endpoints.AttemptSummary), in the
-- order of endpoint listing: each endpoint's are one range of
-- endpoint_attempts_endpoint_at_idx (endpoint_id, at; migration 0011), a
-- lateral subquery per endpoint, never a scan of the whole log (the index
-- that began with at went in migration 0011). last is the latest time in
-- [$2, $3): years 1 to 9999, what every client reads.
select e.id, s.attempts, s.succeeded, s.last
from {schema}.endpoints e
cross join lateral (
  select count(*) as attempts, count(*) filter (where a.error = '') as succeeded,
         max(a.at) filter (where a.at >= $2 and a.at < $3) as last
  from {schema}.endpoint_attempts a
  where a.endpoint_id = e.id and a.at >= $1
) s
where s.attempts > 0
order by e.created_at, e.id;

-- Queries of an endpoint's lane (store.Endpoints.EndpointLane), the Source
-- a relay drains to deliver the endpoint's deliveries. Each query's $1 is
-- the endpoint. A lane leases deliveries as the outbox leases events (see
-- the top of queries.sql): a claim reads the endpoint's due pending
-- deliveries that no lease of the endpoint lists and writes one
-- endpoint_leases row naming them (its id is the Delivery.Lease of each);
-- it never updates the deliveries. Claims of one lane take turns on an
-- advisory lock (lane_claim_lock, in the same implicit transaction), so
-- each sees every lease committed before it. attempts counts the attempts
-- that ended: a claim returns it, and the attempt it starts is the next;
-- a retry, a failure or an expired lease counts one, saturating below the
-- bound of the outbox's retries, so that no row can make a settle or a
-- reclaim fail. Delivered deliveries are deleted (or marked done when
-- kept); retried, failed and released ones leave their lease; delivered
-- ones stay listed, holding nothing back, until the relay ends the claim
-- (SettleParams.Ended) or the lease expires.
--
-- The statements that find deliveries by id (settles, renewals, reclaims,
-- the ordered claim's heads) say "status not in ('done', 'failed',
-- 'dropped')" for "pending" (no delivery is 'processing' since migration
-- 0012): written "status = 'pending'", the partial indexes of pending
-- deliveries match it, and the planner, whose statistics of a backlog are
-- often stale, reads every pending delivery of the endpoint (a bitmap scan
-- of its whole backlog, 50 to 250 ms with 20,000 deliveries) instead of one
-- primary-key probe per id.

-- name: lane_claim_lock
select pg_advisory_xact_lock(hashtextextended('postbox lane claim {schema} ' || $1::text, 0));

-- name: lane_claim
-- Leases to relay $3, for $4 milliseconds, up to $2 due pending deliveries
-- not leased, after ($5, $6) in claim order (available_at, seq: the
-- outbox's After cursor; '-infinity' from the head), none while the
-- endpoint is not enabled; $7, when positive, bounds the claim by payload
-- bytes as the outbox's claim_bounded does (the first row always taken;
-- payloads are rendered as text only then). The leased ids are hashed once
-- (an uncorrelated NOT IN).
with leased as (
  select unnest(ids) as id from {schema}.endpoint_leases where endpoint_id = $1
), due as (
  select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers,
         d.attempts, d.created_at, d.available_at
  from {schema}.endpoint_deliveries d
  where d.endpoint_id = $1 and d.status = 'pending' and d.available_at <= now()
    and (d.available_at, d.seq) > ($5::timestamptz, $6::bigint)
    and d.event_id not in (select id from leased)
    and exists (select 1 from {schema}.endpoints e where e.id = $1 and e.state = 'enabled')
  order by d.available_at, d.seq
  limit $2
), taken as (
  select t.event_id, t.seq, t.aggregate_type, t.aggregate_id, t.event_type, t.payload, t.headers,
         t.attempts, t.created_at, t.available_at
  from (
    select u.*,
      sum(case when $7::bigint > 0 then octet_length(u.payload::text) else 0 end)
        over (order by u.available_at, u.seq rows unbounded preceding) as total,
      row_number() over (order by u.available_at, u.seq) as n
    from due u) t
  where $7::bigint <= 0 or t.n = 1 or t.total <= $7::bigint
), lease as (
  insert into {schema}.endpoint_leases (endpoint_id, owner, ids, expires_at)
  select $1, $3, array_agg(event_id), now() + $4::bigint * interval '1 millisecond' from taken
  having count(*) > 0
  returning id
)
select event_id, seq, aggregate_type, aggregate_id, event_type, payload, headers,
       attempts::bigint, created_at, available_at, (select id from lease)
from taken;

-- name: lane_claim_ordered
-- lane_claim in ordered mode (After is ignored): only the head of each
-- aggregate, the lowest seq among the endpoint's pending deliveries of the
-- aggregate, when it is due and not leased: a head being delivered or
-- waiting for a retry is still pending, so it holds its successors back.
-- Failed, done and dropped deliveries hold nothing back. As the outbox's
-- claim_ordered, two ways find heads, so that no claim reads the whole
-- backlog:
-- - window: the oldest due deliveries (4 × $2 of them, in claim order),
--   those of them that are heads, each checked with one probe of
--   endpoint_deliveries_aggregate_pending_idx: the common case;
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
with recursive leased as (
  select unnest(ids) as id from {schema}.endpoint_leases where endpoint_id = $1
), enabled as (
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
  -- reads every pending delivery.
  select w.event_id, w.seq, w.aggregate_type, w.aggregate_id, w.available_at, null::int as step
  from window_rows w
  where w.event_id not in (select id from leased)
    and w.seq = (
      select min(p.seq) from {schema}.endpoint_deliveries p
      where p.endpoint_id = $1 and p.aggregate_type = w.aggregate_type
        and p.aggregate_id = w.aggregate_id and p.status = 'pending')
  limit $2
), heads as (
  -- The walk: the head of the first aggregate ($8, the events without one
  -- included: ("", "") is the least key) or of the first after ($5, $6),
  -- then of the next aggregate each time; each step is one index probe (a
  -- branch whose $8 is false runs none).
  select s.*, 1 as step from (
    (select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.available_at
     from {schema}.endpoint_deliveries d
     where $8::bool and d.endpoint_id = $1 and d.status = 'pending'
     order by d.aggregate_type, d.aggregate_id, d.seq
     limit 1)
    union all
    (select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.available_at
     from {schema}.endpoint_deliveries d
     where not $8::bool and d.endpoint_id = $1 and d.status = 'pending'
       and (d.aggregate_type, d.aggregate_id) > ($5::text, $6::text)
     order by d.aggregate_type, d.aggregate_id, d.seq
     limit 1)) s
  union all
  select n.event_id, n.seq, n.aggregate_type, n.aggregate_id, n.available_at, h.step + 1
  from heads h, lateral (
    select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.available_at
    from {schema}.endpoint_deliveries d
    where d.endpoint_id = $1 and d.status = 'pending'
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
    and h.available_at <= now()
    and h.event_id not in (select id from leased)
    and h.event_id not in (select event_id from window_heads)
  limit $2
), candidates as (
  select c.event_id, c.step from (select * from window_heads union all select * from walked) c
  order by c.available_at, c.seq
  limit $2
), due as (
  -- One primary-key probe per head.
  select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers,
         d.attempts, d.created_at, d.available_at, c.step
  from {schema}.endpoint_deliveries d
  join candidates c on c.event_id = d.event_id
  where d.endpoint_id = $1 and d.status not in ('done', 'failed', 'dropped')
), taken as (
  select t.event_id, t.seq, t.aggregate_type, t.aggregate_id, t.event_type, t.payload, t.headers,
         t.attempts, t.created_at, t.available_at, t.step
  from (
    select u.*,
      sum(case when $7::bigint > 0 then octet_length(u.payload::text) else 0 end)
        over (order by u.available_at, u.seq rows unbounded preceding) as total,
      row_number() over (order by u.available_at, u.seq) as n
    from due u) t
  where $7::bigint <= 0 or t.n = 1 or t.total <= $7::bigint
), lease as (
  insert into {schema}.endpoint_leases (endpoint_id, owner, ids, expires_at)
  select $1, $3, array_agg(event_id), now() + $4::bigint * interval '1 millisecond' from taken
  having count(*) > 0
  returning id
)
select event_id, seq, aggregate_type, aggregate_id, event_type, payload, headers,
       attempts::bigint, created_at, available_at, (select id from lease),
       coalesce(step = (select max(step) from taken), false)
from taken;

-- name: lane_lease_lock
-- Every statement that changes the leases of relay $2 on endpoint $1
-- (lane_extend_lease, lane_settle, lane_reclaim_expired) first takes this
-- lock, in the same transaction, as the outbox's lease_lock.
select pg_advisory_xact_lock(hashtextextended('postbox lane lease {schema} ' || $1::text || ' ' || $2, 0));

-- name: lane_settle
-- A batch of outcomes in one statement, as the outbox's settle. Delivered
-- ($3, whoever holds them) are deleted, or marked done when $4 keeps them;
-- retries ($5 ids, $6 times, $7 errors) and failures ($8 ids, $9 errors,
-- dropped for a shadow endpoint, $10) count the attempt, only for
-- deliveries a lease of relay $2 lists. $11, the retried, failed and
-- released ids, leave relay $2's leases: each the lease of its claim in
-- $12 (0: every lease of relay $2). $13, the claims of relay $2 that this
-- settle ends, are deleted whole. Each kind finds its deliveries with
-- "event_id in (select unnest(ids))": one primary-key probe per id,
-- whatever the endpoint's backlog (written "event_id = any(ids)", the
-- planner reads the endpoint's whole backlog as soon as a batch has a few
-- hundred ids).
-- The delivered ones are deleted or updated by their row ids (ctid), one
-- TID probe each; a ctid names a row of one table only, and a partitioned
-- table's partitions (Partition) share ctids: each row found is also
-- checked to be one of $3, the endpoint's, which the primary key
-- (event_id, endpoint_id) makes the delivery looked up, whatever its
-- partition. "(... in (select unnest($3))) is true" keeps that check a
-- hashed subplan, one probe per row: a plain IN becomes a join, which a
-- generic plan makes a nested loop over $3 for every row (1.3 s for 2,000
-- ids), and "= any($3)" searches the array for every row.
with owned as (
  -- Read only when there are retries or failures to check.
  select unnest(ids) as id from {schema}.endpoint_leases
  where endpoint_id = $1 and owner = $2 and cardinality($5::uuid[]) + cardinality($8::uuid[]) > 0
), delivered_rows as (
  -- The delivered deliveries' row ids: one primary-key probe per id, a
  -- subquery per id, whatever the planner believes of the endpoint's
  -- backlog (a join with the ids, a few hundred of them, may read all of
  -- it: see above). A delivery changed by another statement since (a
  -- reclaim) has moved: it is left as that statement left it, and
  -- delivered again (at least once).
  select array(
    select (select d.ctid from {schema}.endpoint_deliveries d
            where d.event_id = i.id and d.endpoint_id = $1 and d.status not in ('done', 'failed', 'dropped'))
    from unnest($3::uuid[]) as i(id)) as row_ids
), delivered as (
  delete from {schema}.endpoint_deliveries
  where not $4::bool and ctid = any((select row_ids from delivered_rows)::tid[]) and endpoint_id = $1
    and status not in ('done', 'failed', 'dropped') and (event_id in (select unnest($3::uuid[]))) is true
), kept as (
  update {schema}.endpoint_deliveries
  set status = 'done', processed_at = now(), last_error = null
  where $4::bool and ctid = any((select row_ids from delivered_rows)::tid[]) and endpoint_id = $1
    and status not in ('done', 'failed', 'dropped') and (event_id in (select unnest($3::uuid[]))) is true
), retried as (
  update {schema}.endpoint_deliveries d
  set available_at = r.available_at, attempts = least(d.attempts, 999999999) + 1, last_error = r.last_error
  from unnest($5::uuid[], $6::timestamptz[], $7::text[]) as r(id, available_at, last_error)
  where d.event_id in (select unnest($5::uuid[])) and d.endpoint_id = $1 and d.event_id = r.id
    and d.status not in ('done', 'failed', 'dropped') and d.event_id in (select id from owned)
), failed as (
  update {schema}.endpoint_deliveries d
  set status = case when $10::bool then 'dropped' else 'failed' end, processed_at = now(),
      attempts = least(d.attempts, 999999999) + 1, last_error = f.last_error
  from unnest($8::uuid[], $9::text[]) as f(id, last_error)
  where d.event_id in (select unnest($8::uuid[])) and d.endpoint_id = $1 and d.event_id = f.id
    and d.status not in ('done', 'failed', 'dropped') and d.event_id in (select id from owned)
), ended as (
  delete from {schema}.endpoint_leases
  where endpoint_id = $1 and owner = $2 and id = any($13::bigint[])
), remaining as (
  -- What each lease row of relay $2 not ended keeps (null: nothing) when
  -- $11 leaves, in one hash join of its ids with $11; read only when $11
  -- is not empty.
  select l.id, count(*) as held, array_agg(x.id) filter (where s.id is null) as rest
  from {schema}.endpoint_leases l
  cross join lateral unnest(l.ids) as x(id)
  left join unnest($11::uuid[], $12::bigint[]) as s(id, lease)
    on s.id = x.id and (s.lease = 0 or s.lease = l.id)
  where l.endpoint_id = $1 and l.owner = $2 and cardinality($11::uuid[]) > 0 and not l.id = any($13::bigint[])
  group by l.id
), emptied as (
  delete from {schema}.endpoint_leases l using remaining r
  where l.id = r.id and r.rest is null
)
update {schema}.endpoint_leases l
set ids = r.rest
from remaining r
where l.id = r.id and cardinality(r.rest) < r.held;

-- name: lane_extend_lease
-- Renews, for $4 milliseconds, the leases of relay $2 on endpoint $1 that
-- list any of $3, and returns those of $3 still held: listed and pending
-- (a delivered or failed one stays listed until its claim ends). A lease
-- listing none of them is a claim the relay never learned of: it is left
-- to expire.
with renewed as (
  update {schema}.endpoint_leases
  set expires_at = now() + $4::bigint * interval '1 millisecond'
  where endpoint_id = $1 and owner = $2 and ids && $3::uuid[]
  returning ids
)
select d.event_id from {schema}.endpoint_deliveries d
where d.event_id in (select unnest($3::uuid[])) and d.endpoint_id = $1
  and d.status not in ('done', 'failed', 'dropped')
  and d.event_id in (select unnest(ids) from renewed);

-- name: lane_reclaim_lock
-- Takes the lane_lease_lock of every relay whose lease on endpoint $1
-- expired, in one order (of the lock keys), and returns those relays:
-- lane_reclaim_expired, in the same transaction, changes their leases only.
select x.owner
from (
  select o.owner, hashtextextended('postbox lane lease {schema} ' || $1::text || ' ' || o.owner, 0) as k
  from (select distinct owner from {schema}.endpoint_leases where endpoint_id = $1 and expires_at < now()) o
  order by k
) x
cross join lateral (select pg_advisory_xact_lock(x.k)) locked;

-- name: lane_reclaim_expired
-- The expired leases on endpoint $1 of the relays $4 (whose locks
-- lane_reclaim_lock took) are deleted; each of their deliveries still
-- pending counts a failed attempt: it is due now, or ends failed (dropped
-- for a shadow endpoint, $3) once it has used $2 attempts. Returns, for
-- each relay, how many of its deliveries changed.
with expired as (
  delete from {schema}.endpoint_leases
  where endpoint_id = $1 and expires_at < now() and owner = any($4::text[])
  returning owner, ids
), leased as (
  select unnest(ids) as id, owner from expired
), changed as (
  update {schema}.endpoint_deliveries d
  set status = case when least(d.attempts, 999999999) + 1 < $2 then 'pending'
                    when $3::bool then 'dropped' else 'failed' end,
      processed_at = case when least(d.attempts, 999999999) + 1 >= $2 then now() end,
      attempts = least(d.attempts, 999999999) + 1,
      available_at = now(),
      last_error = 'lease of relay ' || x.owner || ' expired before the delivery was settled'
  from leased x
  where d.event_id in (select id from leased) and d.endpoint_id = $1 and d.event_id = x.id
    and d.status not in ('done', 'failed', 'dropped')
  returning x.owner
)
select owner, count(*) from changed group by owner order by owner;

-- name: lane_purge_done
-- Up to $3 of the endpoint's finished (done or dropped) deliveries
-- processed before $2, and up to $3 of its attempts made before $2, each
-- found through an index that begins with the endpoint (migration 0011).
-- The attempts are deleted by id from an array: one primary-key probe each
-- (written "id in (select ...)", the planner may hash-join the whole
-- attempts log).
with deliveries as (
  delete from {schema}.endpoint_deliveries
  where endpoint_id = $1 and event_id in (
    select event_id from {schema}.endpoint_deliveries
    where endpoint_id = $1 and status in ('done', 'dropped') and processed_at < $2
    limit $3)
  returning 1
), attempts as (
  delete from {schema}.endpoint_attempts
  where id = any(array(
    select id from {schema}.endpoint_attempts
    where endpoint_id = $1 and at < $2
    limit $3))
  returning 1
)
select (select count(*) from deliveries) + (select count(*) from attempts);

-- name: endpoint_requeue
-- EndpointRequeue: the deliveries to endpoint $1 of the events $2..$8
-- (parallel arrays: event id, aggregate type and id, type, payload,
-- headers with the replay's mark, whether the table can hold it:
-- sqlstore.RequeueRow.Insertable), $9 the replay's name, $10 the header
-- that carries it (postbox.HeaderReplay). A finished
-- delivery (done, dropped) goes back to the endpoint's queue, due now, as
-- never attempted, its headers marked; an absent one is written, pending;
-- others are left alone. The first column says whether the endpoint is
-- there (nothing is written when it is not). The lanes do not listen:
-- package endpoint finds the deliveries due by its poll (delivery_due), as
-- those of delivery_insert.
with endpoint as (
  select id from {schema}.endpoints where id = $1
), input as (
  select * from unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bool[])
    with ordinality as r(event_id, aggregate_type, aggregate_id, event_type, payload, headers, insertable, n)
), requeued as (
  update {schema}.endpoint_deliveries d
  set status = 'pending', attempts = 0, available_at = now(), processed_at = null, last_error = null,
      lease_owner = null, lease_expires_at = null,
      headers = case when jsonb_typeof(d.headers) = 'object' then d.headers else '{}'::jsonb end
                || jsonb_build_object($10::text, $9::text)
  where d.endpoint_id = $1 and d.event_id in (select event_id from input) and d.status in ('done', 'dropped')
  returning d.event_id
), inserted as (
  insert into {schema}.endpoint_deliveries
    (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at)
  select r.event_id, $1, r.aggregate_type, r.aggregate_id, r.event_type, r.payload::jsonb, r.headers::jsonb, now()
  from input r
  where r.insertable and exists (select 1 from endpoint)
  order by r.n
  on conflict (event_id, endpoint_id) do nothing
  returning event_id
)
select exists (select 1 from endpoint), (select count(*) from requeued), (select count(*) from inserted);
