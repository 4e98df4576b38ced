-- The outbox: the article's columns with their names and meaning, plus what
-- the relay needs. Every added column has a default, so the article's
--   insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key) values (...)
-- keeps working from any language, with any SQLite that has the JSON
-- functions (3.9 or later; built in since 3.38).
--
-- Adapted to SQLite:
--   * id is the canonical lower-case text of a UUID. Its default is a
--     time-ordered version 7 UUID made in plain SQL (48-bit Unix milliseconds,
--     then random bits), so producers that leave the id out get one as well.
--   * seq is the rowid (INTEGER PRIMARY KEY AUTOINCREMENT): the table is stored
--     in insertion order and a sequence number is never reused, even after old
--     rows are purged. id stays unique and is the event's identity.
--   * payload and headers are JSON text, checked with json_valid.
--   * Times are INTEGER microseconds since the Unix epoch (UTC): they order and
--     compare as numbers and keep PostgreSQL's precision. The SQL defaults
--     have SQLite's millisecond resolution. To read one:
--       strftime('%Y-%m-%d %H:%M:%f', available_at / 1e6, 'unixepoch')
--   * The tables are not STRICT, so that older SQLite libraries (before
--     3.37) of other programs can still open the file; checks refuse a value
--     of the wrong type where it matters (ids, JSON, times).

create table {prefix}outbox_events (
  id               text not null unique
                   default (printf('%08x-%04x-%04x-%04x-%012x',
                     cast(round((julianday('now') - 2440587.5) * 86400000) as integer) >> 16,
                     cast(round((julianday('now') - 2440587.5) * 86400000) as integer) & 65535,
                     28672 | (random() & 4095),
                     32768 | (random() & 16383),
                     random() & 281474976710655))
                   check (id glob '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  aggregate_type   text not null default '',
  aggregate_id     text not null default '',
  event_type       text not null,
  payload          text not null check (typeof(payload) = 'text' and json_valid(payload)),
  dedup_key        text,
  status           text not null default 'pending'
                   check (status in ('pending', 'processing', 'done', 'failed')),
  retries          integer not null default 0,
  available_at     integer not null
                   default (cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000)
                   check (typeof(available_at) = 'integer'),
  created_at       integer not null
                   default (cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000)
                   check (typeof(created_at) = 'integer'),
  processed_at     integer check (typeof(processed_at) in ('integer', 'null')),
  -- Added by postbox.
  seq              integer primary key autoincrement,
  attempts         integer not null default 0,
  lease_owner      text,
  lease_expires_at integer check (typeof(lease_expires_at) in ('integer', 'null')),
  last_error       text,
  headers          text not null default '{}' check (typeof(headers) = 'text' and json_valid(headers))
);

create unique index {prefix}outbox_events_dedup_key_uq
  on {prefix}outbox_events (dedup_key) where dedup_key is not null;

-- The relay's claim: an index range scan over due pending rows only.
create index {prefix}outbox_events_pending_idx
  on {prefix}outbox_events (available_at, seq) where status = 'pending';

-- Ordered mode: "is an earlier event of this aggregate still unfinished?"
create index {prefix}outbox_events_aggregate_open_idx
  on {prefix}outbox_events (aggregate_type, aggregate_id, seq)
  where status in ('pending', 'processing');

-- Reclaiming the events of crashed relays.
create index {prefix}outbox_events_lease_idx
  on {prefix}outbox_events (lease_expires_at) where status = 'processing';

-- Retention of delivered rows, and the dead-letter tools.
create index {prefix}outbox_events_done_idx
  on {prefix}outbox_events (processed_at) where status = 'done';
create index {prefix}outbox_events_failed_idx
  on {prefix}outbox_events (processed_at) where status = 'failed';
