-- Named queries of the WAL mode (see wal.go): the outbox's inserts read from
-- a logical replication slot, through a publication of the outbox table.
-- "{publication}" is replaced by the quoted publication name.

-- name: wal_preconditions
-- What WAL mode needs of the server and the user: wal_level = logical, and
-- the REPLICATION attribute (or a superuser).
select current_setting('wal_level'),
       coalesce((select rolreplication or rolsuper from pg_roles where rolname = current_user), false);

-- name: wal_publication_exists
select exists (select 1 from pg_publication where pubname = $1);

-- name: wal_create_publication
-- Inserts into the outbox table only: updates and deletes (the relay's own
-- settling) are not streamed. A partitioned outbox's inserts are published
-- as its own (Store.Partition): the stream reads outbox_events.
create publication {publication} for table {schema}.outbox_events with (publish = 'insert', publish_via_partition_root = true);

-- name: wal_drop_publication
drop publication if exists {publication};

-- name: wal_slot_state
-- The slot, if it exists: whether a relay streams it, and the WAL it keeps
-- the server from recycling (from what it last confirmed to the server's
-- current position), in bytes. A slot being created is active too, but
-- its walsender is still starting up (and streams nothing committed before
-- the creation ends); a user who may not read other users' walsender
-- states sees the slot's active flag alone.
select s.active and coalesce(r.state, 'streaming') <> 'startup',
       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), coalesce(s.confirmed_flush_lsn, s.restart_lsn)), 0)::bigint
from pg_replication_slots s
left join pg_stat_replication r on r.pid = s.active_pid
where s.slot_name = $1 and s.database = current_database();

-- name: wal_lag
-- How many bytes of the server's flushed WAL the slot's walsender has not
-- decoded yet; no row while no relay streams the slot, or when the user may
-- not read the walsender's state.
select pg_wal_lsn_diff(pg_current_wal_flush_lsn(), r.sent_lsn)::bigint
from pg_replication_slots s
join pg_stat_replication r on r.pid = s.active_pid
where s.slot_name = $1 and s.database = current_database() and r.sent_lsn is not null;

-- name: wal_slot_database
-- The database that has the slot $1, and whether it is the current one:
-- slot names are the server's.
select database, database = current_database() from pg_replication_slots where slot_name = $1;

-- name: wal_drop_slot
-- The slot $1 of this database only: a slot of that name in another
-- database is another deployment's.
select pg_drop_replication_slot(slot_name) from pg_replication_slots
where slot_name = $1 and database = current_database();

-- name: wal_drop_idle_slot
-- The slot $1 of this database, when no relay streams it.
select pg_drop_replication_slot(slot_name) from pg_replication_slots
where slot_name = $1 and database = current_database() and not active;

-- name: wal_visible
-- Whether the transactions $1 (32-bit ids, as the stream gives them) are
-- all visible to a new snapshot. A commit reaches the log a moment before
-- its rows become visible to other transactions: a stream claim that found
-- nothing (claim_ids) asks this, to tell transactions not visible yet from
-- events taken already. Each id is taken in the epoch of the snapshot's
-- xmax, or the one before when it is above xmax's low 32 bits (the
-- transactions are recent).
with snap as (
  select pg_current_snapshot() as s, pg_snapshot_xmax(pg_current_snapshot())::text::bigint as xmax
)
select coalesce(bool_and(pg_visible_in_snapshot(
  ((((xmax >> 32) - (xid > (xmax & 4294967295))::int) << 32) | xid)::text::xid8, s)), true)
from snap, unnest($1::bigint[]) as xid;

-- name: claim_ids
-- Like claim, but only the events among $4 that are due and not leased: the
-- events the stream brought, claimed under the same leases as the polling
-- claim, so that no event is delivered by both at once. It claims nothing
-- until the transactions $5 that wrote them (as in wal_visible) are all
-- visible to its snapshot: the events of an earlier transaction are never
-- left out while those of a later one are claimed. So when it returns rows,
-- those are all it will ever claim of $4; when it returns none, wal_visible
-- tells whether to try again. Each id is looked up by the primary key
-- (the lateral subquery, which the planner keeps as it is): on a table
-- without statistics (never analyzed: autovacuum off, or a fresh table) the
-- planner otherwise scanned the whole pending index, the entries of the
-- events deleted since the last vacuum included. EXPLAIN ANALYZE, a claim of
-- 3 ids after 20,000 deliveries: 1.1-1.5 ms, now 0.3-0.7 ms (custom plans,
-- which the server makes for a prepared statement's first five runs on a
-- connection, and after them unless a generic plan looks as cheap); 0.35
-- ms, now 0.07 ms with a generic plan. A claim of 2,000 among 200,000
-- pending, 8,000 of them leased: 8.4 ms, now 6.6 ms (generic plan). The leased ids stay out with "not in": "not
-- exists" is faster in a custom plan, but its generic plan is a nested loop
-- anti join (0.9 s for that claim of 2,000).
-- A row that no event can be read from (a plain-SQL producer's: a time of
-- ±infinity, retries negative or at the integer limit, where the attempt
-- would overflow) is claimed like the others, with the zero value of each
-- such column (Go's zero time, attempt 0) and, in the last column, what
-- is wrong with it (store.Delivery.Invalid): the relay fails it alone.
with snap as (
  select pg_current_snapshot() as s, pg_snapshot_xmax(pg_current_snapshot())::text::bigint as xmax
), visible as (
  select coalesce(bool_and(pg_visible_in_snapshot(
    ((((xmax >> 32) - (xid > (xmax & 4294967295))::int) << 32) | xid)::text::xid8, s)), true) as ok
  from snap, unnest($5::bigint[]) as xid
), leased as (
  select unnest(ids) as id from {schema}.outbox_leases
), due as (
  select e.id, e.seq, e.aggregate_type, e.aggregate_id, e.event_type, e.payload, e.headers, e.retries, e.created_at, e.available_at
  from unnest($4::uuid[]) as x(id)
  cross join lateral (select * from {schema}.outbox_events e where e.id = x.id limit 1) e
  where (select ok from visible)
    and e.status = 'pending' and e.available_at <= now()
    and e.id not in (select id from leased)
  limit $2
), lease as (
  insert into {schema}.outbox_leases (owner, ids, expires_at)
  select $1, array_agg(id), now() + $3::bigint * interval '1 millisecond' from due
  having count(*) > 0
  returning batch
)
select id, seq, aggregate_type, aggregate_id, event_type, payload, headers,
  case when retries >= 0 and retries < 2147483647 then retries + 1 else 0 end,
  case when isfinite(created_at) then created_at else '0001-01-01 00:00:00+00' end,
  case when isfinite(available_at) then available_at else '0001-01-01 00:00:00+00' end,
  (select batch from lease),
  concat_ws('; ',
    case when not isfinite(created_at) then 'created_at: ' || created_at || ' is not a time' end,
    case when not isfinite(available_at) then 'available_at: ' || available_at || ' is not a time' end,
    case when retries < 0 then 'retries: ' || retries || ' is negative'
         when retries = 2147483647 then 'retries: ' || retries || ' is out of range' end)
from due;

-- name: producer_notify_off
-- WAL mode: producers need no notification; their commits skip the trigger.
alter table {schema}.outbox_events disable trigger outbox_events_notify;

-- name: producer_notify_on
alter table {schema}.outbox_events enable trigger outbox_events_notify;
