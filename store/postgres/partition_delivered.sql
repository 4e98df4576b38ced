-- Named queries of the partitioned delivered-side tables
-- (partition_delivered.go): endpoint_attempts partitioned by range of its
-- time (at), inbox_events by range of id and endpoint_deliveries by range
-- of event_id (UUIDv7 ids carry their time), each with a DEFAULT partition, at the outbox's interval
-- (outbox_partitioning). "{table}" is replaced by the table's quoted name,
-- "{partition}" by a partition's.

-- name: delivered_kind
-- The relkind of table $1 (a qualified, quoted name): 'p' partitioned, 'r'
-- plain, '' missing.
select coalesce((select relkind::text from pg_class where oid = to_regclass($1)), '');

-- name: delivered_lock
-- The conversion's switch: no reader or writer of the plain table meanwhile
-- (waiting partition_lock_timeout at most).
lock table {schema}.{table} in access exclusive mode;

-- name: delivered_index_defs
-- The plain table's indexes but its primary key (the partitioned table has
-- its own, with the partition key): name, CREATE INDEX statement, unique,
-- valid. The conversion renames them and creates them on the partitioned
-- table.
select c.relname::text, pg_get_indexdef(i.indexrelid), i.indisunique, i.indisvalid
from pg_index i
join pg_class c on c.oid = i.indexrelid
where i.indrelid = to_regclass('{schema}.{table}') and not i.indisprimary
order by c.relname;

-- name: delivered_pkey
-- The name of the plain table's primary key index (renamed with the table).
select c.relname::text
from pg_index i
join pg_class c on c.oid = i.indexrelid
where i.indrelid = to_regclass('{schema}.{table}') and i.indisprimary;

-- name: delivered_options
-- The plain table's storage options, copied to every partition.
select coalesce(array_to_string(reloptions, ', '), '')
from pg_class where oid = to_regclass('{schema}.{table}');

-- name: delivered_default_options
-- The storage options of the DEFAULT partition $1 (copied from the plain
-- table at the conversion), given to each partition created ahead.
select coalesce(array_to_string(reloptions, ', '), '')
from pg_class where oid = to_regclass($1);

-- name: delivered_rename
-- Frees the table's name for the partitioned one: the plain table becomes
-- {table}_unpartitioned until its rows are moved.
alter table {schema}.{table} rename to {partition};

-- name: attempts_seq
-- The identity sequence of the plain attempts log and its last value (null
-- when none was drawn): the partitioned log's continues it.
select pg_get_serial_sequence('{schema}.endpoint_attempts', 'id'),
       pg_sequence_last_value(pg_get_serial_sequence('{schema}.endpoint_attempts', 'id')::regclass);

-- name: attempts_seq_sync
-- The partitioned attempts log's identity continues the plain one's.
select setval(pg_get_serial_sequence('{schema}.endpoint_attempts', 'id'), $1::bigint);

-- name: attempts_oldest
-- The oldest attempt of the plain log, found per endpoint through
-- endpoint_attempts_endpoint_at_idx (endpoint_id, at), never by a scan of
-- the log: the conversion creates partitions for the past from it. Every
-- attempt has its endpoint (a foreign key that cascades).
select min(o.at)
from {schema}.endpoints e
cross join lateral (
  select a.at from {schema}.endpoint_attempts_unpartitioned a
  where a.endpoint_id = e.id order by a.at limit 1
) o;

-- name: attempts_create_parent
-- The partitioned attempts log: the plain log's columns in their order,
-- with their defaults, checks and identity; the primary key holds the
-- partition key (at), and the foreign key to endpoints is the plain log's.
create table {schema}.endpoint_attempts (
  like {schema}.endpoint_attempts_unpartitioned
    including defaults including constraints including identity including storage including comments,
  primary key (id, at),
  foreign key (endpoint_id) references {schema}.endpoints (id) on delete cascade
) partition by range (at);

-- name: attempts_move
-- After the switch, $1 attempts of the plain log moved to the partitioned
-- one (each to the partition of its time), the newest first: the console's
-- latest attempts are the first found again.
with moved as (
  delete from {schema}.endpoint_attempts_unpartitioned
  where id in (select id from {schema}.endpoint_attempts_unpartitioned order by id desc limit $1)
  returning *
)
insert into {schema}.endpoint_attempts overriding system value select * from moved;

