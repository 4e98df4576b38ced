-- Named queries of the PostgreSQL store. "{schema}" is replaced by the quoted
-- schema name when the store is created; each query starts at "-- name:".
--
-- How events are leased: a claim reads due events that no lease lists and
-- writes one outbox_leases row naming them all (its batch is the
-- Delivery.Lease of each); it never updates the events. Claims take turns
-- on an advisory lock (claim_lock, in the same implicit transaction), so
-- each sees every lease committed before it. Settling deletes delivered
-- events (or marks them done when they are kept) and updates retried and
-- failed ones, in one statement. Retried, failed and released events leave
-- their lease row (retried and released ones go back to the queue, and a
-- failed one may, by `postbox failed retry`); delivered ones stay listed,
-- holding nothing back since they are no longer pending, until the relay
-- ends the whole claim (SettleParams.Ended) or the lease expires.
-- So a settle does not rewrite the lease rows' arrays, whose cost grows
-- with every event the relay holds.

-- name: migrations_table_exists
select to_regclass('{schema}.postbox_migrations') is not null;

-- name: migrated_version
-- The highest migration applied (the table exists: see the query above).
select coalesce(max(version), 0) from {schema}.postbox_migrations;

-- name: relay_async_commit
-- The relay's bookkeeping (claims, outcomes) commits without waiting for its
-- WAL flush: a crash of the server may forget its last fraction of a second,
-- and the events concerned are delivered again (at least once); no event is
-- lost, since the events themselves are written by the producers' commits.
select set_config('synchronous_commit', 'off', true);

-- name: claim_timeouts
-- Bounds a claim on the server, within the relay's deadline (see
-- claimTimeouts): the wait for the claims' turn ($1, lock_timeout) and each
-- statement ($2, statement_timeout), in milliseconds. A claim the server
-- cancels leases nothing; one the client gave up on may have committed,
-- leaving its events leased until the lease ends.
select set_config('lock_timeout', $1::text, true), set_config('statement_timeout', $2::text, true);

-- name: claim_lock
select pg_advisory_xact_lock($1);

-- name: claim
-- Leases up to $2 due events to relay $1 for $3 milliseconds, taking only
-- events after ($4, $5) in claim order (available_at, seq): a relay
-- draining a backlog starts where its last claim ended; '-infinity' when it
-- starts from the head. The index scan then begins at that position instead
-- of reading past the events the relay holds and past the index entries of
-- the events it deleted (dead until vacuum, each costing a heap visit or a
-- skipped entry). The attempt is counted as a bigint, which no value of
-- retries overflows; the store reads each row defensively, so that a row
-- it cannot read fails alone instead of failing the claim.
with leased as (
  select unnest(ids) as id from {schema}.outbox_leases
), due as (
  select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload, e.headers, e.retries, e.created_at, e.available_at
  from {schema}.outbox_events e
  where e.status = 'pending' and e.available_at <= now()
    and (e.available_at, e.seq) > ($4::timestamptz, $5::bigint)
    and e.id not in (select id from leased)
  order by e.available_at, e.seq
  limit $2
), lease as (
  insert into {schema}.outbox_leases (owner, ids, expires_at)
  select $1, array_agg(id), now() + $3::bigint * interval '1 millisecond' from due
  having count(*) > 0
  returning batch
)
select id, seq, aggregate_type, aggregate_id, event_type, payload, headers, retries::bigint + 1, created_at, available_at,
  (select batch from lease)
from due;

-- name: claim_bounded
-- claim with a byte bound, $6 (ClaimParams.MaxBytes): the events up to the
-- one that would take the payloads' bytes past $6, always the first. The
-- size of a payload is that of its text, as the relay receives it: the
-- server renders each due event's payload (up to $2) to measure it, which
-- is why claim, without a bound, is a query of its own.
with leased as (
  select unnest(ids) as id from {schema}.outbox_leases
), due as (
  select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload, e.headers, e.retries, e.created_at, e.available_at
  from {schema}.outbox_events e
  where e.status = 'pending' and e.available_at <= now()
    and (e.available_at, e.seq) > ($4::timestamptz, $5::bigint)
    and e.id not in (select id from leased)
  order by e.available_at, e.seq
  limit $2
), taken as (
  select d.id, d.seq, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers, d.retries, d.created_at, d.available_at
  from (
    select d.*,
      sum(octet_length(d.payload::text)) over (order by d.available_at, d.seq rows unbounded preceding) as total,
      row_number() over (order by d.available_at, d.seq) as n
    from due d) d
  where d.n = 1 or d.total <= $6::bigint
), lease as (
  insert into {schema}.outbox_leases (owner, ids, expires_at)
  select $1, array_agg(id), now() + $3::bigint * interval '1 millisecond' from taken
  having count(*) > 0
  returning batch
)
select id, seq, aggregate_type, aggregate_id, event_type, payload, headers, retries::bigint + 1, created_at, available_at,
  (select batch from lease)
