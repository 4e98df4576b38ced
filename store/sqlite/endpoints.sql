-- Named queries of the webhook endpoints (store.Endpoints) of the SQLite
-- store; "{prefix}" is the table prefix. Parameters are numbered (?1); times
-- are Unix microseconds, "now" (?9 where used) comes from the caller.

-- name: endpoint_create
-- ?5 is the clear secret of an unsealed endpoint, '' for a sealed one
-- (?12: its sealed secrets; null: not sealed).
insert into {prefix}endpoints (id, name, url, types, secret, rate_per_second, concurrency, shadow, state,
                               created_at, updated_at, allow_private,
                               sealed, sealed_key, sealed_fingerprint, auth, filter, envelope, signature)
values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18);

-- name: endpoint_columns
select id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
       rate_per_second, concurrency, shadow, allow_private, state, failing_since, breaker_open_until,
       created_at, updated_at, sealed, sealed_key, sealed_fingerprint, auth, filter, envelope, signature
from {prefix}endpoints

-- name: endpoint_update
-- The columns of endpoint_columns, as updated. A compare-and-swap on
-- updated_at: only if it is still ?13 (Unix microseconds, as read; null:
-- whatever it is), in the store's one write transaction at a time. When it
-- changes no row, endpoint_exists, in the same write transaction, tells a
-- row that changed from one not there.
--
-- Every change of an endpoint's settings, secrets or state bumps updated_at
-- (here, endpoint_set_state, endpoint_rotate_secret, endpoint_seal) to now,
-- or one microsecond past its value when that is now or later (a clock that
-- went back, two changes in one microsecond): a bump always changes it, and
-- never back to a value a reader may hold. A value past year 9999
-- (253402300800000000, a row written by hand) becomes now.
update {prefix}endpoints
set name = ?2, url = ?3, types = ?4, rate_per_second = ?5, concurrency = ?6, shadow = ?7,
    allow_private = ?8, filter = ?10, envelope = ?11, signature = ?12,
    updated_at = case when updated_at >= ?9 and updated_at < 253402300800000000 then updated_at + 1 else ?9 end
where id = ?1 and (?13 is null or updated_at = ?13)
returning id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
          rate_per_second, concurrency, shadow, allow_private, state, failing_since, breaker_open_until,
          created_at, updated_at, sealed, sealed_key, sealed_fingerprint, auth, filter, envelope, signature;

-- name: endpoint_set_state
update {prefix}endpoints
set state = ?2, failing_since = case when ?2 = 'enabled' then null else failing_since end,
    updated_at = case when updated_at >= ?3 and updated_at < 253402300800000000 then updated_at + 1 else ?3 end
where id = ?1;

-- name: endpoint_wake_pending
update {prefix}endpoint_deliveries set available_at = ?2
where endpoint_id = ?1 and status = 'pending' and available_at > ?2;

-- name: endpoint_delete
delete from {prefix}endpoints where id = ?1;

-- name: endpoint_rotate_secret
-- The clear secrets of an unsealed endpoint; a sealed one is left as it
-- is (endpoint_exists tells it from one not there).
update {prefix}endpoints
set previous_secret = secret, previous_secret_until = ?3, secret = ?2,
    updated_at = case when updated_at >= ?4 and updated_at < 253402300800000000 then updated_at + 1 else ?4 end
where id = ?1 and sealed is null;

-- name: endpoint_seal
-- A compare-and-swap of the endpoint's sealed secrets (?2..?5): only if
-- its sealed data is still ?7 (null: not sealed yet; "is" compares blobs
-- byte for byte, and null with null). It empties the clear secrets and
-- sets previous_secret_until to ?6 (null: none). When it changes no row,
-- endpoint_exists, in the same write transaction, tells a row whose
-- sealed data changed from one not there. A ?9 that is not empty becomes
-- the URL in the same statement.
update {prefix}endpoints
set sealed = ?2, sealed_key = ?3, sealed_fingerprint = ?4, auth = ?5, previous_secret_until = ?6,
    secret = '', previous_secret = null, url = coalesce(nullif(?9, ''), url),
    updated_at = case when updated_at >= ?8 and updated_at < 253402300800000000 then updated_at + 1 else ?8 end
where id = ?1 and sealed is ?7;

