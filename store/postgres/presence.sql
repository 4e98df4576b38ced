-- Named queries of the relays' presence table (store.Presence) of the
-- PostgreSQL store; "{schema}" is filled in as in queries.sql. Times are
-- the server's: a relay's clock never decides whether its row is stale.

-- name: presence_beat
insert into {schema}.relay_presence as p
  (relay_id, host, pid, mode, sink, version, heartbeat_every_ms, sink_down_since, sink_error)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
on conflict (relay_id) do update
set host = excluded.host, pid = excluded.pid, mode = excluded.mode, sink = excluded.sink,
    version = excluded.version, heartbeat_at = now(), heartbeat_every_ms = excluded.heartbeat_every_ms,
    sink_down_since = excluded.sink_down_since, sink_error = excluded.sink_error;

-- name: presence_leave
delete from {schema}.relay_presence where relay_id = $1;

-- name: presence_prune
delete from {schema}.relay_presence
where heartbeat_at < now() - $1::bigint * interval '1 microsecond';

-- name: presence_list
-- The age is the server's now minus the heartbeat, in microseconds.
select relay_id, host, pid, mode, sink, version, started_at, heartbeat_at, heartbeat_every_ms,
       sink_down_since, sink_error,
       (extract(epoch from (now() - heartbeat_at)) * 1000000)::bigint
from {schema}.relay_presence
order by started_at, relay_id;
