-- Named queries of the relays' presence table (store.Presence) of the SQLite
-- store; "{prefix}" is the table prefix. Parameters are numbered (?1);
-- times are Unix microseconds, "now" comes from the caller (every process
-- on one database file shares the host's clock).

-- name: presence_beat
insert into {prefix}relay_presence
  (relay_id, host, pid, mode, sink, version, started_at, heartbeat_at, heartbeat_every_ms,
   sink_down_since, sink_error)
values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9, ?10)
on conflict (relay_id) do update
set host = excluded.host, pid = excluded.pid, mode = excluded.mode, sink = excluded.sink,
    version = excluded.version, heartbeat_at = excluded.heartbeat_at,
    heartbeat_every_ms = excluded.heartbeat_every_ms,
    sink_down_since = excluded.sink_down_since, sink_error = excluded.sink_error;

-- name: presence_leave
delete from {prefix}relay_presence where relay_id = ?1;

-- name: presence_prune
delete from {prefix}relay_presence where heartbeat_at < ?1;

-- name: presence_list
select relay_id, host, pid, mode, sink, version, started_at, heartbeat_at, heartbeat_every_ms,
       sink_down_since, sink_error
from {prefix}relay_presence
order by started_at, relay_id;
