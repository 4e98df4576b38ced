-- The outbox: the article's columns with their names, types and meaning, plus
-- what the relay needs. Every added column has a default, so the article's
--   insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key) values (...)
-- keeps working from any language.

-- Time-ordered (version 7) UUIDs for producers that let the database choose
-- the id: the primary key index then grows at its right edge.
create or replace function {schema}.postbox_uuid_v7() returns uuid
language sql volatile as $$
  select encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
              placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
              from 1 for 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;

create table {schema}.outbox_events (
  id               uuid primary key default {schema}.postbox_uuid_v7(),
  aggregate_type   text not null default '',
  aggregate_id     text not null default '',
  event_type       text not null,
  payload          jsonb not null,
  dedup_key        text,
  status           text not null default 'pending'
                   check (status in ('pending', 'processing', 'done', 'failed')),
  retries          integer not null default 0,
  available_at     timestamptz not null default now(),
  created_at       timestamptz not null default now(),
  processed_at     timestamptz,
  -- Added by postbox.
  seq              bigint generated always as identity,
  last_error       text,
  headers          jsonb not null default '{}'
);

create unique index outbox_events_dedup_key_uq
  on {schema}.outbox_events (dedup_key) where dedup_key is not null;

-- The relay's claim: an index range scan over due pending rows only.
create index outbox_events_pending_idx
  on {schema}.outbox_events (available_at, seq) where status = 'pending';

-- Ordered mode: "is an earlier event of this aggregate still unfinished?"
create index outbox_events_aggregate_open_idx
  on {schema}.outbox_events (aggregate_type, aggregate_id, seq)
  where status = 'pending';

-- Leases: a relay's claim writes one row per batch here instead of updating
-- every claimed event, and delivered events are deleted (or marked done) in
-- one statement. An event listed in a lease is being delivered: "processing"
-- in postbox status and Get, while its row still says 'pending'. Expired
-- leases are reclaimed, counting a failed attempt for each of their events.
create table {schema}.outbox_leases (
  batch      bigint generated always as identity primary key,
  owner      text not null,
  ids        uuid[] not null,
  expires_at timestamptz not null
);

-- Retention of delivered rows, and the dead-letter tools.
create index outbox_events_done_idx
  on {schema}.outbox_events (processed_at) where status = 'done';
create index outbox_events_failed_idx
  on {schema}.outbox_events (processed_at) where status = 'failed';

-- Wake-ups: the relay LISTENs on {channel}. NOTIFY takes a cluster-wide lock
-- from just before the commit until its end, so transactions that notify
-- commit one at a time. To keep producers' commits concurrent, a committing
-- transaction notifies only if no other one is notifying at that moment (a
-- try-lock); one that skips commits right behind the one that notifies, and
-- the relay, after a claim that found events, looks again shortly after.
-- The trigger is deferred to the commit, so the skip window is that short;
-- the relay's poll covers the rest.
create or replace function {schema}.postbox_outbox_notify() returns trigger
language plpgsql as $$
begin
  if pg_try_advisory_xact_lock(2028, hashtext('{channel}')) then
    perform pg_notify('{channel}', '');
  end if;
  return null;
end
$$;

create constraint trigger outbox_events_notify
  after insert on {schema}.outbox_events
  deferrable initially deferred
  for each row execute function {schema}.postbox_outbox_notify();

-- Delivered rows are updated and later deleted in batches: vacuum early.
alter table {schema}.outbox_events set (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_analyze_scale_factor = 0.02,
  fillfactor = 90
);
