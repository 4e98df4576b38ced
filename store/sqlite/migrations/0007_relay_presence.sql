-- Numbered and named like the PostgreSQL store's migration 0007: the relays'
-- presence, one row per running relay process (store.Presence). Times are
-- INTEGER Unix microseconds, as in 0001. It holds no secret.
create table {prefix}relay_presence (
  relay_id           text primary key,
  host               text not null default '',
  pid                integer not null default 0,
  mode               text not null default '',
  sink               text not null default '',
  version            text not null default '',
  started_at         integer not null,
  heartbeat_at       integer not null,
  heartbeat_every_ms integer not null default 5000 check (heartbeat_every_ms > 0),
  sink_down_since    integer,
  sink_error         text not null default ''
);