from taken;

-- name: claim_ordered
-- Like claim, but only the oldest unfinished event of each aggregate (its
-- head): an event being delivered or waiting for a retry is still pending,
-- so it holds its successors back. A row lower in sequence that is not yet
-- committed is invisible here; it is taken after the ones committed before
-- it. $4, $5: the aggregate (type, id) after which the walk for heads
-- starts (see skip_scan). $6, when positive, is the byte bound of
-- claim_bounded (in one query: the ordered claim is long, and its cost is
-- elsewhere). $7, when above 1, takes with each head up to $7 - 1 of its
-- successors (runs). The last column, walk_end, marks the row of the last
-- aggregate the walk took: the next claim's walk starts after it.
--
-- Two ways find heads, so that no claim reads the whole backlog:
-- - window: the oldest due events (4 × $2 of them, in claim order), those
--   of them that are heads: the common case, oldest first;
-- - skip_scan: when the window was full yet its heads cannot fill the claim
--   (the heads sit behind their successors in claim order: a head waiting
--   for a retry, or reclaimed, while its successors are long due), one
--   index probe per aggregate that has pending events, until $2 heads are
--   found. Its cost grows with the aggregates, never with the events queued
--   behind their heads. The walk goes round the aggregates in key order
--   from the one after ($4, $5), wrapping past the last key to the first
--   and ending at ($4, $5) itself: since each claim starts where the last
--   one ended, every aggregate gets its turn, whatever its key.
--
-- Every step until the last carries the rows' keys only (id, seq,
-- aggregate, due time): the payloads are read once, for the events taken.
with recursive leased as (
  select unnest(ids) as id from {schema}.outbox_leases
), window_rows as (
  select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.available_at
  from {schema}.outbox_events e
  where e.status = 'pending' and e.available_at <= now()
  order by e.available_at, e.seq
  limit 4 * $2::int
), window_heads as (
  -- Only the first row of each aggregate in the window can be its head; a
  -- scalar subquery per such row: one probe of the aggregate index each,
  -- never a join that reads every pending event.
  select w.*, null::int as step from (
    -- (compared byte by byte: under the database's collation, the sort
    -- took three times as long)
    select distinct on (r.aggregate_type collate "C", r.aggregate_id collate "C") r.*
    from window_rows r
    order by r.aggregate_type collate "C", r.aggregate_id collate "C", r.seq) w
  where w.id not in (select id from leased)
    and w.seq = (
      select min(p.seq) from {schema}.outbox_events p
      where p.aggregate_type = w.aggregate_type
        and p.aggregate_id = w.aggregate_id
        and p.status = 'pending')
  order by w.available_at, w.seq
  limit $2
), heads as (
  -- The walk: the head of the first aggregate after ($4, $5), or, when
  -- there is none, of the first aggregate (wrapped); then of the next
  -- aggregate each time. Each branch is one probe of the aggregate index;
  -- a UNION ALL under LIMIT 1 runs a branch only when those before it found
  -- nothing, and a branch whose condition on h is false runs no probe.
  select s.*, 1 as step from (
    (select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.available_at, false as wrapped
     from {schema}.outbox_events e
     where e.status = 'pending'
       and (e.aggregate_type, e.aggregate_id) > ($4::text, $5::text)
     order by e.aggregate_type, e.aggregate_id, e.seq
     limit 1)
    union all
    (select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.available_at, true
     from {schema}.outbox_events e
     where e.status = 'pending'
       and (e.aggregate_type, e.aggregate_id) <= ($4::text, $5::text)
     order by e.aggregate_type, e.aggregate_id, e.seq
     limit 1)
    limit 1) s
  union all
  select n.*, h.step + 1
  from heads h, lateral (
    -- the next aggregate, before wrapping
    (select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.available_at, false
     from {schema}.outbox_events e
     where not h.wrapped and e.status = 'pending'
       and (e.aggregate_type, e.aggregate_id) > (h.aggregate_type, h.aggregate_id)
     order by e.aggregate_type, e.aggregate_id, e.seq
     limit 1)
    union all
    -- the next aggregate after wrapping, up to ($4, $5)
    (select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.available_at, true
     from {schema}.outbox_events e
     where h.wrapped and e.status = 'pending'
       and (e.aggregate_type, e.aggregate_id) > (h.aggregate_type, h.aggregate_id)
       and (e.aggregate_type, e.aggregate_id) <= ($4::text, $5::text)
     order by e.aggregate_type, e.aggregate_id, e.seq
     limit 1)
    union all
    -- past the last aggregate: wrap to the first
    (select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.available_at, true
     from {schema}.outbox_events e
     where not h.wrapped and e.status = 'pending'
       and (e.aggregate_type, e.aggregate_id) <= ($4::text, $5::text)
     order by e.aggregate_type, e.aggregate_id, e.seq
     limit 1)
    limit 1) n
), skip_scan as (
  -- Only when the window was full (a window that is not full saw every
  -- due event, so every due head) and its heads with their runs cannot
  -- fill the claim.
  select h.id, h.seq, h.aggregate_type, h.aggregate_id, h.available_at, h.step
  from heads h
  where (select count(*) from window_heads) * greatest($7::int, 1) < $2
    and exists (
      select 1 from {schema}.outbox_events e
      where e.status = 'pending' and e.available_at <= now()
      order by e.available_at, e.seq
      offset 4 * $2::int - 1
      limit 1)
    and h.available_at <= now()
    and h.id not in (select id from leased)
    and h.id not in (select id from window_heads)
  limit $2
), heads_due as (
  select c.*, row_number() over (order by c.available_at, c.seq) as head_rank
  from (select * from window_heads union all select * from skip_scan) c
  order by c.available_at, c.seq
  limit $2
), runs as (
  -- Each head's run ($7 events at most, see store.ClaimParams.AggregateRun):
  -- the head (pos 1), then its successors in sequence order, each due and
  -- not leased, up to the first that is not; none when the heads fill the
  -- claim, and no more per head than the claim has room for. One probe of
  -- the aggregate index per head.
  select h.id, h.step, h.head_rank, 1::bigint as pos
  from heads_due h
  union all
  select n.id, null::int, h.head_rank, n.pos
  from heads_due h, lateral (
    select f.id, 1 + row_number() over (order by f.seq) as pos,
      bool_and(f.available_at <= now() and f.id not in (select id from leased)) over (order by f.seq) as clear
    from (
      select e.id, e.seq, e.available_at
      from {schema}.outbox_events e
      where $7::int > 1 and (select count(*) from heads_due) < $2::int
        and e.aggregate_type = h.aggregate_type and e.aggregate_id = h.aggregate_id
        and e.status = 'pending' and e.seq > h.seq
      order by e.seq
      limit least($7::int - 1,
        ($2::int - 1) / greatest((select count(*) from heads_due), 1))) f
  ) n
  where n.clear
), chosen as (
  -- Every head before any successor: a claim cut short by $2 or by the
  -- byte bound keeps whole prefixes of the runs.
  select r.* from runs r
  order by r.pos, r.head_rank
  limit $2
), taken as (
  select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload, e.headers, e.retries, e.created_at, e.available_at,
    c.step, c.pos, c.head_rank
  from chosen c
  join {schema}.outbox_events e on e.id = c.id
), due as (
  -- The byte bound of claim ($6): computed only with one.
  select t.id, t.seq, t.aggregate_type, t.aggregate_id, t.event_type, t.payload, t.headers, t.retries, t.created_at, t.available_at, t.step
  from taken t where $6::bigint <= 0
  union all
  select h.id, h.seq, h.aggregate_type, h.aggregate_id, h.event_type, h.payload, h.headers, h.retries, h.created_at, h.available_at, h.step
  from (
    select h.*,
      sum(octet_length(h.payload::text)) over (order by h.pos, h.head_rank rows unbounded preceding) as total,
      row_number() over (order by h.pos, h.head_rank) as n
    from taken h
    where $6::bigint > 0) h
  where h.n = 1 or h.total <= $6::bigint
), lease as (
  insert into {schema}.outbox_leases (owner, ids, expires_at)
  select $1, array_agg(id), now() + $3::bigint * interval '1 millisecond' from due
  having count(*) > 0
  returning batch
)
select id, seq, aggregate_type, aggregate_id, event_type, payload, headers, retries::bigint + 1, created_at, available_at,
  (select batch from lease),
  coalesce(step = (select max(step) from due), false) as walk_end
