-- What one row can do to the others (docs/guarantees.md).
--
-- 1. Bounds on outbox_events. The columns' types and the session's strict
--    sql_mode refuse most values no event has (text in an integer, invalid
--    UTF-8, a time that is not one); these checks refuse the rest at
--    insert, from any session: retries and attempts out of 0 to
--    1000000000 (counting an attempt saturates there), times before year 1
--    (a zero date, which a session without NO_ZERO_DATE can write), event
--    types, aggregate types and ids holding a NUL byte. The store reads
--    every row defensively all the same (a check can be dropped).
alter table {prefix}outbox_events
  add constraint {prefix}outbox_events_bounds check (
    retries between 0 and 1000000000 and attempts between 0 and 1000000000
    and created_at >= '0001-01-01' and available_at >= '0001-01-01'
    and (processed_at is null or processed_at >= '0001-01-01')
    and (lease_expires_at is null or lease_expires_at >= '0001-01-01')
    and instr(event_type, char(0 using utf8mb4)) = 0
    and instr(aggregate_type, char(0 using utf8mb4)) = 0
    and instr(aggregate_id, char(0 using utf8mb4)) = 0);

-- 2. Dedup keys held after delivery (SettleParams.DedupWindow). A settle
--    that delivers an event with a dedup_key writes the key here with the
--    end of its window; until then an insert of the same key is refused by
--    the trigger below with the text of a duplicate key, from postbox's
--    producers (which skip the event, as for a key in the outbox) and from
--    plain SQL alike, whether the delivered row was deleted or is kept
--    done. Expire removes expired keys in batches.
create table {prefix}outbox_held_keys (
  dedup_key  mediumtext not null,
  expires_at datetime(6) not null,
  key_hash   binary(32) as (unhex(sha2(dedup_key, 256))) stored,
  unique key {prefix}outbox_held_keys_key_uq (key_hash),
  key {prefix}outbox_held_keys_expires_idx (expires_at)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin;

create trigger {prefix}outbox_events_held_key
before insert on {prefix}outbox_events
for each row follows {prefix}outbox_events_id
begin
  if new.dedup_key is not null and exists (
    select 1 from {prefix}outbox_held_keys
    where key_hash = unhex(sha2(new.dedup_key, 256)) and expires_at > utc_timestamp(6)) then
    signal sqlstate '23000'
      set message_text = 'Duplicate dedup_key: the key of a delivered event, held after its delivery',
          mysql_errno = 1062;
  end if;
end;
