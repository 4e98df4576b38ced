-- Numbered and named like the PostgreSQL store's migration 0006: webhook
-- endpoints, their deliveries (one row per event and endpoint, with a copy of
-- the event) and the attempts log. Ids are UUID text, times INTEGER Unix
-- microseconds, JSON as text, as in 0001. Secrets are stored in clear:
-- protect the database file.
create table {prefix}endpoints (
  id                    text primary key,
  name                  text not null default '',
  url                   text not null,
  types                 text not null default '',
  secret                text not null,
  previous_secret       text,
  previous_secret_until integer,
  rate_per_second       real not null default 0,
  concurrency           integer not null default 8 check (concurrency > 0),
  shadow                integer not null default 0,
  state                 text not null default 'enabled'
                        check (state in ('enabled', 'disabled', 'auto_disabled')),
  failing_since         integer,
  created_at            integer not null,
  updated_at            integer not null
);

create table {prefix}endpoint_deliveries (
  seq              integer primary key autoincrement,
  event_id         text not null,
  endpoint_id      text not null references {prefix}endpoints (id) on delete cascade,
  aggregate_type   text not null default '',
  aggregate_id     text not null default '',
  event_type       text not null,
  payload          text not null,
  headers          text not null default '{}',
  status           text not null default 'pending'
                   check (status in ('pending', 'processing', 'done', 'failed', 'dropped')),
  attempts         integer not null default 0,
  available_at     integer not null,
  lease_owner      text,
  lease_expires_at integer,
  last_error       text,
  created_at       integer not null,
  processed_at     integer,
  unique (event_id, endpoint_id)
);

create index {prefix}endpoint_deliveries_pending_idx
  on {prefix}endpoint_deliveries (endpoint_id, available_at, seq) where status = 'pending';
create index {prefix}endpoint_deliveries_lease_idx
  on {prefix}endpoint_deliveries (lease_expires_at) where status = 'processing';
create index {prefix}endpoint_deliveries_finished_idx
  on {prefix}endpoint_deliveries (processed_at) where status in ('done', 'dropped');
create index {prefix}endpoint_deliveries_endpoint_idx
  on {prefix}endpoint_deliveries (endpoint_id, status, seq);

create table {prefix}endpoint_attempts (
  id          integer primary key autoincrement,
  endpoint_id text not null references {prefix}endpoints (id) on delete cascade,
  event_id    text not null,
  event_type  text not null default '',
  attempt     integer not null,
  status_code integer not null default 0,
  duration_us integer not null default 0,
  response    text not null default '',
  error       text not null default '',
  at          integer not null
);
create index {prefix}endpoint_attempts_endpoint_idx
  on {prefix}endpoint_attempts (endpoint_id, id);
create index {prefix}endpoint_attempts_at_idx
  on {prefix}endpoint_attempts (at);
