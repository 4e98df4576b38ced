-- The inbox: the article's columns, plus what exactly-once processing needs.
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
  -- Per-aggregate sequence for consumer-side ordering (optional).
  seq              bigint,
  attempts         integer not null default 0,
  lease_owner      text,
  lease_expires_at timestamptz,
  last_error       text
);

-- Retention: old processed rows are removed in batches.
create index inbox_events_received_idx on {schema}.inbox_events (received_at);

-- Consumer-side ordering: the last applied sequence of an aggregate.
create index inbox_events_aggregate_seq_idx
  on {schema}.inbox_events (aggregate_type, aggregate_id, seq) where seq is not null;
