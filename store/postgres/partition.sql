-- Named queries of the partitioned outbox (partition.go): outbox_events
-- partitioned by range of id (UUIDv7 ids are time-ordered, so a range of
-- ids is a range of creation time), a DEFAULT partition for the ids outside
-- every range, and the dedup keys kept unique across partitions in a plain
-- table. "{partition}" is replaced by a partition's quoted name.

-- name: partition_kind
-- 'p' when outbox_events is partitioned, 'r' when it is a plain table, ''
-- when it is missing.
select coalesce((select relkind::text from pg_class where oid = to_regclass('{schema}.outbox_events')), '');

-- name: partition_interval
-- The interval of the partitions (Store.Partition stores it: relays need no
-- flag).
select interval_ms from {schema}.outbox_partitioning;

-- name: partition_set_interval
insert into {schema}.outbox_partitioning (single, interval_ms) values (true, $1)
on conflict (single) do update set interval_ms = excluded.interval_ms;

-- name: partition_list
-- The partitions: name and bound ("FOR VALUES FROM ('…') TO ('…')", or
-- "DEFAULT").
select c.relname::text, pg_get_expr(c.relpartbound, c.oid)
from pg_inherits i
join pg_class c on c.oid = i.inhrelid
where i.inhparent = to_regclass('{schema}.outbox_events');

-- name: partition_options
-- The storage options of the DEFAULT partition (the plain table's
-- autovacuum settings, copied at the conversion): every partition gets
-- them.
select coalesce(array_to_string(reloptions, ', '), '')
from pg_class where oid = to_regclass('{schema}.outbox_events_default');

-- name: partition_lock_timeout
-- How long a step waits for a lock on outbox_events, in its transaction:
-- producers queue behind a waiting ALTER, so never long.
select set_config('lock_timeout', $1, true);

-- name: partition_migrate_lock
select pg_advisory_xact_lock($1);

-- name: partition_lock_outbox
lock table {schema}.outbox_events in access exclusive mode;

-- name: partition_table_options
select coalesce(array_to_string(reloptions, ', '), '')
from pg_class where oid = to_regclass('{schema}.outbox_events');

-- name: partition_index_defs
-- The plain table's indexes (copied to the partitioned one, but for the
-- primary key and the unique index of dedup keys).
select c.relname::text, pg_get_indexdef(i.indexrelid), i.indisunique, i.indisprimary, i.indisvalid
from pg_index i
join pg_class c on c.oid = i.indexrelid
where i.indrelid = to_regclass('{schema}.outbox_events')
order by c.relname;

-- name: partition_trigger_defs
-- The plain table's triggers, and whether each is enabled ('D': disabled,
-- as WAL mode leaves the notify trigger).
select tgname::text, pg_get_triggerdef(oid), tgenabled::text
from pg_trigger
where tgrelid = to_regclass('{schema}.outbox_events') and not tgisinternal
order by tgname;

-- name: partition_publications
-- The publications that list the outbox (WAL mode's): they must list the
-- partitioned table, publishing its inserts as the root's.
select p.pubname::text
from pg_publication p
join pg_publication_rel r on r.prpubid = p.oid
where r.prrelid = to_regclass('{schema}.outbox_events');

-- name: partition_seq_name
select pg_get_serial_sequence('{schema}.outbox_events', 'seq');

-- name: partition_create_parent
-- The partitioned outbox: the plain table's columns in their order, with
-- their defaults, checks and identity; the primary key on id, which is the
-- partition key.
create table {schema}.outbox_events (
  like {schema}.outbox_events_unpartitioned
    including defaults including constraints including identity including storage including comments,
  primary key (id)
) partition by range (id);

-- name: partition_dedup
-- Dedup keys unique across partitions. A partitioned table cannot have a
-- unique index that leaves out its partition key, so the keys of the
-- events are kept in a plain table, outbox_dedup_keys, by triggers: an
-- insert with a key adds it, and a key another event holds raises the
-- unique index's error of the plain table (outbox_events_dedup_key_uq,
-- SQLSTATE 23505), for postbox's producers and plain SQL alike; deleting
-- the event removes its key (a dropped partition's keys are removed by the
-- drop). Only events with a key run the triggers (WHEN): the claims' and
-- settles' hot path is unchanged for the others.
create table if not exists {schema}.outbox_dedup_keys (
  dedup_key text primary key,
  id        uuid not null
);

