-- The inbox: the article's columns with their names and meaning (id,
-- received_at, processed_at, handler_status, payload, signature), plus what
-- exactly-once processing needs. Every added column has a default, so the
-- article's consumer SQL keeps working. Same conventions as the outbox: ids
-- as canonical lower-case UUID text, JSON as text, times as INTEGER
-- microseconds since the Unix epoch.
create table {prefix}inbox_events (
  id               text primary key
                   check (id glob '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  received_at      integer not null
                   default (cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000)
                   check (typeof(received_at) = 'integer'),
  processed_at     integer check (typeof(processed_at) in ('integer', 'null')),
  handler_status   text not null default 'pending'
                   check (handler_status in ('pending', 'done', 'failed')),
  payload          text check (payload is null or (typeof(payload) = 'text' and json_valid(payload))),
  signature        text,
  -- Added by postbox.
  event_type       text not null default '',
  aggregate_type   text not null default '',
  aggregate_id     text not null default '',
  -- The event's per-aggregate sequence number, when it is ordered.
  seq              integer,
  -- Handler runs and claims of the event, the failed ones included.
  attempts         integer not null default 0,
  -- A pending row claimed for non-transactional work is leased.
  lease_owner      text,
  lease_expires_at integer check (typeof(lease_expires_at) in ('integer', 'null')),
  last_error       text
);

-- Retention: old done rows are removed in batches.
create index {prefix}inbox_events_done_idx
  on {prefix}inbox_events (processed_at) where handler_status = 'done';

-- Inspection of pending and failed rows. Processed events are written done,
-- so they never enter this index.
create index {prefix}inbox_events_open_idx
  on {prefix}inbox_events (received_at) where handler_status <> 'done';

-- Consumer-side ordering: the last applied sequence number of each
-- aggregate. It outlives the retention of inbox_events, so an ordered event
-- is refused even after its inbox row was removed.
create table {prefix}inbox_sequences (
  aggregate_type text not null,
  aggregate_id   text not null,
  last_seq       integer not null check (typeof(last_seq) = 'integer' and last_seq > 0),
  updated_at     integer not null
                 default (cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000)
                 check (typeof(updated_at) = 'integer'),
  primary key (aggregate_type, aggregate_id)
);
