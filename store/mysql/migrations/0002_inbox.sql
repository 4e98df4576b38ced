-- The inbox: the article's columns with their names and meaning (id,
-- received_at, processed_at, handler_status, payload, signature), plus what
-- exactly-once processing needs. Every added column has a default, so the
-- article's consumer SQL keeps working. Same conventions as the outbox: ids
-- as canonical lower-case UUID text, JSON, DATETIME(6) in UTC.
create table {prefix}inbox_events (
  id               char(36) character set ascii collate ascii_bin not null,
  received_at      datetime(6) not null default (utc_timestamp(6)),
  processed_at     datetime(6),
  handler_status   varchar(16) character set ascii collate ascii_bin not null default 'pending',
  payload          json,
  signature        mediumtext,
  -- Added by postbox.
  event_type       mediumtext not null default (''),
  aggregate_type   mediumtext not null default (''),
  aggregate_id     mediumtext not null default (''),
  -- The event's per-aggregate sequence number, when it is ordered.
  seq              bigint,
  -- Handler runs and claims of the event, the failed ones included.
  attempts         int not null default 0,
  -- A pending row claimed for non-transactional work is leased.
  lease_owner      varchar(255),
  lease_expires_at datetime(6),
  last_error       mediumtext,
  primary key (id),
  -- Retention: old done rows are removed in batches.
  key {prefix}inbox_events_done_idx (handler_status, processed_at),
  -- Inspection of pending and failed rows.
  key {prefix}inbox_events_open_idx (handler_status, received_at),
  constraint {prefix}inbox_events_id_uuid
    check (id regexp '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  constraint {prefix}inbox_events_status
    check (handler_status in ('pending', 'done', 'failed'))
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin;

-- Consumer-side ordering: the last applied sequence number of each
-- aggregate. It outlives the retention of inbox_events, so an ordered event
-- is refused even after its inbox row was removed. The aggregate is keyed
-- by the SHA-256 of its type and id (agg_hash): they may be longer than an
-- index key.
create table {prefix}inbox_sequences (
  aggregate_type mediumtext not null,
  aggregate_id   mediumtext not null,
  last_seq       bigint not null,
  updated_at     datetime(6) not null default (utc_timestamp(6)),
  agg_hash       binary(32) as (unhex(sha2(concat(aggregate_type, char(0), aggregate_id), 256))) stored,
  unique key {prefix}inbox_sequences_aggregate_uq (agg_hash),
  constraint {prefix}inbox_sequences_last_seq check (last_seq > 0)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin;
