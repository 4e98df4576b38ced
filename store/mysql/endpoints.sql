-- Named queries of the webhook endpoints (store.Endpoints) of the MySQL
-- store; "{prefix}" is the table prefix. Parameters are numbered (?1) or
-- named (:endpoint), as in the SQLite store's (named.go rewrites both);
-- times are DATETIME(6) in UTC, "now" comes from the caller. MySQL has no
-- UPDATE ... RETURNING: a statement that changes a row the store reads back
-- is followed by a read in the same transaction.

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
-- A compare-and-swap on updated_at: only if it is still ?13 (as read;
-- null: whatever it is). When it changes no row, endpoint_exists, in the
-- same transaction, tells a row that changed from one not there.
--
-- Every change of an endpoint's settings, secrets or state bumps updated_at
-- (here, endpoint_set_state, endpoint_rotate_secret, endpoint_seal) to now,
-- or one microsecond past its value when that is now or later (a clock that
-- went back, two changes in one microsecond): a bump always changes it, and
-- never back to a value a reader may hold. The last time a DATETIME holds
-- (a row written by hand) becomes now.
update {prefix}endpoints
set name = ?2, url = ?3, types = ?4, rate_per_second = ?5, concurrency = ?6, shadow = ?7,
    allow_private = ?8, filter = ?10, envelope = ?11, signature = ?12,
    updated_at = case when updated_at >= ?9 and updated_at < '9999-12-31 23:59:59.999999'
                      then updated_at + interval 1 microsecond else ?9 end
where id = ?1 and (?13 is null or updated_at = ?13);

-- name: endpoint_set_state
update {prefix}endpoints
set state = ?2, failing_since = case when ?2 = 'enabled' then null else failing_since end,
    updated_at = case when updated_at >= ?3 and updated_at < '9999-12-31 23:59:59.999999'
                      then updated_at + interval 1 microsecond else ?3 end
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
    updated_at = case when updated_at >= ?4 and updated_at < '9999-12-31 23:59:59.999999'
                      then updated_at + interval 1 microsecond else ?4 end
where id = ?1 and sealed is null;

-- name: endpoint_seal
-- A compare-and-swap of the endpoint's sealed secrets (?2..?5): only if
-- its sealed data is still ?7 (null: not sealed yet; <=> compares bytes,
-- and null with null). It empties the clear secrets and sets
-- previous_secret_until to ?6 (null: none). A ?9 that is not empty becomes
-- the URL in the same statement.
update {prefix}endpoints
set sealed = ?2, sealed_key = ?3, sealed_fingerprint = ?4, auth = ?5, previous_secret_until = ?6,
    secret = '', previous_secret = null, url = coalesce(nullif(?9, ''), url),
    updated_at = case when updated_at >= ?8 and updated_at < '9999-12-31 23:59:59.999999'
                      then updated_at + interval 1 microsecond else ?8 end
where id = ?1 and sealed <=> ?7;

-- name: endpoint_exists
select exists (select 1 from {prefix}endpoints where id = ?1);

-- name: endpoint_failing
update {prefix}endpoints set failing_since = coalesce(failing_since, ?2)
where id = ?1;

-- name: endpoint_failing_since
select failing_since from {prefix}endpoints where id = ?1;

-- name: endpoint_recovered
update {prefix}endpoints set failing_since = null where id = ?1 and failing_since is not null;

-- name: endpoint_breaker
-- ?2 null: the breaker closed.
update {prefix}endpoints set breaker_open_until = ?2 where id = ?1;

-- name: delivery_insert
-- The deliveries of a batch of routes: ?1 is a JSON array of rows, one per
-- (event, endpoint), numbered (seq) in the array's order; ?2 is now. Rows
-- of endpoints no longer in the table are skipped, and a delivery already
-- written for (event, endpoint) is kept (the update changes nothing, and
-- counts as no row). A row of an endpoint tried before its delivery was
-- written (store.Route.Tried) has its status, attempts and last_error
-- (absent: pending, 0, null), and is processed now when finished (failed,
-- dropped, done); its available_at is already its RetryAt when it has one.
insert into {prefix}endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at, created_at,
   status, attempts, last_error, processed_at)
select r.event_id, r.endpoint_id, r.aggregate_type, r.aggregate_id, r.event_type, r.payload, r.headers,
       r.available_at, ?2, coalesce(r.status, 'pending'), coalesce(r.attempts, 0), r.last_error,
       case when coalesce(r.status, 'pending') <> 'pending' then ?2 end
