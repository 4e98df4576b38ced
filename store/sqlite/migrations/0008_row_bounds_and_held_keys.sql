-- What one row can do to the others (docs/guarantees.md).
--
-- 1. Bounds on outbox_events. The tables are not STRICT: a plain-SQL
--    producer could write values no event has (retries or attempts that
--    are text or overflow when an attempt is counted, times outside years
--    1 to 9999, text that is a blob or holds a NUL byte). SQLite cannot add
--    a check to an existing table: a trigger refuses such rows at insert,
--    with the text of the check they break. Rows that break these bounds
--    already are failed first, here, with a last_error that names each
--    column and its value, and their values are brought into bounds;
--    delivered rows stay delivered. The store reads every row defensively
--    all the same (an UPDATE is not checked, and text that is not valid
--    UTF-8 is found only when read).
-- Times are microseconds: year 1 is -62135596800000000, year 10000
-- 253402300800000000.
with bad as (
  select seq, rtrim(
    case when typeof(retries) <> 'integer' or retries not between 0 and 1000000000
      then 'retries: ' || quote(retries) || ' is not an integer from 0 to 1000000000; ' else '' end ||
    case when typeof(attempts) <> 'integer' or attempts not between 0 and 1000000000
      then 'attempts: ' || quote(attempts) || ' is not an integer from 0 to 1000000000; ' else '' end ||
    case when created_at not between -62135596800000000 and 253402300799999999
      then 'created_at: ' || created_at || ' is not a time from year 1 to 9999; ' else '' end ||
    case when available_at not between -62135596800000000 and 253402300799999999
      then 'available_at: ' || available_at || ' is not a time from year 1 to 9999; ' else '' end ||
    case when processed_at not between -62135596800000000 and 253402300799999999
      then 'processed_at: ' || processed_at || ' is not a time from year 1 to 9999; ' else '' end, '; ') as problem
  from {prefix}outbox_events
  where typeof(retries) <> 'integer' or retries not between 0 and 1000000000
     or typeof(attempts) <> 'integer' or attempts not between 0 and 1000000000
     or created_at not between -62135596800000000 and 253402300799999999
     or available_at not between -62135596800000000 and 253402300799999999
     or processed_at not between -62135596800000000 and 253402300799999999
)
update {prefix}outbox_events as e
set status = case when e.status = 'done' then 'done' else 'failed' end,
    retries = case when typeof(e.retries) = 'integer' then min(max(e.retries, 0), 1000000000) else 0 end,
    attempts = case when typeof(e.attempts) = 'integer' then min(max(e.attempts, 0), 1000000000) else 0 end,
    created_at = case when e.created_at between -62135596800000000 and 253402300799999999 then e.created_at
      else cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000 end,
    available_at = case when e.available_at between -62135596800000000 and 253402300799999999 then e.available_at
      else cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000 end,
    processed_at = case when e.status = 'done' and e.processed_at between -62135596800000000 and 253402300799999999 then e.processed_at
      else cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000 end,
    lease_owner = case when e.status = 'processing' then null else e.lease_owner end,
    lease_expires_at = case when e.status = 'processing' then null else e.lease_expires_at end,
    last_error = 'failed by migration 0008: ' || b.problem
from bad as b
where e.seq = b.seq;

create trigger {prefix}outbox_events_bounds
before insert on {prefix}outbox_events
when typeof(new.retries) <> 'integer' or new.retries not between 0 and 1000000000
  or typeof(new.attempts) <> 'integer' or new.attempts not between 0 and 1000000000
  or new.created_at not between -62135596800000000 and 253402300799999999
  or new.available_at not between -62135596800000000 and 253402300799999999
  or new.processed_at not between -62135596800000000 and 253402300799999999
  or typeof(new.event_type) <> 'text' or typeof(new.aggregate_type) <> 'text' or typeof(new.aggregate_id) <> 'text'
  or instr(cast(new.event_type as blob), x'00') > 0
  or instr(cast(new.aggregate_type as blob), x'00') > 0
  or instr(cast(new.aggregate_id as blob), x'00') > 0
begin
  select raise(abort, 'CHECK constraint failed: {prefix}outbox_events_bounds (retries and attempts integers from 0 to 1000000000, times from year 1 to 9999, event_type, aggregate_type and aggregate_id text without NUL)');
end;

-- 2. Dedup keys held after delivery (SettleParams.DedupWindow). A settle
--    that delivers an event with a dedup_key writes the key here with the
--    end of its window (microseconds); until then an insert of the same
--    key is refused by the trigger below with the text of the unique
--    index's error, from postbox's producers (which skip the event, as for
--    a key in the outbox) and from plain SQL alike, whether the delivered
--    row was deleted or is kept done. PurgeDone removes expired keys in
--    batches.
create table {prefix}outbox_held_keys (
  dedup_key  text primary key,
  expires_at integer not null
);
create index {prefix}outbox_held_keys_expires_idx
  on {prefix}outbox_held_keys (expires_at);

create trigger {prefix}outbox_events_held_key
before insert on {prefix}outbox_events
when new.dedup_key is not null
begin
  select raise(abort, 'UNIQUE constraint failed: {prefix}outbox_events.dedup_key (the key of a delivered event, held after its delivery)')
  where exists (
    select 1 from {prefix}outbox_held_keys
    where dedup_key = new.dedup_key
      and expires_at > cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000);
end;