-- name: endpoint_exists
select exists (select 1 from {prefix}endpoints where id = ?1);

-- name: endpoint_failing
update {prefix}endpoints set failing_since = coalesce(failing_since, ?2)
where id = ?1
returning failing_since;

-- name: endpoint_recovered
update {prefix}endpoints set failing_since = null where id = ?1 and failing_since is not null;

-- name: endpoint_breaker
-- ?2 null: the breaker closed.
update {prefix}endpoints set breaker_open_until = ?2 where id = ?1;

-- name: delivery_insert
-- The deliveries of a batch of routes: ?1 is a JSON array of rows, one per
-- (event, endpoint), numbered (seq) in the array's order; ?2 is now. Rows
-- of endpoints no longer in the table are skipped, and a delivery already
-- written for (event, endpoint) is kept. A row of an endpoint tried before
-- its delivery was written (store.Route.Tried) has its status, attempts
-- and last_error (absent: pending, 0, null), and is processed now when
-- finished (failed, dropped, done); its available_at is already its
-- RetryAt when it has one.
insert into {prefix}endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at, created_at,
   status, attempts, last_error, processed_at)
select r.value ->> 'event_id', r.value ->> 'endpoint_id', r.value ->> 'aggregate_type', r.value ->> 'aggregate_id',
       r.value ->> 'event_type', r.value ->> 'payload', r.value ->> 'headers', r.value ->> 'available_at', ?2,
       coalesce(r.value ->> 'status', 'pending'), coalesce(r.value ->> 'attempts', 0), r.value ->> 'last_error',
       case when coalesce(r.value ->> 'status', 'pending') <> 'pending' then ?2 end
from json_each(?1) r
where exists (select 1 from {prefix}endpoints e where e.id = r.value ->> 'endpoint_id')
order by r.key
on conflict (event_id, endpoint_id) do nothing;

-- name: delivery_pending
-- ?1 is a JSON array of endpoint ids. An endpoint has a pending delivery,
-- due or not, leased or not: one probe per endpoint of an index that
-- begins with endpoint_id (endpoint_deliveries_endpoint_idx, (endpoint_id,
-- status, seq), covers it; the partial index of pending deliveries would do
-- as well).
select e.value from json_each(?1) e
where exists (select 1 from {prefix}endpoint_deliveries d
              where d.endpoint_id = e.value and d.status = 'pending');

-- name: delivery_due
-- ?1 is a JSON array of endpoint ids, ?2 now. An endpoint has deliveries
-- due when one of its due pending deliveries is not leased.
select e.value from json_each(?1) e
where exists (select 1 from {prefix}endpoint_deliveries d
              where d.endpoint_id = e.value and d.status = 'pending' and d.available_at <= ?2
                and d.event_id not in (
                  select x.value from {prefix}endpoint_leases l, json_each(l.ids) x
                  where l.endpoint_id = e.value));

-- name: delivery_counts
-- Leased deliveries (pending rows that a lease of the endpoint lists, until
-- the lease ends or is reclaimed) count as processing, not pending; the
-- oldest pending delivery is the oldest no relay holds.
with leased as (
  select distinct x.value as id from {prefix}endpoint_leases l, json_each(l.ids) x where l.endpoint_id = ?1
), deliveries as (
  select status, created_at, status = 'pending' and event_id in (select id from leased) as in_flight
  from {prefix}endpoint_deliveries where endpoint_id = ?1
)
select count(*) filter (where status = 'pending' and not in_flight), count(*) filter (where in_flight),
       count(*) filter (where status = 'done'), count(*) filter (where status = 'failed'),
       count(*) filter (where status = 'dropped'),
       min(created_at) filter (where status = 'pending' and not in_flight)
from deliveries;