from json_table(?1, '$[*]' columns (
  n for ordinality,
  event_id char(36) character set ascii collate ascii_bin path '$.event_id',
  endpoint_id char(36) character set ascii collate ascii_bin path '$.endpoint_id',
  aggregate_type mediumtext path '$.aggregate_type',
  aggregate_id mediumtext path '$.aggregate_id',
  event_type mediumtext path '$.event_type',
  payload longtext path '$.payload',
  headers longtext path '$.headers',
  available_at datetime(6) path '$.available_at',
  status varchar(16) character set ascii collate ascii_bin path '$.status',
  attempts int path '$.attempts',
  last_error mediumtext path '$.last_error')) r
where exists (select 1 from {prefix}endpoints e where e.id = r.endpoint_id)
order by r.n
on duplicate key update seq = {prefix}endpoint_deliveries.seq;

-- name: delivery_pending
-- ?1 is a JSON array of endpoint ids. An endpoint has a pending delivery,
-- due or not, leased or not: one probe per endpoint of
-- endpoint_deliveries_endpoint_idx (endpoint_id, status, seq).
select e.id from json_table(?1, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) e
where exists (select 1 from {prefix}endpoint_deliveries d
              where d.endpoint_id = e.id and d.status = 'pending');

-- name: delivery_due
-- ?1 is a JSON array of endpoint ids, ?2 now. An endpoint has deliveries
-- due when one of its due pending deliveries is not leased.
select e.id from json_table(?1, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) e
where exists (select 1 from {prefix}endpoint_deliveries d
              where d.endpoint_id = e.id and d.status = 'pending' and d.available_at <= ?2
                and d.event_id not in (
                  select x.id from {prefix}endpoint_leases l
                  cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
                  where l.endpoint_id = e.id));

-- name: delivery_counts
-- Leased deliveries (pending rows that a lease of the endpoint lists, until
-- the lease ends or is reclaimed) count as processing, not pending; the
-- oldest pending delivery is the oldest no relay holds.
select count(case when status = 'pending' and not in_flight then 1 end), count(case when in_flight then 1 end),
       count(case when status = 'done' then 1 end), count(case when status = 'failed' then 1 end),
       count(case when status = 'dropped' then 1 end),
       min(case when status = 'pending' and not in_flight then created_at end)
from (
  select d.status, d.created_at, d.status = 'pending' and d.event_id in (
    select x.id from {prefix}endpoint_leases l
    cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
    where l.endpoint_id = ?1) as in_flight
  from {prefix}endpoint_deliveries d where d.endpoint_id = ?1) deliveries;

-- name: delivery_counts_all
-- delivery_counts for every endpoint at once (store.Endpoints.
-- DeliveryCountsAll): one row per endpoint, zeros for one without
-- deliveries (oldest null). A delivery is leased when a lease of its own
-- endpoint lists it, as in delivery_counts.
select e.id, coalesce(c.pending, 0), coalesce(c.processing, 0), coalesce(c.done, 0), coalesce(c.failed, 0),
       coalesce(c.dropped, 0), c.oldest
from {prefix}endpoints e
left join (
  select d.endpoint_id,
         count(case when d.status = 'pending' and l.id is null then 1 end) as pending,
         count(l.id) as processing,
         count(case when d.status = 'done' then 1 end) as done,
         count(case when d.status = 'failed' then 1 end) as failed,
         count(case when d.status = 'dropped' then 1 end) as dropped,
         min(case when d.status = 'pending' and l.id is null then d.created_at end) as oldest
  from {prefix}endpoint_deliveries d
  left join (
    select distinct l.endpoint_id, x.id from {prefix}endpoint_leases l
    cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
  ) l on l.endpoint_id = d.endpoint_id and l.id = d.event_id and d.status = 'pending'
  group by d.endpoint_id
) c on c.endpoint_id = e.id;

-- name: delivery_list
-- A leased delivery reads as 'processing', its attempt in flight counted
-- (as the attempt a claim returned); ?2 'processing' lists those.
select event_id, aggregate_type, aggregate_id, event_type, payload, headers,
       endpoint_id, status, attempts, available_at, last_error, created_at