-- Enqueue's insert takes the key before the row is written
-- (postbox_take_dedup_key in its WHERE), as the plain table's
-- ON CONFLICT DO NOTHING does: false, and the event is skipped, when
-- another event holds the key (it waits for an insert in progress) or a
-- delivered event's hold refuses it (outbox_held_keys).
create or replace function {schema}.postbox_take_dedup_key(key text, event uuid) returns boolean
language plpgsql volatile as $$
begin
  perform 1 from {schema}.outbox_held_keys where dedup_key = key and expires_at > now();
  if found then
    return false;
  end if;
  insert into {schema}.outbox_dedup_keys (dedup_key, id) values (key, event)
  on conflict (dedup_key) do nothing;
  if found then
    return true;
  end if;
  perform 1 from {schema}.outbox_dedup_keys where dedup_key = key and id = event;
  return found;
end
$$;

create or replace function {schema}.postbox_dedup_key() returns trigger
language plpgsql as $$
begin
  if tg_op in ('DELETE', 'UPDATE') and old.dedup_key is not null then
    delete from {schema}.outbox_dedup_keys where dedup_key = old.dedup_key and id = old.id;
  end if;
  if tg_op in ('INSERT', 'UPDATE') and new.dedup_key is not null then
    if tg_op = 'INSERT' then
      -- Taken already by Enqueue's insert (postbox_take_dedup_key), or
      -- an event moved with its key (a conversion, a dropped partition).
      perform 1 from {schema}.outbox_dedup_keys where dedup_key = new.dedup_key and id = new.id;
      if found then
        return null;
      end if;
    end if;
    insert into {schema}.outbox_dedup_keys (dedup_key, id) values (new.dedup_key, new.id)
    on conflict (dedup_key) do nothing;
    if not found then
      raise unique_violation using
        message = 'duplicate key value violates unique constraint "outbox_events_dedup_key_uq"',
        detail = format('Key (dedup_key)=(%s) already exists.', new.dedup_key),
        constraint = 'outbox_events_dedup_key_uq',
        table = 'outbox_events';
    end if;
  end if;
  return null;
end
$$;

-- Named to run before outbox_events_held_key (triggers of one event run in
-- name order): as the plain table's unique index, it has waited for a
-- settle deleting the row that held the key when the held check runs.
create trigger outbox_events_dedup_key
  after insert on {schema}.outbox_events
  for each row when (new.dedup_key is not null)
  execute function {schema}.postbox_dedup_key();
create trigger outbox_events_dedup_key_gone
  after delete on {schema}.outbox_events
  for each row when (old.dedup_key is not null)
  execute function {schema}.postbox_dedup_key();
create trigger outbox_events_dedup_key_changed
  after update of dedup_key on {schema}.outbox_events
  for each row when (old.dedup_key is distinct from new.dedup_key)
  execute function {schema}.postbox_dedup_key();

-- Finding an event by its key (GetByDedupKey, Transact's taken keys).
create index outbox_events_dedup_key_idx
  on {schema}.outbox_events (dedup_key) where dedup_key is not null;

-- The rows of status 'processing' (the article's, which only plain SQL
-- writes), so that a partition's drop finds every unfinished row through
-- a partial index (partition_move_back), never by reading its delivered
-- ones. Empty in the normal case: no cost to a claim or a settle.
create index outbox_events_processing_idx
  on {schema}.outbox_events (id) where status = 'processing';

create table if not exists {schema}.outbox_partitioning (
  single      boolean primary key default true check (single),
  interval_ms bigint not null check (interval_ms >= 1000)
);

-- name: partition_refuse_held_key
-- Migration 0008's held-key check, which the conversion copies to the
-- partitioned table, skipped by the moves of rows already in the outbox
-- (the conversion's, a dropped partition's: postbox.moving, set for their
-- transaction alone by partition_moving): a delivered or requeued event
-- whose key is held is moved, not inserted anew.
create or replace function {schema}.postbox_refuse_held_key() returns trigger
language plpgsql as $$
declare
  held_until timestamptz;
begin
  if current_setting('postbox.moving', true) = 'on' then
    return null;
  end if;
  select expires_at into held_until from {schema}.outbox_held_keys
  where dedup_key = new.dedup_key and expires_at > now();
  if found then
    raise unique_violation using
      message = 'duplicate key value violates unique constraint "outbox_events_dedup_key_uq"',
      detail = format('Key (dedup_key)=(%s) was delivered; it is held until %s.', new.dedup_key, held_until),
      constraint = 'outbox_events_dedup_key_uq',
      table = 'outbox_events';
  end if;
  return null;
end
$$;

-- name: partition_moving
-- Marks the transaction's inserts as moves (partition_refuse_held_key).
select set_config('postbox.moving', 'on', true);

-- name: partition_fill_keys
-- Every key of the plain table, delivered events' too (a kept delivered
-- event holds its key, as on the plain table).
insert into {schema}.outbox_dedup_keys (dedup_key, id)
select dedup_key, id from {schema}.outbox_events_unpartitioned where dedup_key is not null;