-- name: delivery_counts_all
-- delivery_counts for every endpoint at once (store.Endpoints.
-- DeliveryCountsAll): one row per endpoint, zeros for one without
-- deliveries (oldest null). A delivery is leased when a lease of its own
-- endpoint lists it, as in delivery_counts.
with leased as (
  select distinct l.endpoint_id, x.value as id from {prefix}endpoint_leases l, json_each(l.ids) x
), counts as (
  select d.endpoint_id,
         count(*) filter (where d.status = 'pending' and l.id is null) as pending,
         count(l.id) as processing,
         count(*) filter (where d.status = 'done') as done,
         count(*) filter (where d.status = 'failed') as failed,
         count(*) filter (where d.status = 'dropped') as dropped,
         min(d.created_at) filter (where d.status = 'pending' and l.id is null) as oldest
  from {prefix}endpoint_deliveries d
  left join leased l on l.endpoint_id = d.endpoint_id and l.id = d.event_id and d.status = 'pending'
  group by d.endpoint_id
)
select e.id, coalesce(c.pending, 0), coalesce(c.processing, 0), coalesce(c.done, 0), coalesce(c.failed, 0),
       coalesce(c.dropped, 0), c.oldest
from {prefix}endpoints e
left join counts c on c.endpoint_id = e.id;

-- name: delivery_list
-- A leased delivery reads as 'processing', its attempt in flight counted
-- (as the attempt a claim returned); ?2 'processing' lists those.
with leased as (
  select distinct x.value as id from {prefix}endpoint_leases l, json_each(l.ids) x where l.endpoint_id = ?1
)
select event_id, aggregate_type, aggregate_id, event_type, payload, headers,
       endpoint_id, status, attempts, available_at, last_error, created_at
from (
  select d.event_id, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers, d.endpoint_id,
         case when d.in_flight then 'processing' else d.status end as status,
         case when d.in_flight and typeof(d.attempts) = 'integer' then d.attempts + 1 else d.attempts end as attempts,
         d.available_at, coalesce(d.last_error, '') as last_error, d.created_at, d.seq
  from (
    select e.*, e.status = 'pending' and e.event_id in (select id from leased) as in_flight
    from {prefix}endpoint_deliveries e
    where e.endpoint_id = ?1 and (?2 = '' or e.status = case when ?2 = 'processing' then 'pending' else ?2 end)) d)
where ?2 = '' or status = ?2
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

-- name: attempt_summary
-- The attempts of every endpoint made at or after ?1 (the least integer:
-- every one), per endpoint that has any (store.Endpoints.AttemptSummary),
-- in the order of endpoint listing. The CROSS JOIN keeps the endpoints the
-- outer loop (SQLite's planner never reorders it): each endpoint's
-- attempts are one range of endpoint_attempts_endpoint_at_idx
-- (endpoint_id, at; migration 0011), never a scan of the whole log (the
-- index that began with at went in migration 0011). A text or blob time
-- orders after every number: it counts for every ?1. The last time is the
-- latest integer in [?2, ?3): years 1 to 9999, what timeValue reads.
select e.id, count(*), count(*) filter (where a.error = ''),
       max(a.at) filter (where typeof(a.at) = 'integer' and a.at >= ?2 and a.at < ?3)
from {prefix}endpoints e
cross join {prefix}endpoint_attempts a
where a.endpoint_id = e.id and a.at >= ?1
group by e.id
order by e.created_at, e.id;

-- Queries of an endpoint's lane (store.Endpoints.EndpointLane), the Source
-- a relay drains to deliver the endpoint's deliveries, with named
-- parameters as queries.sql: :endpoint is the endpoint. A lane leases
-- deliveries as the PostgreSQL outbox leases events: a claim reads the
-- endpoint's due pending deliveries that no lease of the endpoint lists,
-- and writes one endpoint_leases row naming them (ids, a JSON array; its id
-- is the Delivery.Lease of each); it never updates the deliveries. attempts
-- counts the attempts that ended: a claim returns the attempt it starts,
-- attempts + 1, when the value is in bounds, and any other value as it is,
-- for the claim to report (Delivery.Invalid); a retry, a failure or an
-- expired lease counts one (a value out of bounds left as it is). Write
-- transactions run one at a time: each claim sees every lease before it.

-- name: lane_claim
-- Up to :limit due pending deliveries not leased, after (:after_at,
-- :after_seq) in claim order, none while the endpoint is not enabled;
-- :max_bytes, when positive, bounds the claim by payload bytes as the
-- outbox's claim does. lane_lease then leases them.
select event_id, seq, aggregate_type, aggregate_id, event_type, payload, headers,
       case when typeof(attempts) = 'integer' and attempts between 0 and 999999999
         then attempts + 1 else attempts end,
       created_at, available_at
from (
  select *,
    sum(case when :max_bytes > 0 then octet_length(payload) else 0 end)
      over (order by available_at, seq rows unbounded preceding) as total,
    row_number() over (order by available_at, seq) as n
  from (
    select * from {prefix}endpoint_deliveries
    where endpoint_id = :endpoint and status = 'pending' and available_at <= :now
      and (available_at, seq) > (:after_at, :after_seq)
      and event_id not in (
        select x.value from {prefix}endpoint_leases l, json_each(l.ids) x where l.endpoint_id = :endpoint)
      and exists (select 1 from {prefix}endpoints where id = :endpoint and state = 'enabled')
    order by available_at, seq
    limit :limit))
where :max_bytes <= 0 or n = 1 or total <= :max_bytes
order by seq;

-- name: lane_lease
-- The lease of a claim: :ids, a JSON array of the event ids it took.
insert into {prefix}endpoint_leases (endpoint_id, owner, ids, expires_at)
values (:endpoint, :owner, :ids, :lease_until)
returning id;

-- name: lane_window_heads
-- The first step of an ordered claim: the endpoint's oldest due
-- deliveries (a window of :window in claim order), none while the endpoint
-- is not enabled, each with whether it is a head not leased: the lowest seq
-- among the endpoint's pending deliveries of its aggregate (one probe of
-- endpoint_deliveries_aggregate_pending_idx each). The store takes heads
-- from the start of the window, up to the claim's limit.
select w.seq, w.event_id not in (
    select x.value from {prefix}endpoint_leases l, json_each(l.ids) x where l.endpoint_id = :endpoint)
  and not exists (
  select 1 from {prefix}endpoint_deliveries p
  where p.endpoint_id = :endpoint and p.aggregate_type = w.aggregate_type and p.aggregate_id = w.aggregate_id
    and p.status = 'pending' and p.seq < w.seq)