from (
  select d.event_id, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers, d.endpoint_id,
         case when d.in_flight then 'processing' else d.status end as status,
         case when d.in_flight then d.attempts + 1 else d.attempts end as attempts,
         d.available_at, coalesce(d.last_error, '') as last_error, d.created_at, d.seq
  from (
    select e.*, e.status = 'pending' and e.event_id in (
      select x.id from {prefix}endpoint_leases l
      cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
      where l.endpoint_id = ?1) as in_flight
    from {prefix}endpoint_deliveries e
    where e.endpoint_id = ?1 and (?2 = '' or e.status = case when ?2 = 'processing' then 'pending' else ?2 end)) d) listed
where ?2 = '' or status = ?2
order by seq
limit ?3;

-- name: attempt_insert
-- The attempts are a JSON array of objects.
insert into {prefix}endpoint_attempts
  (endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at, at_range)
select endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at, at_range
from json_table(?1, '$[*]' columns (
  endpoint_id char(36) character set ascii collate ascii_bin path '$.endpoint_id',
  event_id char(36) character set ascii collate ascii_bin path '$.event_id',
  event_type mediumtext path '$.event_type',
  attempt int path '$.attempt',
  status_code int path '$.status_code',
  duration_us bigint path '$.duration_us',
  response mediumtext path '$.response',
  error mediumtext path '$.error',
  at datetime(6) path '$.at',
  at_range int path '$.at_range')) a;

-- name: attempt_list
select endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error,
       if(at_range = 0, at, null)
from {prefix}endpoint_attempts
where endpoint_id = ?1
order by id desc
limit ?2;

-- name: attempt_summary
-- The attempts of every endpoint per endpoint that has any
-- (store.Endpoints.AttemptSummary), in the order of endpoint listing: every
-- attempt when ?1, only those after year 9999 when ?3, else those made at
-- or after ?2; each endpoint's attempts are one range of
-- endpoint_attempts_endpoint_at_idx (endpoint_id, at). An attempt whose
-- time DATETIME cannot hold (at_range) is never the last.
select e.id, count(*), count(case when a.error = '' then 1 end),
       max(case when a.at_range = 0 then a.at end)
from {prefix}endpoints e
join {prefix}endpoint_attempts a on a.endpoint_id = e.id
where ?1 or a.at_range > 0 or (not ?3 and a.at_range = 0 and a.at >= ?2)
group by e.id, e.created_at
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
-- for the claim to report (Delivery.Invalid). Every step of a lane locks
-- its endpoint's row first (lane_lock): the steps of one endpoint take
-- turns, so each claim sees every lease before it.

-- name: lane_lock
-- The endpoint's row, locked until the transaction ends; whether it is
-- enabled.
select state = 'enabled' from {prefix}endpoints where id = :endpoint for update;

-- name: lane_claim
-- Up to :limit due pending deliveries not leased, after (:after_at,
-- :after_seq) in claim order, each with its payload's bytes (the store
-- bounds the claim by :max_bytes as the outbox's claim does). lane_lease
-- then leases them.
select event_id, seq, aggregate_type, aggregate_id, event_type, payload, headers,
       if(attempts between 0 and 999999999, attempts + 1, attempts),
       created_at, available_at, octet_length(payload)
from {prefix}endpoint_deliveries
where endpoint_id = :endpoint and status = 'pending' and available_at <= :now
  and (available_at > :after_at or (available_at = :after_at and seq > :after_seq))
  and event_id not in (
    select x.id from {prefix}endpoint_leases l
    cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
    where l.endpoint_id = :endpoint)
order by available_at, seq
limit :limit;

-- name: lane_claim_ordered
-- An ordered claim: like lane_claim, the heads only, the lowest seq among
-- the endpoint's pending deliveries of their aggregate (one probe of
-- endpoint_deliveries_aggregate_pending_idx each; a leased head stays
-- pending, so it holds its successors back), due and not leased.
select d.event_id, d.seq, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers,
       if(d.attempts between 0 and 999999999, d.attempts + 1, d.attempts),
       d.created_at, d.available_at, octet_length(d.payload)
from {prefix}endpoint_deliveries d
where d.endpoint_id = :endpoint and d.status = 'pending' and d.available_at <= :now
  and d.event_id not in (
    select x.id from {prefix}endpoint_leases l
    cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
    where l.endpoint_id = :endpoint)
  and not exists (
    select 1 from {prefix}endpoint_deliveries p
    where p.endpoint_id = :endpoint and p.aggregate_type = d.aggregate_type and p.aggregate_id = d.aggregate_id
      and p.status = 'pending' and p.seq < d.seq)