-- name: partition_seq_sync
-- The partitioned table's sequence continues the plain table's.
select setval(pg_get_serial_sequence('{schema}.outbox_events', 'seq'), $1::bigint);

-- name: partition_move_unfinished
-- The switch moves the unfinished events (pending, leased, failed) with
-- their seq: ordered claims keep each aggregate's order.
with moved as (
  delete from {schema}.outbox_events_unpartitioned where status <> 'done' returning *
)
insert into {schema}.outbox_events overriding system value select * from moved;

-- name: partition_move_done
-- After the switch, the delivered events kept, $1 at a time, in id order:
-- how many were deleted from the plain table, how many inserted. An event
-- requeued meanwhile (written again in the partitioned table, without its
-- key) is not written twice, and the key entry of the old row
-- (partition_fill_keys) goes with it, unless the row in the outbox holds
-- that key: the key is free again, as it would have been had the move come
-- first.
with batch as (
  select id from {schema}.outbox_events_unpartitioned order by id limit $1
), moved as (
  delete from {schema}.outbox_events_unpartitioned o using batch b where o.id = b.id returning o.*
), inserted as (
  insert into {schema}.outbox_events overriding system value select * from moved
  on conflict (id) do nothing
  returning id
), unkeyed as (
  delete from {schema}.outbox_dedup_keys k
  using moved m
  where m.dedup_key is not null and k.dedup_key = m.dedup_key and k.id = m.id
    and not exists (select 1 from inserted i where i.id = m.id)
    and not exists (select 1 from {schema}.outbox_events e where e.id = m.id and e.dedup_key = m.dedup_key)
)
select (select count(*) from moved), (select count(*) from inserted);

-- name: partition_unpartitioned_exists
select to_regclass('{schema}.outbox_events_unpartitioned') is not null;

-- name: partition_drop_unpartitioned
drop table {schema}.outbox_events_unpartitioned;

-- name: partition_min_v7
-- The smallest time-ordered (version 7) id of the plain table: the
-- conversion makes one partition for the range from it to now.
select id from {schema}.outbox_events_unpartitioned
where substring(id::text, 15, 1) = '7'
order by id limit 1;

-- name: partition_has_done
select exists (select 1 from {schema}.{partition} where status = 'done');

-- name: partition_detach
alter table {schema}.outbox_events detach partition {schema}.{partition};