from due;

-- name: ordered_index_state
-- The index claim_ordered needs (migration 0003 dropped it; MigrateOrdered
-- builds it): no row when it is missing, else whether it is valid. A
-- concurrent build that failed leaves it INVALID: no query reads it, yet
-- every write still updates it.
select i.indisvalid
from pg_index i
where i.indexrelid = to_regclass('{schema}.outbox_events_aggregate_open_idx')
  and i.indrelid = to_regclass('{schema}.outbox_events');

-- name: ordered_index_migrated
-- Whether migration 0003, which drops the index, is applied: building the
-- index before it would be undone by the next Migrate.
select exists (select 1 from {schema}.postbox_migrations where version = 3);

-- name: ordered_index_try_lock
-- MigrateOrdered runs one at a time per schema. It polls a session lock
-- rather than waiting in one: a waiting statement holds a snapshot, and a
-- concurrent index build waits for every older snapshot (a deadlock).
select pg_try_advisory_lock($1);

-- name: ordered_index_unlock
select pg_advisory_unlock($1);

-- name: ordered_index_drop
-- Drops an invalid leftover of a failed build, without blocking writes.
drop index concurrently if exists {schema}.outbox_events_aggregate_open_idx;

-- name: ordered_index_create
-- The index of 0001_outbox.sql, built without blocking writes (outside a
-- transaction, so alone in its statement).
create index concurrently if not exists outbox_events_aggregate_open_idx
  on {schema}.outbox_events (aggregate_type, aggregate_id, seq)
  where status = 'pending';