order by d.available_at, d.seq
limit :limit;

-- name: lane_lease
-- The lease of a claim: :ids, a JSON array of the event ids it took.
insert into {prefix}endpoint_leases (endpoint_id, owner, ids, expires_at)
values (:endpoint, :owner, :ids, :lease_until);

-- name: lane_settle_delete
-- :ids, a JSON array of delivered ids, whoever holds them.
delete from {prefix}endpoint_deliveries
where event_id in (select id from json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j)
  and endpoint_id = :endpoint and status = 'pending';

-- name: lane_settle_done
-- :ids, a JSON array of delivered ids, whoever holds them, kept done.
update {prefix}endpoint_deliveries
set status = 'done', processed_at = :now, last_error = null
where event_id in (select id from json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j)
  and endpoint_id = :endpoint and status = 'pending';

-- name: lane_settle_retry
-- :retries, a JSON array of {"id", "at", "error"}, for deliveries a lease
-- of :owner lists: due at their time, the attempt counted.
update {prefix}endpoint_deliveries d
join json_table(:retries, '$[*]' columns (
  id char(36) character set ascii collate ascii_bin path '$.id',
  at datetime(6) path '$.at',
  error mediumtext path '$.error')) r on d.event_id = r.id
set d.available_at = r.at, d.last_error = r.error,
    d.attempts = if(d.attempts between 0 and 999999999, d.attempts + 1, d.attempts)
where d.endpoint_id = :endpoint and d.status = 'pending'
  and d.event_id in (
    select x.id from {prefix}endpoint_leases l
    cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
    where l.endpoint_id = :endpoint and l.owner = :owner);

-- name: lane_settle_failed
-- :failures, a JSON array of {"id", "error"}, for deliveries a lease of
-- :owner lists: failed, or dropped for a shadow endpoint (:shadow), the
-- attempt counted.
update {prefix}endpoint_deliveries d
join json_table(:failures, '$[*]' columns (
  id char(36) character set ascii collate ascii_bin path '$.id',
  error mediumtext path '$.error')) f on d.event_id = f.id
set d.status = if(:shadow, 'dropped', 'failed'), d.processed_at = :now, d.last_error = f.error,
    d.attempts = if(d.attempts between 0 and 999999999, d.attempts + 1, d.attempts)
where d.endpoint_id = :endpoint and d.status = 'pending'
  and d.event_id in (
    select x.id from {prefix}endpoint_leases l
    cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
    where l.endpoint_id = :endpoint and l.owner = :owner);

-- name: lane_owner_leases
-- The leases of :owner on the endpoint: the store takes the deliveries
-- that leave them out of their lists (lane_set_ids).
select id, ids from {prefix}endpoint_leases where endpoint_id = :endpoint and owner = :owner;

-- name: lane_set_ids
update {prefix}endpoint_leases set ids = :ids where id = :id;

-- name: lane_end
-- The leases of :owner ended (:ended, a JSON array of lease ids), and
-- those that hold nothing any more.
delete from {prefix}endpoint_leases
where endpoint_id = :endpoint and owner = :owner
  and (id in (select id from json_table(:ended, '$[*]' columns (id bigint path '$')) j) or json_length(ids) = 0);

-- name: lane_extend_lease
-- Renews the leases of :owner that list any of :ids; lane_held then reads
-- which of them are still held.
update {prefix}endpoint_leases l
set l.expires_at = :lease_until
where l.endpoint_id = :endpoint and l.owner = :owner
  and exists (
    select 1 from json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
    where x.id in (select id from json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) y));