-- name: partition_unkept
-- Whether the detached partition holds a delivered event that Keep was
-- not handed: delivered since $1 (Keep's start, less a margin) and not
-- among $2, the events kept that were delivered since $1.
select exists (
  select 1 from {schema}.{partition}
  where status = 'done' and processed_at >= $1 and not (id = any($2::uuid[])));

-- name: partition_move_back
-- The unfinished events of a detached partition go back to the outbox
-- (to the DEFAULT partition, their range being gone), with their ids and
-- seq: leases that list them still settle them. Each status is found by
-- its partial index (outbox_events_pending_idx,
-- outbox_events_failed_seq_idx, outbox_events_processing_idx), never by
-- a scan of the partition's delivered rows: the drop's cost follows the
-- unfinished rows, not the partition's size.
with moved as (
  delete from {schema}.{partition} where status = 'pending' returning *
), moved_failed as (
  delete from {schema}.{partition} where status = 'failed' returning *
), moved_processing as (
  delete from {schema}.{partition} where status = 'processing' returning *
)
insert into {schema}.outbox_events overriding system value
select * from moved union all select * from moved_failed union all select * from moved_processing;

-- name: partition_count
-- A partition's delivered events, counted exactly: the drop of a
-- partition whose events were kept (Keep read them all already).
select count(*) from {schema}.{partition} where status = 'done';

-- name: partition_pages
-- The pages of a partition (its size over the block size).
select coalesce(pg_relation_size(to_regclass($1)), 0) / current_setting('block_size')::bigint;

-- name: partition_sample_done
-- The delivered events in a random $1 percent of a partition's pages
-- (100: all of them, exactly), and how many pages holding rows the sample
-- read: the estimate scales by the pages read, not by $1, whose share of
-- pages drawn varies from run to run.
select count(*) filter (where status = 'done'), count(distinct (ctid::text::point)[0])
from {schema}.{partition} tablesample system ($1::float8);

-- name: partition_drop_keys
-- The keys of a detached partition's delivered events, before it is
-- dropped (a DROP runs no delete trigger).
delete from {schema}.outbox_dedup_keys k
using {schema}.{partition} p
where p.dedup_key is not null and k.dedup_key = p.dedup_key and k.id = p.id;

-- name: partition_drop
-- A detached partition, dropped in a statement of its own after the
-- detach's transaction: the removal of its files (a moment per gigabyte)
-- holds no lock on outbox_events. "if exists": another relay's sweep may
-- have dropped it first.
drop table if exists {schema}.{partition};

-- name: partition_mark_detached
-- Marks a partition the drop's transaction detached, in that transaction:
-- partition_detached finds it by this comment if the DROP after it never
-- ran, and no table of the user's is ever taken for it.
comment on table {schema}.{partition} is 'postbox: a partition retention detached, to drop';

-- name: partition_detached
-- The partitions a drop detached and did not drop (the process stopped
-- between the two): tables of the schema that partition_mark_detached
-- marked and that are no partition. Their unfinished events were moved
-- back and their keys removed in the detach's transaction; what they hold
-- is delivered.
select c.relname::text
from pg_class c
join pg_namespace n on n.oid = c.relnamespace
where n.nspname = $1 and c.relkind = 'r' and not c.relispartition
  and obj_description(c.oid, 'pg_class') = 'postbox: a partition retention detached, to drop'
order by c.relname;

-- name: partition_keep_read
-- A partition's delivered events for Keep, $2 at a time after id $1, in
-- id order.
select id, seq, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers, created_at, processed_at
from {schema}.{partition}
where status = 'done' and id > $1
order by id
limit $2;

-- name: partition_default_read
-- The DEFAULT partition's retention with Keep (expire_read on it alone:
-- the range partitions are dropped whole): up to $2 delivered events
-- processed before $1, oldest first.
select id, seq, aggregate_type, aggregate_id, event_type, payload, coalesce(dedup_key, ''), headers, created_at, processed_at
from {schema}.outbox_events_default
where status = 'done' and processed_at < $1
order by processed_at, id
limit $2;

-- name: partition_default_delete
-- expire_delete on the DEFAULT partition: the events Keep was handed
-- ($1), those still delivered.
delete from {schema}.outbox_events_default where id = any($1::uuid[]) and (status = 'done') is true; -- by id (see settle)

-- name: partition_default_purge
-- purge_done on the DEFAULT partition alone.
delete from {schema}.outbox_events_default
where id in (
  select id from {schema}.outbox_events_default
  where status = 'done' and processed_at < $1
  order by processed_at
  limit $2);

-- name: partition_bound_of
-- The bound of the partition named $1 ('' when no partition of the outbox
-- has that name).
select coalesce((
  select pg_get_expr(c.relpartbound, c.oid)
  from pg_inherits i
  join pg_class c on c.oid = i.inhrelid
  where i.inhparent = to_regclass('{schema}.outbox_events') and c.relname = $1), '');

-- name: partition_publication_root
-- A publication of the outbox publishes the partitions' inserts as the
-- root's: WAL mode reads outbox_events, whatever the partition.
alter publication {publication} set (publish_via_partition_root = true);

-- name: partition_publication_add
alter publication {publication} add table {schema}.outbox_events;