-- name: settle
-- Records a batch of outcomes in one statement. $2 delivered ids (whoever
-- holds them) are deleted, or marked done when $9 keeps them; retries ($3
-- ids, $4 times, $5 errors) and failures ($6 ids, $7 errors) apply only to
-- events relay $1 still leases. $8, the retried, failed and released ids,
-- leave relay $1's leases: each the lease of its claim in $11 (0: every
-- lease of relay $1), so that the outcome of an earlier claim of an event
-- (its lease lost, the event claimed again since) leaves the newer claim
-- alone. $10, the claims (lease batches) of relay $1 that this settle
-- ends, are deleted whole. Delivered events stay listed in the
-- leases not ended (see the top of this file). Release runs it with $8
-- alone. $12, when positive, holds the dedup keys of the delivered events
-- for that many milliseconds (outbox_held_keys, migration 0008). Counting
-- an attempt saturates below the bound of retries (0008's check), so that
-- no row can make a settle or a reclaim fail.
-- The delivered rows are found by their ids (the primary key) with the
-- status written "(status = 'pending') is true": the planner cannot then
-- use outbox_events_pending_idx, which, with statistics from before a
-- burst of pending rows (a replay's requeue, a backlog after a quiet
-- hour, until autovacuum's analyze), it would pick, reading every pending
-- entry for each settle (0.6 s a settle at 200,000 pending).
with owned as (
  -- Read only when there are retries or failures to check.
  select unnest(ids) as id from {schema}.outbox_leases
  where owner = $1 and cardinality($3::uuid[]) + cardinality($6::uuid[]) > 0
), deleted as (
  delete from {schema}.outbox_events
  where not $9::bool and id = any($2::uuid[]) and (status = 'pending') is true
  returning dedup_key
), kept as (
  update {schema}.outbox_events
  set status = 'done', processed_at = now(), last_error = null
  where $9::bool and id = any($2::uuid[]) and (status = 'pending') is true
  returning dedup_key
), held as (
  insert into {schema}.outbox_held_keys (dedup_key, expires_at)
  select k.dedup_key, now() + $12::bigint * interval '1 millisecond'
  from (select dedup_key from deleted union all select dedup_key from kept) k
  where $12::bigint > 0 and k.dedup_key is not null
  on conflict (dedup_key) do update
    set expires_at = greatest({schema}.outbox_held_keys.expires_at, excluded.expires_at)
), retried as (
  update {schema}.outbox_events e
  set available_at = r.available_at, retries = least(e.retries, 999999999) + 1, last_error = r.last_error
  from unnest($3::uuid[], $4::timestamptz[], $5::text[]) as r(id, available_at, last_error)
  where e.id = r.id and (e.status = 'pending') is true and e.id in (select id from owned)
), failed as (
  update {schema}.outbox_events e
  set status = 'failed', processed_at = now(), retries = least(e.retries, 999999999) + 1, last_error = f.last_error
  from unnest($6::uuid[], $7::text[]) as f(id, last_error)
  where e.id = f.id and (e.status = 'pending') is true and e.id in (select id from owned)
), ended as (
  delete from {schema}.outbox_leases
  where owner = $1 and batch = any($10::bigint[])
), remaining as (
  -- What each lease row of relay $1 not ended keeps (null: nothing) when
  -- $8 leaves, in one hash join of its ids with $8 (the array operators &&
  -- and <@ compare every pair); read only when $8 is not empty.
  select l.batch, count(*) as held, array_agg(x.id) filter (where s.id is null) as rest
  from {schema}.outbox_leases l
  cross join lateral unnest(l.ids) as x(id)
  left join unnest($8::uuid[], $11::bigint[]) as s(id, batch)
    on s.id = x.id and (s.batch = 0 or s.batch = l.batch)
  where l.owner = $1 and cardinality($8::uuid[]) > 0 and not l.batch = any($10::bigint[])
  group by l.batch
), emptied as (
  delete from {schema}.outbox_leases l using remaining r
  where l.batch = r.batch and r.rest is null
)
update {schema}.outbox_leases l
set ids = r.rest
from remaining r
where l.batch = r.batch and cardinality(r.rest) < r.held;

-- name: lease_lock
-- Every statement that changes the leases of relay $1 (extend_lease,
-- settle, release, reclaim_expired) first takes this lock, in the same
-- transaction: they change one relay's lease rows one at a time, never in
-- two orders at once (which deadlocks).
select pg_advisory_xact_lock(hashtextextended('postbox lease {schema} ' || $1, 0));

-- name: extend_lease
-- Renews the leases of relay $1 that hold any of the events it asks for
-- ($3), and returns their ids. A lease row is one claim; a row with none of
-- them is a claim the relay never learned of (its answer was lost: a
-- deadline, a dead connection, after the server committed it): it is left
-- to expire, so that its events go back to the queue.
update {schema}.outbox_leases
set expires_at = now() + $2::bigint * interval '1 millisecond'
where owner = $1 and ids && $3::uuid[]
returning ids;

-- name: reclaim_lock
-- Takes the lease_lock of every relay whose lease expired, in one order (of
-- the lock keys), and returns those relays: reclaim_expired, in the same
-- transaction, changes their leases only. (A lease that expires, or is
-- committed already expired, after this statement waits for the next
-- reclaim: changing it without its relay's lock could deadlock.)
select x.owner
from (
  select o.owner, hashtextextended('postbox lease {schema} ' || o.owner, 0) as k
  from (select distinct owner from {schema}.outbox_leases where expires_at < now()) o
  order by k
) x
cross join lateral (select pg_advisory_xact_lock(x.k)) locked;

-- name: reclaim_expired
-- The leases of relays that stopped without settling: each of their events
-- still pending counts a failed attempt, and fails when it has used $1.
-- Only the leases of the relays $2, whose locks reclaim_lock took. Returns,
-- for each relay, how many of its events changed.
with expired as (
  delete from {schema}.outbox_leases where expires_at < now() and owner = any($2::text[])
  returning owner, ids
), events as (
  select unnest(ids) as id, owner from expired
), changed as (
update {schema}.outbox_events e
set status = case when least(e.retries, 999999999) + 1 >= $1 then 'failed' else 'pending' end,
    processed_at = case when least(e.retries, 999999999) + 1 >= $1 then now() end,
    retries = least(e.retries, 999999999) + 1,
    available_at = now(),
    last_error = 'lease of relay ' || x.owner || ' expired before the delivery was settled'
from events x
where e.id = x.id and e.status = 'pending'
returning x.owner
)
select owner, count(*) from changed group by owner order by owner;

-- name: purge_done
delete from {schema}.outbox_events
where id in (
  select id from {schema}.outbox_events
  where status = 'done' and processed_at < $1
  order by processed_at
  limit $2);

-- name: purge_held_keys
-- Up to $1 dedup keys whose hold (migration 0008) has ended.
delete from {schema}.outbox_held_keys
where dedup_key in (
  select dedup_key from {schema}.outbox_held_keys
  where expires_at <= now()
  limit $1);

-- name: stats
-- Leased events count as processing, not pending, and the oldest pending
-- age is that of the oldest event no relay holds.
with leased as (
  select distinct unnest(ids) as id from {schema}.outbox_leases
), in_flight as (
  select count(*) as n from {schema}.outbox_events e join leased using (id) where e.status = 'pending'
)
select
  (select count(*) from {schema}.outbox_events where status = 'pending') - (select n from in_flight),
  (select n from in_flight),
  (select count(*) from {schema}.outbox_events where status = 'done'),
  (select count(*) from {schema}.outbox_events where status = 'failed'),
  (select coalesce(extract(epoch from now() - min(e.created_at)), 0)::float8
     from {schema}.outbox_events e
     where e.status = 'pending' and isfinite(e.created_at)
       and not exists (select 1 from leased l where l.id = e.id));

-- name: stats_by_type
-- Pending (not leased), processing (leased) and failed events per type; each
-- branch reads its partial index. Delivered events are not read.
with leased as (
  select distinct unnest(ids) as id from {schema}.outbox_leases
), unfinished as (
  select e.event_type, (l.id is null)::int as pending, (l.id is not null)::int as processing, 0 as failed
  from {schema}.outbox_events e left join leased l on l.id = e.id
  where e.status = 'pending'
  union all
  select event_type, 0, 0, 1 from {schema}.outbox_events where status = 'failed'
)
select event_type, sum(pending)::bigint, sum(processing)::bigint, sum(failed)::bigint
from unfinished
group by event_type
order by count(*) desc, event_type;

-- name: stats_up_to
-- Stats at a bounded cost (the metrics' gauges): each count stops at $1 (a
-- count of $1 means at least $1), reading at most $1 rows of a partial index
-- (plus the events in flight); the oldest pending age is that of the first
-- due event no relay holds, in claim order (outbox_events_pending_idx).
with leased as (
  select distinct unnest(ids) as id from {schema}.outbox_leases
), in_flight as (
  select count(*) as n from {schema}.outbox_events e join leased using (id) where e.status = 'pending'
)
select
  least((select count(*) from (
           select 1 from {schema}.outbox_events where status = 'pending'
           limit $1::bigint + (select n from in_flight)) p) - (select n from in_flight), $1::bigint),
  (select n from in_flight),
  (select count(*) from (select 1 from {schema}.outbox_events where status = 'done' limit $1::bigint) d),
  (select count(*) from (select 1 from {schema}.outbox_events where status = 'failed' limit $1::bigint) f),
  (select coalesce(extract(epoch from now() - min(o.created_at)), 0)::float8 from (
     select e.created_at from {schema}.outbox_events e
     where e.status = 'pending' and e.available_at <= now()
       and not exists (select 1 from leased l where l.id = e.id)
     order by e.available_at, e.seq
     limit 1) o
   where isfinite(o.created_at));

-- name: get
-- One event, with "processing" for a pending event in a lease.
select e.id, e.aggregate_type, e.aggregate_id, e.event_type, e.payload, coalesce(e.dedup_key, ''), e.headers,
       e.available_at, e.seq,
       case when e.status = 'pending' and l.owner is not null then 'processing' else e.status end,
       e.retries, least(e.retries, 999999999) + (l.owner is not null or e.status = 'done')::int, coalesce(e.last_error, ''), coalesce(l.owner, ''),
       l.expires_at, e.created_at, e.processed_at
from {schema}.outbox_events e
left join lateral (
  -- A lease row may still list an event that is delivered (see the top
  -- of this file): only a pending one is leased.
  select owner, expires_at from {schema}.outbox_leases where e.status = 'pending' and e.id = any(ids) limit 1
) l on true
where e.id = $1;

-- name: list
-- Events by status (as Get reports it), in sequence order.
select * from (
  select e.id, e.aggregate_type, e.aggregate_id, e.event_type, e.payload, coalesce(e.dedup_key, '') as dedup_key,
         e.headers, e.available_at, e.seq,
         case when e.status = 'pending' and l.owner is not null then 'processing' else e.status end as status,
         e.retries, least(e.retries, 999999999) + (l.owner is not null or e.status = 'done')::int as attempts, coalesce(e.last_error, '') as last_error,
         coalesce(l.owner, '') as owner, l.expires_at, e.created_at, e.processed_at
  from {schema}.outbox_events e
  left join lateral (
    select owner, expires_at from {schema}.outbox_leases where e.status = 'pending' and e.id = any(ids) limit 1
  ) l on true
  where e.status = case when $1 = 'processing' then 'pending' else $1 end
) r
where r.status = $1
order by r.seq
limit $2;

-- name: get_by_dedup_key
-- The id of the event written with dedup key $1 (outbox_events_dedup_key_uq);
-- get reads the rest.
select id from {schema}.outbox_events where dedup_key = $1;

-- name: taken_dedup_keys
-- Those of the keys $1 that an event holds, or that a delivered event's
-- hold (outbox_held_keys) still refuses.
select dedup_key from {schema}.outbox_events where dedup_key = any($1)
union
select dedup_key from {schema}.outbox_held_keys where dedup_key = any($1) and expires_at > now();

-- name: relays
-- The relays that hold leases: how many events (pending ones: a lease row
-- may still list delivered events), and when the leases end.
select l.owner,
  (select count(*) from {schema}.outbox_leases m cross join lateral unnest(m.ids) as x(id)
     join {schema}.outbox_events e on e.id = x.id and e.status = 'pending'
   where m.owner = l.owner),
  min(l.expires_at), max(l.expires_at)
from {schema}.outbox_leases l
group by l.owner
order by l.owner;

-- name: last_seq
-- The value of the seq column's sequence ($1 is the quoted, schema-qualified
-- outbox_events); zero before the first event.
select coalesce(pg_sequence_last_value(pg_get_serial_sequence($1, 'seq')), 0);

-- name: set_primary_key_walk
-- The planner settings of a page read in id order (history_read,
-- requeue_kept), for its transaction alone: no plan but the primary key's
-- ordered scan is left unpenalized, whatever the statistics say of the
-- delivered rows (see walkingPrimaryKey). The penalty of the others makes
-- every plan's cost huge, which would have each statement compiled by the
-- JIT (0.3 s, for a statement of 15 ms): jit off too.
set local enable_seqscan = off; set local enable_bitmapscan = off; set local enable_sort = off; set local jit = off;

-- name: history_read
-- A page of HistoryRead (sqlstore.ReadHistory): up to $8 delivered events
-- in id order after $6 (from the first when $7), written in [$1, $2)
-- (null: open), of aggregate type $3 and id $4 (empty: any), whose type
-- the regular expression $5 matches (the types' globs translated; null:
-- any type). Run planned with its values (unnamed), so
-- that the filters not given fold away and the scan of the primary key
-- starts at $6.
select id, seq, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       created_at, processed_at
from {schema}.outbox_events
where status = 'done'
  and ($7::bool or id > $6::uuid)
  and ($1::timestamptz is null or created_at >= $1::timestamptz)
  and ($2::timestamptz is null or created_at < $2::timestamptz)
  and ($3::text = '' or aggregate_type = $3::text)
  and ($4::text = '' or aggregate_id = $4::text)
  and ($5::text is null or event_type ~ $5::text)
order by id
limit $8;

-- name: requeue_kept
-- RequeueKept in one statement: the page history_read returns for $1..$8
-- (its very statement, which RequeueKept puts in picked's place) is
-- requeued as Requeue requeues it ($9 the replay's name, $10 its header),
-- on the server: no payload travels. The done rows go back to the queue,
-- found by id (see settle); a row a retention step deleted meanwhile (the
-- update waited for it, then found it gone) is written again from what
-- the page read, without its dedup key; a row no longer done is left
-- alone (its insert's conflict). It returns how many the page held, its
-- last id, how many were requeued and inserted.
with picked as (
{history_read}
), requeued as (
  update {schema}.outbox_events e
  set status = 'pending', available_at = now(), retries = 0, last_error = null, processed_at = null,
      headers = case when jsonb_typeof(e.headers) = 'object' then e.headers else '{}'::jsonb end
                || jsonb_build_object($10::text, $9::text)
  where e.id in (select id from picked) and (e.status = 'done') is true -- by id (see settle)
  returning e.id
), inserted as (
  insert into {schema}.outbox_events (id, aggregate_type, aggregate_id, event_type, payload, headers, created_at)
  select p.id, p.aggregate_type, p.aggregate_id, p.event_type, p.payload,
         case when jsonb_typeof(p.headers) = 'object' then p.headers else '{}'::jsonb end
           || jsonb_build_object($10::text, $9::text),
         p.created_at
  from picked p
  where not exists (select 1 from requeued r where r.id = p.id)
  order by p.id
  on conflict (id) do nothing
  returning id
), woke as (
  select pg_notify('{channel}', '') where exists (select 1 from requeued)
)
select (select count(*) from picked),
       coalesce((select id from picked order by id desc limit 1), '00000000-0000-0000-0000-000000000000'::uuid),
       (select count(*) from requeued), (select count(*) from inserted), (select count(*) from woke);

-- name: requeue_done
-- Requeue, first statement: the done rows of the events $1 go back to the
-- queue, due now, as never attempted, their headers marked with $3 (the
-- header, postbox.HeaderReplay) = $2 (the replay's name); headers that are
-- no object, which a claim would refuse, become the mark alone. Only ids
-- travel: a replay of kept rows sends no payload back. A row that a
-- retention step is deleting is waited for (its row lock) and then, gone,
-- not requeued: requeue_insert writes it again. The rows were updated,
-- not inserted: the producers' trigger did not run, so the statement
-- wakes the listening relays itself (pg_notify, sent at its commit), as
-- failed_notify does. It returns the ids requeued.
with requeued as (
  update {schema}.outbox_events e
  set status = 'pending', available_at = now(), retries = 0, last_error = null, processed_at = null,
      headers = case when jsonb_typeof(e.headers) = 'object' then e.headers else '{}'::jsonb end
                || jsonb_build_object($3::text, $2::text)
  where e.id = any($1::uuid[]) and (e.status = 'done') is true -- by id, never outbox_events_done_idx (see settle)
  returning e.id
), woke as (
  select pg_notify('{channel}', '') where exists (select 1 from requeued)
)
select id from requeued cross join (select count(*) from woke) w;

-- name: requeue_insert
-- Requeue, second statement, in the same transaction, for the events
-- requeue_done did not requeue: $1..$7 (parallel arrays: id, aggregate
-- type and id, type, payload, headers with the replay's mark, created_at
-- or null for now). An id with no row is written again, pending, without
-- its dedup key (migration 0008's trigger of held keys is not asked);
-- an id whose row is there (pending, leased, failed) is left alone: the
-- insert finds it by its conflict, not by a look beforehand, so a row a
-- retention step deleted meanwhile is written again once that delete
-- committed. It returns how many it inserted.
with input as (
  select * from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
    with ordinality as r(id, aggregate_type, aggregate_id, event_type, payload, headers, created_at, n)
), inserted as (
  insert into {schema}.outbox_events (id, aggregate_type, aggregate_id, event_type, payload, headers, created_at)
  select r.id, r.aggregate_type, r.aggregate_id, r.event_type, r.payload::jsonb, r.headers::jsonb, coalesce(r.created_at, now())
  from input r
  order by r.n
  on conflict (id) do nothing
  returning id
)
select count(*) from inserted;

-- name: expire_read
-- Retention with a Keep: up to $2 delivered events processed before $1,
-- oldest first (outbox_events_done_idx), read as history_read reads them.
select id, seq, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers,
       created_at, processed_at
from {schema}.outbox_events
where status = 'done' and processed_at < $1
order by processed_at, id
limit $2;

-- name: expire_delete
-- The events expire_read returned, once kept: those still done (a replay
-- may have requeued one since).
delete from {schema}.outbox_events
where id = any($1::uuid[]) and (status = 'done') is true; -- by id, never outbox_events_done_idx (see settle)