-- name: lane_held
-- Those of :ids that a lease of :owner lists and that are still pending (a
-- delivered or failed one stays listed until its claim ends).
select d.event_id from {prefix}endpoint_deliveries d
where d.event_id in (select id from json_table(:ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j)
  and d.endpoint_id = :endpoint and d.status = 'pending'
  and d.event_id in (
    select x.id from {prefix}endpoint_leases l
    cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
    where l.endpoint_id = :endpoint and l.owner = :owner);

-- name: lane_expired_owners
-- The relays whose lease on the endpoint expired, and how many of the
-- deliveries they list are still pending; run in the transaction of
-- lane_reclaim_expired, before it.
select l.owner, count(d.seq)
from {prefix}endpoint_leases l
cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
left join {prefix}endpoint_deliveries d
  on d.event_id = x.id and d.endpoint_id = :endpoint and d.status = 'pending'
where l.endpoint_id = :endpoint and l.expires_at < :now
group by l.owner
having count(d.seq) > 0
order by l.owner;

-- name: lane_reclaim_expired
-- The deliveries that the expired leases on the endpoint list and that are
-- still pending count a failed attempt: due now, or failed (dropped for a
-- shadow endpoint) once they have used :max_attempts. lane_reclaim_leases
-- then deletes the leases. (One table updated: MySQL assigns left to
-- right, each assignment reading the values before it.)
update {prefix}endpoint_deliveries d
set d.last_error = concat('lease of relay ', coalesce((
      select l.owner from {prefix}endpoint_leases l
      cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
      where l.endpoint_id = :endpoint and l.expires_at < :now and x.id = d.event_id
      limit 1), '?'), ' expired before the delivery was settled'),
    d.available_at = :now,
    d.status = case when not (d.attempts between 0 and 999999999) then d.status
                    when d.attempts + 1 < :max_attempts then 'pending'
                    when :shadow then 'dropped' else 'failed' end,
    d.processed_at = case when d.attempts between 0 and 999999999 and d.attempts + 1 >= :max_attempts then :now end,
    d.attempts = if(d.attempts between 0 and 999999999, d.attempts + 1, d.attempts)
where d.endpoint_id = :endpoint and d.status = 'pending'
  and d.event_id in (
    select x.id from {prefix}endpoint_leases l
    cross join json_table(l.ids, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) x
    where l.endpoint_id = :endpoint and l.expires_at < :now);

-- name: lane_reclaim_leases
delete from {prefix}endpoint_leases where endpoint_id = :endpoint and expires_at < :now;

-- name: lane_purge_deliveries
-- Up to :limit of the endpoint's finished (done or dropped) deliveries
-- processed before :before.
delete from {prefix}endpoint_deliveries
where endpoint_id = :endpoint and status in ('done', 'dropped') and processed_at < :before
limit :limit;

-- name: lane_purge_attempts
-- Up to :limit of the endpoint's attempts made before :before.
delete from {prefix}endpoint_attempts
where endpoint_id = :endpoint and at < :before
limit :limit;

-- name: endpoint_requeue_exists
-- EndpointRequeue: whether endpoint ?1 is there.
select exists (select 1 from {prefix}endpoints where id = ?1);

-- name: endpoint_requeue_finished
-- EndpointRequeue's finished deliveries (done, dropped) to endpoint ?1 of
-- the events of ?2 (a JSON array of their ids) back to the endpoint's
-- queue, due ?3, as never attempted, their headers marked with the
-- replay's name ?4 under the header ?5 (postbox.HeaderReplay; headers that
-- are no object become the mark alone).
update {prefix}endpoint_deliveries
set status = 'pending', attempts = 0, available_at = ?3, processed_at = null, last_error = null,
    lease_owner = null, lease_expires_at = null,
    headers = json_set(if(json_type(headers) = 'OBJECT', headers, '{}'), concat('$.', json_quote(?5)), ?4)
where endpoint_id = ?1 and status in ('done', 'dropped')
  and event_id in (select id from json_table(?2, '$[*]' columns (id char(36) character set ascii collate ascii_bin path '$')) j);

-- name: endpoint_requeue_insert
-- EndpointRequeue's absent deliveries to endpoint ?1: the rows of ?2
-- ({"id" (the event's), "aggregate_type", "aggregate_id", "event_type",
-- "payload", "headers"}) that have no delivery to it, written pending,
-- due ?3, in the array's order.
insert into {prefix}endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at, created_at)
select r.id, ?1, r.aggregate_type, r.aggregate_id, r.event_type, r.payload, r.headers, ?3, ?3
from json_table(?2, '$[*]' columns (
  n for ordinality,
  id char(36) character set ascii collate ascii_bin path '$.id',
  aggregate_type mediumtext path '$.aggregate_type',
  aggregate_id mediumtext path '$.aggregate_id',
  event_type mediumtext path '$.event_type',
  payload longtext path '$.payload',
  headers longtext path '$.headers')) r
where not exists (select 1 from {prefix}endpoint_deliveries d where d.endpoint_id = ?1 and d.event_id = r.id)
order by r.n;
