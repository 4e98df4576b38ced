-- Webhook endpoints (postbox relay --endpoints). The relay fans each event
-- out into one delivery row per matching endpoint, with a copy of the event,
-- and marks the outbox event done; the endpoint dispatcher then delivers
-- those rows, each endpoint on its own: its own attempts, backoff, leases and
-- dead letters. Secrets are stored here, in clear: protect the database.
create table {schema}.endpoints (
  id                    uuid primary key,
  name                  text not null default '',
  url                   text not null,
  types                 text not null default '',
  secret                text not null,
  previous_secret       text,
  previous_secret_until timestamptz,
  rate_per_second       double precision not null default 0,
  concurrency           integer not null default 8 check (concurrency > 0),
  shadow                boolean not null default false,
  state                 text not null default 'enabled'
                        check (state in ('enabled', 'disabled', 'auto_disabled')),
  failing_since         timestamptz,
  created_at            timestamptz not null default now(),
  updated_at            timestamptz not null default now()
);

create table {schema}.endpoint_deliveries (
  event_id         uuid not null,
  endpoint_id      uuid not null references {schema}.endpoints (id) on delete cascade,
  seq              bigint generated always as identity,
  aggregate_type   text not null default '',
  aggregate_id     text not null default '',
  event_type       text not null,
  payload          jsonb not null,
  headers          jsonb not null default '{}',
  status           text not null default 'pending'
                   check (status in ('pending', 'processing', 'done', 'failed', 'dropped')),
  attempts         integer not null default 0,
  available_at     timestamptz not null default now(),
  lease_owner      text,
  lease_expires_at timestamptz,
  last_error       text,
  created_at       timestamptz not null default now(),
  processed_at     timestamptz,
  primary key (event_id, endpoint_id)
);

-- One endpoint's claim: due pending rows only, in order.
create index endpoint_deliveries_pending_idx
  on {schema}.endpoint_deliveries (endpoint_id, available_at, seq) where status = 'pending';
-- Reclaiming expired leases.
create index endpoint_deliveries_lease_idx
  on {schema}.endpoint_deliveries (lease_expires_at) where status = 'processing';
-- Retention of finished rows.
create index endpoint_deliveries_finished_idx
  on {schema}.endpoint_deliveries (processed_at) where status in ('done', 'dropped');
-- Counts and lists of one endpoint.
create index endpoint_deliveries_endpoint_idx
  on {schema}.endpoint_deliveries (endpoint_id, status, seq);

-- The attempts log: every attempt, written in batches, kept for a retention.
create table {schema}.endpoint_attempts (
  id          bigint generated always as identity primary key,
  endpoint_id uuid not null references {schema}.endpoints (id) on delete cascade,
  event_id    uuid not null,
  event_type  text not null default '',
  attempt     integer not null,
  status_code integer not null default 0,
  duration_us bigint not null default 0,
  response    text not null default '',
  error       text not null default '',
  at          timestamptz not null default now()
);
create index endpoint_attempts_endpoint_idx
  on {schema}.endpoint_attempts (endpoint_id, id);
create index endpoint_attempts_at_idx
  on {schema}.endpoint_attempts (at);
