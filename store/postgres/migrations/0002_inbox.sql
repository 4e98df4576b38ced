-- The inbox: the article's columns with their names, types and meaning
-- (id, received_at, processed_at, handler_status, payload, signature), plus
-- what exactly-once processing needs. Every added column has a default, so
-- the article's consumer SQL keeps working.
create table {schema}.inbox_events (
  id               uuid primary key,
  received_at      timestamptz not null default now(),
  processed_at     timestamptz,
  handler_status   text not null default 'pending'
                   check (handler_status in ('pending', 'done', 'failed')),
  payload          jsonb,
  signature        text,
  -- Added by postbox.
  event_type       text not null default '',
  aggregate_type   text not null default '',
  aggregate_id     text not null default '',
  -- The event's per-aggregate sequence number, when it is ordered.
  seq              bigint,
  -- Handler runs and claims of the event, the failed ones included.
  attempts         integer not null default 0,
  -- A pending row claimed for non-transactional work is leased.
  lease_owner      text,
  lease_expires_at timestamptz,
  last_error       text
);

-- Retention: old done rows are removed in batches.
create index inbox_events_done_idx
  on {schema}.inbox_events (processed_at) where handler_status = 'done';

-- Inspection of pending and failed rows. Processed events are written done,
-- so they never enter this index.
create index inbox_events_open_idx
  on {schema}.inbox_events (received_at) where handler_status <> 'done';

-- Consumer-side ordering: the last applied sequence number of each
-- aggregate. It outlives the retention of inbox_events, so an ordered event
-- is refused even after its inbox row was removed.
create table {schema}.inbox_sequences (
  aggregate_type text not null,
  aggregate_id   text not null,
  last_seq       bigint not null check (last_seq > 0),
  updated_at     timestamptz not null default now(),
  primary key (aggregate_type, aggregate_id)
);