-- name: attempts_finish
-- The attempts log's conversion ends: the emptied plain log goes.
drop table {schema}.endpoint_attempts_unpartitioned;

-- name: inbox_oldest
-- The smallest time-ordered (version 7) id of the plain inbox: the
-- conversion creates partitions for the past from its time.
select id from {schema}.inbox_events_unpartitioned
where substring(id::text, 15, 1) = '7'
order by id limit 1;

-- name: inbox_create_parent
-- The partitioned inbox: the plain inbox's columns in their order, with
-- their defaults and checks; its primary key, id, is the partition key, so
-- inbox_take's ON CONFLICT (id) absorbs a duplicate as on the plain table.
create table {schema}.inbox_events (
  like {schema}.inbox_events_unpartitioned
    including defaults including constraints including storage including comments,
  primary key (id)
) partition by range (id);

-- name: inbox_move_unfinished
-- The switch moves the rows not done (pending, leased, failed): their
-- claims, completions and failures find them in the partitioned inbox.
with moved as (
  delete from {schema}.inbox_events_unpartitioned where handler_status <> 'done' returning *
)
insert into {schema}.inbox_events select * from moved;

-- name: inbox_move_guard
-- While the done rows are moved (after the switch), an insert into the
-- partitioned inbox of an id whose row the plain inbox still holds moves
-- that row instead, and is skipped: the row is done (the switch moved the
-- others), so that inbox_take takes nothing and finds it done
-- (inbox_status), a duplicate absorbed as its ON CONFLICT ... WHERE not
-- done absorbs it (which cannot see a row written by the trigger of its
-- own statement). The moves themselves (postbox.moving, partition_moving)
-- skip it.
create or replace function {schema}.postbox_inbox_unpartitioned() returns trigger
language plpgsql as $$
declare
  moved bigint;
begin
  if current_setting('postbox.moving', true) is distinct from 'on' then
    with gone as (
      delete from {schema}.inbox_events_unpartitioned where id = new.id returning *
    ), written as (
      insert into {schema}.inbox_events select * from gone returning 1
    )
    select count(*) into moved from written;
    if moved > 0 then
      return null;
    end if;
  end if;
  return new;
end
$$;
create trigger inbox_events_unpartitioned
  before insert on {schema}.inbox_events
  for each row execute function {schema}.postbox_inbox_unpartitioned();

-- name: inbox_move
-- After the switch, $1 done rows of the plain inbox moved to the
-- partitioned one (to the partition of their id), the newest first. A row
-- an insert moved meanwhile (inbox_move_guard) is gone from the plain
-- inbox already.
with moved as (
  delete from {schema}.inbox_events_unpartitioned
  where id in (select id from {schema}.inbox_events_unpartitioned order by id desc limit $1)
  returning *
)
insert into {schema}.inbox_events select * from moved on conflict (id) do nothing;

-- name: inbox_finish
-- The inbox's conversion ends: the guard and the emptied plain inbox go.
-- The inbox is locked first, then its partitions (the DROP TRIGGER alone
-- would lock a partition before waiting for the inbox, while a consumer's
-- transaction holding the inbox waits for that partition: a deadlock).
lock table {schema}.inbox_events in access exclusive mode;
drop trigger inbox_events_unpartitioned on {schema}.inbox_events;
drop function {schema}.postbox_inbox_unpartitioned();
drop table {schema}.inbox_events_unpartitioned;

-- name: delivered_unpartitioned_exists
-- Whether a conversion's plain table is left, its rows still to move.
select to_regclass('{schema}.{partition}') is not null;

-- name: delivered_create_default
-- The DEFAULT partition: rows outside every range (an attempt of a time
-- before the first partition or after the last; an inbox id that is not a
-- UUIDv7, or of a range dropped) are kept, and removed by DELETE.
create table {schema}.{partition} partition of {schema}.{table} default;

