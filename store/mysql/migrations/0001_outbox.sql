-- The outbox: the article's columns with their names and meaning, plus what
-- the relay needs. Every added column has a default, so the article's
--   insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key) values (...)
-- keeps working from any language.
--
-- Adapted to MySQL (8.0 or later) and MariaDB (10.6 or later):
--   * id is the canonical lower-case text of a UUID (CHAR(36), ascii). An id
--     left out (or written '') gets a time-ordered version 7 UUID, made in
--     SQL by the trigger {prefix}outbox_events_id below: 48-bit Unix
--     milliseconds, then random bits.
--   * seq is a BIGINT AUTO_INCREMENT primary key: InnoDB stores the table in
--     insertion order. id stays unique and is the event's identity.
--   * payload and headers are JSON (MariaDB: LONGTEXT checked by json_valid,
--     kept byte for byte; MySQL: its binary JSON, returned normalized).
--   * Times are DATETIME(6) in UTC: the SQL defaults are utc_timestamp(6),
--     whatever the session's time_zone.
--   * Texts are utf8mb4 with the binary collation: compared byte for byte,
--     as PostgreSQL compares them. MySQL indexes no more than 3072 bytes
--     of a key: the aggregate's columns are indexed by their first
--     characters, the dedup key by its SHA-256 (dedup_hash).
create table {prefix}outbox_events (
  id               char(36) character set ascii collate ascii_bin not null default '',
  aggregate_type   mediumtext not null default (''),
  aggregate_id     mediumtext not null default (''),
  event_type       mediumtext not null,
  payload          json not null,
  dedup_key        mediumtext,
  status           varchar(16) character set ascii collate ascii_bin not null default 'pending',
  retries          int not null default 0,
  available_at     datetime(6) not null default (utc_timestamp(6)),
  created_at       datetime(6) not null default (utc_timestamp(6)),
  processed_at     datetime(6),
  -- Added by postbox.
  seq              bigint not null auto_increment,
  attempts         int not null default 0,
  lease_owner      varchar(255),
  lease_expires_at datetime(6),
  last_error       mediumtext,
  headers          json not null default ('{}'),
  dedup_hash       binary(32) as (unhex(sha2(dedup_key, 256))) stored,
  primary key (seq),
  unique key {prefix}outbox_events_id_uq (id),
  unique key {prefix}outbox_events_dedup_key_uq (dedup_hash),
  -- The relay's claim: a range scan over due pending rows.
  key {prefix}outbox_events_pending_idx (status, available_at, seq),
  -- Ordered mode: "is an earlier event of this aggregate still unfinished?"
  key {prefix}outbox_events_aggregate_open_idx (aggregate_type(64), aggregate_id(191), seq),
  -- Reclaiming the events of crashed relays, the relays' leases.
  key {prefix}outbox_events_lease_idx (status, lease_expires_at),
  -- Retention of delivered rows, and the dead-letter tools.
  key {prefix}outbox_events_done_idx (status, processed_at),
  constraint {prefix}outbox_events_id_uuid
    check (id regexp '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  constraint {prefix}outbox_events_status
    check (status in ('pending', 'processing', 'done', 'failed'))
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin;

create trigger {prefix}outbox_events_id
before insert on {prefix}outbox_events
for each row
begin
  declare ms bigint;
  if new.id = '' then
    set ms = floor(unix_timestamp(now(6)) * 1000);
    set new.id = lower(concat(
      lpad(hex(ms >> 16), 8, '0'), '-', lpad(hex(ms & 65535), 4, '0'), '-',
      '7', lpad(hex(floor(rand() * 4096)), 3, '0'), '-',
      hex(8 + floor(rand() * 4)), lpad(hex(floor(rand() * 4096)), 3, '0'), '-',
      lpad(hex(floor(rand() * 281474976710656)), 12, '0')));
  end if;
end;
