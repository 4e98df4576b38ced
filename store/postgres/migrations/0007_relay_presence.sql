-- The relays' presence (store.Presence): one row per running relay process,
-- written when it starts, renewed every heartbeat with the state of its sink,
-- deleted when it stops cleanly. `postbox status` reads it to say which
-- relays are alive and whether they find the sink down; a crashed relay's
-- row grows stale and its successors prune it after a day. It holds no
-- secret: the sink is described without credentials, path or query.
create table {schema}.relay_presence (
  relay_id           text primary key,
  host               text not null default '',
  pid                integer not null default 0,
  mode               text not null default '',
  sink               text not null default '',
  version            text not null default '',
  started_at         timestamptz not null default now(),
  heartbeat_at       timestamptz not null default now(),
  heartbeat_every_ms bigint not null default 5000 check (heartbeat_every_ms > 0),
  sink_down_since    timestamptz,
  sink_error         text not null default ''
);