from (
  select seq, event_id, aggregate_type, aggregate_id, available_at from {prefix}endpoint_deliveries
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
-- (:walk_type, :walk_id) in key order, one index probe each, up to :limit
-- due ones not leased; each row with its aggregate, where the next walk
-- starts. Its cost grows with the aggregates walked, never with the
-- deliveries queued behind their heads.
with recursive walk(seq, aggregate_type, aggregate_id) as (
  -- The first aggregate (:from_start, the events without one included:
  -- ("", "") is the least key), or the first after the last walk's.
  select * from (
    select * from (
      select seq, aggregate_type, aggregate_id from {prefix}endpoint_deliveries
      where :from_start and endpoint_id = :endpoint and status = 'pending'
      order by aggregate_type, aggregate_id, seq
      limit 1)
    union all
    select * from (
      select seq, aggregate_type, aggregate_id from {prefix}endpoint_deliveries
      where not :from_start and endpoint_id = :endpoint and status = 'pending'
        and (aggregate_type, aggregate_id) > (:walk_type, :walk_id)
      order by aggregate_type, aggregate_id, seq
      limit 1))
  union all
  select n.seq, n.aggregate_type, n.aggregate_id
  from walk w
  join {prefix}endpoint_deliveries n on n.seq = (
    select d.seq from {prefix}endpoint_deliveries d
    where d.endpoint_id = :endpoint and d.status = 'pending'
      and (d.aggregate_type, d.aggregate_id) > (w.aggregate_type, w.aggregate_id)
    order by d.aggregate_type, d.aggregate_id, d.seq
    limit 1)
)
-- CROSS JOIN keeps the walk the outer loop (SQLite never reorders it): its
-- rows come in key order, and the walk stops once :limit are taken.
select w.seq, w.aggregate_type, w.aggregate_id
from walk w
cross join {prefix}endpoint_deliveries d on d.seq = w.seq
where d.available_at <= :now
  and d.event_id not in (
    select x.value from {prefix}endpoint_leases l, json_each(l.ids) x where l.endpoint_id = :endpoint)
limit :limit;

-- name: lane_take
-- The last step of an ordered claim: the heads found (:seqs, a JSON
-- array), in claim order up to :max_bytes as lane_claim; lane_lease then
-- leases them.
select event_id, seq, aggregate_type, aggregate_id, event_type, payload, headers,
       case when typeof(attempts) = 'integer' and attempts between 0 and 999999999
         then attempts + 1 else attempts end,
       created_at, available_at
from (
  select *,
    sum(case when :max_bytes > 0 then octet_length(payload) else 0 end)
      over (order by available_at, seq rows unbounded preceding) as total,
    row_number() over (order by available_at, seq) as n
  from {prefix}endpoint_deliveries
  where seq in (select value from json_each(:seqs)) and endpoint_id = :endpoint and status = 'pending')
where :max_bytes <= 0 or n = 1 or total <= :max_bytes
order by seq;

-- name: lane_settle_delete
-- :ids, a JSON array of delivered ids, whoever holds them.
delete from {prefix}endpoint_deliveries
where event_id in (select value from json_each(:ids)) and endpoint_id = :endpoint
  and status = 'pending';

-- name: lane_settle_done
-- :ids, a JSON array of delivered ids, whoever holds them, kept done.
update {prefix}endpoint_deliveries
set status = 'done', processed_at = :now, last_error = null
where event_id in (select value from json_each(:ids)) and endpoint_id = :endpoint
  and status = 'pending';

-- name: lane_settle_retry
-- :retries, a JSON array of {"id", "at", "error"}, for deliveries a lease
-- of :owner lists: due at their time, the attempt counted.
update {prefix}endpoint_deliveries as d
set available_at = r.at, last_error = r.error,
    attempts = case when typeof(d.attempts) = 'integer' and d.attempts between 0 and 999999999
      then d.attempts + 1 else d.attempts end
from (select value ->> 'id' as id, value ->> 'at' as at, value ->> 'error' as error
      from json_each(:retries)) as r
where d.event_id = r.id and d.endpoint_id = :endpoint and d.status = 'pending'
  and d.event_id in (
    select x.value from {prefix}endpoint_leases l, json_each(l.ids) x
    where l.endpoint_id = :endpoint and l.owner = :owner);

-- name: lane_settle_failed
-- :failures, a JSON array of {"id", "error"}, for deliveries a lease of
-- :owner lists: failed, or dropped for a shadow endpoint (:shadow), the
-- attempt counted.
update {prefix}endpoint_deliveries as d
set status = case when :shadow then 'dropped' else 'failed' end, processed_at = :now, last_error = f.error,
    attempts = case when typeof(d.attempts) = 'integer' and d.attempts between 0 and 999999999
      then d.attempts + 1 else d.attempts end
from (select value ->> 'id' as id, value ->> 'error' as error
      from json_each(:failures)) as f
where d.event_id = f.id and d.endpoint_id = :endpoint and d.status = 'pending'
  and d.event_id in (
    select x.value from {prefix}endpoint_leases l, json_each(l.ids) x
    where l.endpoint_id = :endpoint and l.owner = :owner);

-- name: lane_leave
-- :leaving, a JSON array of {"id", "lease"}: each id leaves the lease of
-- :owner named (0: every lease of :owner); the leases ended (:ended, a
-- JSON array of lease ids) are deleted by lane_end.
update {prefix}endpoint_leases as l
set ids = (
  select json_group_array(x.value) from json_each(l.ids) x
  where not exists (
    select 1 from json_each(:leaving) s
    where s.value ->> 'id' = x.value and (s.value ->> 'lease' = 0 or s.value ->> 'lease' = l.id)))
where l.endpoint_id = :endpoint and l.owner = :owner
  and l.id not in (select value from json_each(:ended))
  and exists (
    select 1 from json_each(l.ids) x, json_each(:leaving) s
    where s.value ->> 'id' = x.value and (s.value ->> 'lease' = 0 or s.value ->> 'lease' = l.id));

-- name: lane_end
-- The leases of :owner ended (:ended, a JSON array of lease ids), and
-- those that hold nothing any more.
delete from {prefix}endpoint_leases
where endpoint_id = :endpoint and owner = :owner
  and (id in (select value from json_each(:ended)) or json_array_length(ids) = 0);

-- name: lane_extend_lease
-- Renews the leases of :owner that list any of :ids; lane_held then reads
-- which of them are still held.
update {prefix}endpoint_leases as l
set expires_at = :lease_until
where l.endpoint_id = :endpoint and l.owner = :owner
  and exists (select 1 from json_each(l.ids) x where x.value in (select value from json_each(:ids)));

-- name: lane_held
-- Those of :ids that a lease of :owner lists and that are still pending (a
-- delivered or failed one stays listed until its claim ends).
select d.event_id from {prefix}endpoint_deliveries d
where d.event_id in (select value from json_each(:ids)) and d.endpoint_id = :endpoint and d.status = 'pending'
  and d.event_id in (
    select x.value from {prefix}endpoint_leases l, json_each(l.ids) x
    where l.endpoint_id = :endpoint and l.owner = :owner);

-- name: lane_expired_owners
-- The relays whose lease on the endpoint expired, and how many of the
-- deliveries they list are still pending; run in the transaction of
-- lane_reclaim_expired, before it.
select l.owner, count(d.seq)
from {prefix}endpoint_leases l
cross join json_each(l.ids) x
left join {prefix}endpoint_deliveries d
  on d.event_id = x.value and d.endpoint_id = :endpoint and d.status = 'pending'
where l.endpoint_id = :endpoint and l.expires_at < :now
group by l.owner
having count(d.seq) > 0
order by l.owner;

-- name: lane_reclaim_expired
-- The deliveries that the expired leases on the endpoint list and that are
-- still pending count a failed attempt: due now, or failed (dropped for a
-- shadow endpoint) once they have used :max_attempts. lane_reclaim_leases
-- then deletes the leases.
update {prefix}endpoint_deliveries as d
set status = case when not (typeof(d.attempts) = 'integer' and d.attempts between 0 and 999999999) then d.status
                  when d.attempts + 1 < :max_attempts then 'pending'
                  when :shadow then 'dropped' else 'failed' end,
    processed_at = case when typeof(d.attempts) = 'integer' and d.attempts + 1 >= :max_attempts then :now end,
    attempts = case when typeof(d.attempts) = 'integer' and d.attempts between 0 and 999999999
      then d.attempts + 1 else d.attempts end,
    available_at = :now,
    last_error = 'lease of relay ' || x.owner || ' expired before the delivery was settled'
from (select x.value as id, l.owner from {prefix}endpoint_leases l, json_each(l.ids) x
      where l.endpoint_id = :endpoint and l.expires_at < :now) as x
where d.event_id = x.id and d.endpoint_id = :endpoint and d.status = 'pending';

-- name: lane_reclaim_leases
delete from {prefix}endpoint_leases where endpoint_id = :endpoint and expires_at < :now;

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

-- name: endpoint_requeue_exists
-- EndpointRequeue: whether endpoint ?1 is there.
select exists (select 1 from {prefix}endpoints where id = ?1);

-- name: endpoint_requeue_finished
-- EndpointRequeue's finished deliveries (done, dropped) to endpoint ?1 of
-- the events of ?2 (a JSON array of their ids) back to the
-- endpoint's queue, due ?3, as never attempted, their headers marked with
-- the replay's name ?4 under the header ?5 (postbox.HeaderReplay;
-- headers that are no object become the mark alone).
update {prefix}endpoint_deliveries
set status = 'pending', attempts = 0, available_at = ?3, processed_at = null, last_error = null,
    lease_owner = null, lease_expires_at = null,
    headers = json_set(
      case when json_valid(headers) then case when json_type(headers) = 'object' then headers else '{}' end else '{}' end,
      '$.' || json_quote(?5), ?4)
where endpoint_id = ?1 and status in ('done', 'dropped')
  and event_id in (select value from json_each(?2));

-- name: endpoint_requeue_insert
-- EndpointRequeue's absent deliveries to endpoint ?1: the rows of ?2
-- ({"id" (the event's), "aggregate_type", "aggregate_id", "event_type",
-- "payload", "headers"}) that have no delivery to it, written pending,
-- due ?3, in the array's order. The lanes do not listen: package endpoint
-- finds them due by its poll (delivery_due), as those of delivery_insert.
insert into {prefix}endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at, created_at)
select r.value ->> 'id', ?1, r.value ->> 'aggregate_type', r.value ->> 'aggregate_id', r.value ->> 'event_type',
       r.value ->> 'payload', r.value ->> 'headers', ?3, ?3
from json_each(?2) r
where not exists (select 1 from {prefix}endpoint_deliveries d where d.endpoint_id = ?1 and d.event_id = r.value ->> 'id')
order by r.key;