-- name: attempts_ranges
-- The range partitions of the attempts log: name and bounds (the bound
-- text, shown in the session's time zone, read back in it).
select c.relname::text, b[1]::timestamptz, b[2]::timestamptz
from pg_inherits i
join pg_class c on c.oid = i.inhrelid
cross join lateral regexp_match(pg_get_expr(c.relpartbound, c.oid),
  '^FOR VALUES FROM \(''([^'']+)''\) TO \(''([^'']+)''\)$') b
where i.inhparent = to_regclass('{schema}.endpoint_attempts') and b is not null;

-- name: delivered_retention_lock
-- One drop of the table's partitions at a time (every endpoint's lane
-- runs the attempts' retention): false, and the drop is left to the one
-- running.
select pg_try_advisory_xact_lock($1);

-- name: delivered_attached
-- Whether partition $2 is still a partition of table $1 (another process
-- may have dropped it since it was listed).
select exists (select 1 from pg_inherits where inhparent = to_regclass($1) and inhrelid = to_regclass($2));

-- name: delivered_sample_count
-- The rows of a detached partition in a random $1 percent of its pages
-- (100: all of them, exactly), and how many pages holding rows the sample
-- read (as partition_sample_done: the count is scaled by the pages read).
select count(*), count(distinct (ctid::text::point)[0])
from {schema}.{partition} tablesample system ($1::float8);

-- name: delivered_detach
-- Detaches a partition whose range ended (waiting partition_lock_timeout
-- at most for its lock on the table).
alter table {schema}.{table} detach partition {schema}.{partition};

-- name: inbox_move_back
-- Before a detached inbox partition is dropped, its rows that retention
-- keeps go back to the inbox (to the DEFAULT partition, their range being
-- gone), ids kept: the rows not done (pending, leased, failed), found by
-- inbox_events_open_idx, and the done rows processed at or after $1 (the
-- retention's Before) or at no time (plain SQL's: a plain table's
-- retention never deletes them), found by inbox_events_done_idx: a
-- duplicate of them is still absorbed. Neither reads the partition's rows
-- that go.
with open as (
  delete from {schema}.{partition} where handler_status <> 'done' returning *
), recent as (
  delete from {schema}.{partition}
  where handler_status = 'done' and (processed_at >= $1 or processed_at is null)
  returning *
)
insert into {schema}.inbox_events select * from open union all select * from recent;

-- name: inbox_delete_processed_partitioned
-- inbox_delete_processed on a partitioned inbox: up to $3 done rows of the
-- DEFAULT partition processed before $1, and of the range partitions
-- processed before $2 (an interval before $1: rows whose partition is not
-- dropped yet only when their ids are older than their processing), oldest
-- first.
delete from {schema}.inbox_events
where id in (
  (select id from {schema}.inbox_events_default
   where handler_status = 'done' and processed_at < $1
   order by processed_at limit $3)
  union
  (select id from {schema}.inbox_events
   where handler_status = 'done' and processed_at < $2
   order by processed_at limit $3)
  limit $3);

-- name: delivered_id_ranges
-- The range partitions of a table partitioned by range of a UUIDv7 id
-- (inbox_events by id, endpoint_deliveries by event_id): name and bounds.
select c.relname::text, b[1]::uuid, b[2]::uuid
from pg_inherits i
join pg_class c on c.oid = i.inhrelid
cross join lateral regexp_match(pg_get_expr(c.relpartbound, c.oid),
  '^FOR VALUES FROM \(''([^'']+)''\) TO \(''([^'']+)''\)$') b
where i.inhparent = to_regclass('{schema}.{table}') and b is not null;

-- name: deliveries_seq
-- The identity sequence of the plain deliveries (seq) and its last value
-- (null when none was drawn): the partitioned table's continues it, so
-- that every delivery keeps its seq and the lanes their order.
select pg_get_serial_sequence('{schema}.endpoint_deliveries', 'seq'),
       pg_sequence_last_value(pg_get_serial_sequence('{schema}.endpoint_deliveries', 'seq')::regclass);

-- name: deliveries_seq_sync
-- The partitioned deliveries' identity continues the plain one's.
select setval(pg_get_serial_sequence('{schema}.endpoint_deliveries', 'seq'), $1::bigint);

-- name: deliveries_oldest
-- The smallest time-ordered (version 7) event id of the plain deliveries,
-- found through their primary key (event_id, endpoint_id): the conversion
-- creates partitions for the past from its time.
select event_id from {schema}.endpoint_deliveries_unpartitioned
where substring(event_id::text, 15, 1) = '7'
order by event_id limit 1;

-- name: deliveries_create_parent
-- The partitioned deliveries: the plain table's columns in their order,
-- with their defaults, checks and identity (seq); the primary key (event_id,
-- endpoint_id) holds the partition key, so that the inserts' ON CONFLICT
-- (event_id, endpoint_id) absorbs a duplicate as on the plain table; the
-- foreign key to endpoints is the plain table's.
create table {schema}.endpoint_deliveries (
  like {schema}.endpoint_deliveries_unpartitioned
    including defaults including constraints including identity including storage including comments,
  primary key (event_id, endpoint_id),
  foreign key (endpoint_id) references {schema}.endpoints (id) on delete cascade
) partition by range (event_id);

-- name: deliveries_indexes
-- The indexes of the partitioned deliveries besides the plain table's
-- (whose partial indexes begin with endpoint_id): those with which a
-- dropped partition's rows that retention keeps are found
-- (deliveries_move_back) without reading the others: processing rows
-- (none since migration 0012 but those written by hand), and finished ones
-- by processed_at.
create index endpoint_deliveries_processing_idx
  on {schema}.endpoint_deliveries (seq) where status = 'processing';
create index endpoint_deliveries_finished_at_idx
  on {schema}.endpoint_deliveries (processed_at) where status in ('done', 'dropped');

-- name: deliveries_move_unfinished
-- The switch moves the deliveries not finished (pending, processing,
-- failed), seq and every column kept: the lanes' claims, settles and
-- reclaims, and the dead letters, find them in the partitioned table, in
-- their order, and the leases (endpoint_leases, by event id) still match.
-- They are found through partial indexes, never by a scan of the finished
-- ones: the pending by endpoint_deliveries_pending_idx, the failed by
-- endpoint_deliveries_failed_seq_idx, the processing (none since
-- migration 0012 but those written by hand) per endpoint by
-- endpoint_deliveries_endpoint_idx (endpoint_id, status, seq; "offset 0"
-- keeps the lateral subquery a probe per endpoint: flattened, it becomes
-- a hash join that reads the whole table).
with moved as (
  delete from {schema}.endpoint_deliveries_unpartitioned
  where ctid = any(
    array(select ctid from {schema}.endpoint_deliveries_unpartitioned where status = 'pending')
    || array(select ctid from {schema}.endpoint_deliveries_unpartitioned where status = 'failed')
    || array(select p.ctid from {schema}.endpoints e
             cross join lateral (
               select u.ctid from {schema}.endpoint_deliveries_unpartitioned u
               where u.endpoint_id = e.id and u.status = 'processing'
               offset 0) p))
  returning *
)
insert into {schema}.endpoint_deliveries overriding system value select * from moved;

-- name: deliveries_move_guard
-- While the finished deliveries are moved (after the switch), an insert
-- into the partitioned deliveries (delivery_insert, delivery_insert_tried,
-- endpoint_requeue) of an (event, endpoint) whose row the plain table
-- still holds moves that row instead, and is skipped: the row is finished
-- (the switch moved the others), and the insert's ON CONFLICT DO NOTHING
-- would have kept it (it cannot see a row written by the trigger of its
-- own statement): no second delivery. The moves themselves
-- (postbox.moving, partition_moving) skip it.
create or replace function {schema}.postbox_deliveries_unpartitioned() returns trigger
language plpgsql as $$
declare
  moved bigint;
begin
  if current_setting('postbox.moving', true) is distinct from 'on' then
    with gone as (
      delete from {schema}.endpoint_deliveries_unpartitioned
      where event_id = new.event_id and endpoint_id = new.endpoint_id
      returning *
    ), written as (
      insert into {schema}.endpoint_deliveries overriding system value select * from gone returning 1
    )
    select count(*) into moved from written;
    if moved > 0 then
      return null;
    end if;
  end if;
  return new;
end
$$;
create trigger endpoint_deliveries_unpartitioned
  before insert on {schema}.endpoint_deliveries
  for each row execute function {schema}.postbox_deliveries_unpartitioned();

-- name: deliveries_move
-- After the switch, $1 finished deliveries of the plain table moved to the
-- partitioned one (to the partition of their event id), seq kept, the
-- newest events first (primary key order, backwards). Rows an insert's
-- guard is moving (deliveries_move_guard) are skipped, not waited for: a
-- fan-out's insert moves rows one by one while holding those it wrote. A
-- row a guard moved meanwhile is gone from the plain table already.
with picked as (
  select ctid from {schema}.endpoint_deliveries_unpartitioned
  order by event_id desc
  limit $1
  for update skip locked
), moved as (
  delete from {schema}.endpoint_deliveries_unpartitioned
  where ctid = any(array(select ctid from picked))
  returning *
)
insert into {schema}.endpoint_deliveries overriding system value select * from moved
on conflict (event_id, endpoint_id) do nothing;

-- name: deliveries_left
-- Whether the plain deliveries still hold rows (some a guard was moving
-- when deliveries_move skipped them).
select exists (select 1 from {schema}.endpoint_deliveries_unpartitioned);

-- name: deliveries_finish
-- The deliveries' conversion ends: the guard and the emptied plain table
-- go. The table is locked first, then its partitions (as inbox_finish).
lock table {schema}.endpoint_deliveries in access exclusive mode;
drop trigger endpoint_deliveries_unpartitioned on {schema}.endpoint_deliveries;
drop function {schema}.postbox_deliveries_unpartitioned();
drop table {schema}.endpoint_deliveries_unpartitioned;

-- name: deliveries_move_back
-- Before a detached partition of the deliveries is dropped, its rows that
-- retention keeps go back to the table (to the DEFAULT partition, their
-- range being gone), seq and every column kept, so that ordered lanes
-- keep their order and the leases still match: those not finished
-- (pending, processing, failed), and the finished ones (done, dropped)
-- processed at or after $1 (the lanes' Before) or at no time. Each is
-- found through a partial index (pending, failed, processing, finished by
-- processed_at): none reads the rows that go.
with pending as (
  delete from {schema}.{partition} where status = 'pending' returning *
), failed as (
  delete from {schema}.{partition} where status = 'failed' returning *
), processing as (
  delete from {schema}.{partition} where status = 'processing' returning *
), recent as (
  delete from {schema}.{partition}
  where status in ('done', 'dropped') and (processed_at >= $1 or processed_at is null)
  returning *
)
insert into {schema}.endpoint_deliveries overriding system value
select * from pending union all select * from failed
union all select * from processing union all select * from recent;

-- name: lane_purge_deliveries
-- The deliveries' half of lane_purge_done, when the two tables differ in
-- kind (one partitioned, Partition): up to $3 of the endpoint's finished
-- deliveries processed before $2.
delete from {schema}.endpoint_deliveries
where endpoint_id = $1 and event_id in (
  select event_id from {schema}.endpoint_deliveries
  where endpoint_id = $1 and status in ('done', 'dropped') and processed_at < $2
  limit $3);

-- name: lane_purge_deliveries_partitioned
-- lane_purge_deliveries on partitioned deliveries: in the DEFAULT
-- partition alone (the range partitions are dropped whole: dropEnded),
-- through its endpoint_deliveries_finished_endpoint_idx.
delete from {schema}.endpoint_deliveries_default
where endpoint_id = $1 and event_id in (
  select event_id from {schema}.endpoint_deliveries_default
  where endpoint_id = $1 and status in ('done', 'dropped') and processed_at < $2
  limit $3);

-- name: lane_purge_attempts
-- The attempts' half of lane_purge_done: up to $3 of the endpoint's
-- attempts made before $2, by id from an array (see lane_purge_done).
delete from {schema}.endpoint_attempts
where id = any(array(
  select id from {schema}.endpoint_attempts
  where endpoint_id = $1 and at < $2
  limit $3));

-- name: lane_purge_attempts_partitioned
-- lane_purge_attempts on a partitioned attempts log: in the DEFAULT
-- partition alone (the range partitions are dropped whole).
delete from {schema}.endpoint_attempts_default
where id = any(array(
  select id from {schema}.endpoint_attempts_default
  where endpoint_id = $1 and at < $2
  limit $3));
