-- What one row can do to the others (docs/guarantees.md).
--
-- 1. Bounds on outbox_events. A plain-SQL producer could write values no
--    event has: a timestamp of 'infinity', which no client reads as a time,
--    or retries = 2147483647, which overflows when an attempt is counted.
--    retries now stays from 0 to 1,000,000,000 (the store's updates saturate
--    there), and the times from year 1 to 9999 (finite, and what JSON and
--    every client can read). Rows that break these bounds already are not
--    left to make the checks fail: they are failed first, here, with a
--    last_error that names each column and its value, and the value is
--    brought into bounds (a time to the time of this migration, retries to
--    the nearest bound); delivered rows stay delivered. The checks are then
--    added and validated: a row another transaction wrote out of bounds
--    meanwhile makes the migration fail (run it again) rather than stay.
--    Migrations run in one transaction, so the table is locked while the
--    update and the validation read it: a short while for an outbox whose
--    delivered events are deleted (the default), longer for one that keeps
--    millions of them. The relay reads defensively all the same (a store
--    whose checks were dropped, or SQLite's, which has none on old rows).
with bad as (
  select id, concat_ws('; ',
    case when retries not between 0 and 1000000000
      then format('retries: %s is out of range (0 to 1000000000)', retries) end,
    case when not (created_at >= '0001-01-01 00:00:00+00' and created_at < '10000-01-01 00:00:00+00')
      then format('created_at: %s is not a time from year 1 to 9999', created_at) end,
    case when not (available_at >= '0001-01-01 00:00:00+00' and available_at < '10000-01-01 00:00:00+00')
      then format('available_at: %s is not a time from year 1 to 9999', available_at) end,
    case when not (processed_at >= '0001-01-01 00:00:00+00' and processed_at < '10000-01-01 00:00:00+00')
      then format('processed_at: %s is not a time from year 1 to 9999', processed_at) end
  ) as problem
  from {schema}.outbox_events
  where retries not between 0 and 1000000000
     or not (created_at >= '0001-01-01 00:00:00+00' and created_at < '10000-01-01 00:00:00+00')
     or not (available_at >= '0001-01-01 00:00:00+00' and available_at < '10000-01-01 00:00:00+00')
     or not (processed_at >= '0001-01-01 00:00:00+00' and processed_at < '10000-01-01 00:00:00+00')
)
update {schema}.outbox_events e
set status = case when e.status = 'done' then 'done' else 'failed' end,
    retries = least(greatest(e.retries, 0), 1000000000),
    created_at = case when e.created_at >= '0001-01-01 00:00:00+00' and e.created_at < '10000-01-01 00:00:00+00' then e.created_at else now() end,
    available_at = case when e.available_at >= '0001-01-01 00:00:00+00' and e.available_at < '10000-01-01 00:00:00+00' then e.available_at else now() end,
    processed_at = case when e.status = 'done' and e.processed_at >= '0001-01-01 00:00:00+00' and e.processed_at < '10000-01-01 00:00:00+00' then e.processed_at else now() end,
    last_error = 'failed by migration 0008: ' || b.problem
from bad b
where e.id = b.id;

-- Both checks in one statement: one scan of the table validates them.
-- The ALTER locks the table until the migration commits whatever its form
-- (NOT VALID, then VALIDATE, would shorten the lock only in a transaction
-- of their own).
alter table {schema}.outbox_events
  add constraint outbox_events_retries_range
    check (retries between 0 and 1000000000),
  add constraint outbox_events_times_range
    check (created_at >= '0001-01-01 00:00:00+00' and created_at < '10000-01-01 00:00:00+00'
       and available_at >= '0001-01-01 00:00:00+00' and available_at < '10000-01-01 00:00:00+00'
       and (processed_at is null
            or processed_at >= '0001-01-01 00:00:00+00' and processed_at < '10000-01-01 00:00:00+00'));

-- 2. Dedup keys held after delivery (SettleParams.DedupWindow). A settle
--    that delivers an event with a dedup_key writes the key here with the
--    end of its window; until then an insert of the same key is refused by
--    the trigger below with the error of the unique index
--    (outbox_events_dedup_key_uq, SQLSTATE 23505), from postbox's producers
--    and from plain SQL alike, whether the delivered row was deleted or is
--    kept done. PurgeDone removes expired keys in batches.
create table {schema}.outbox_held_keys (
  dedup_key  text primary key,
  expires_at timestamptz not null
);
create index outbox_held_keys_expires_idx
  on {schema}.outbox_held_keys (expires_at);

create or replace function {schema}.postbox_refuse_held_key() returns trigger
language plpgsql as $$
declare
  held_until timestamptz;
begin
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

-- After the insert, not before: the unique index has then waited for a
-- settle that was deleting the row holding the same key, and this check,
-- a statement of its own (a snapshot taken after that settle committed),
-- sees the key the settle held. Taking no lock, it never makes a relay's
-- settle wait for a producer's transaction.
create trigger outbox_events_held_key
  after insert on {schema}.outbox_events
  for each row when (new.dedup_key is not null)
  execute function {schema}.postbox_refuse_held_key();
