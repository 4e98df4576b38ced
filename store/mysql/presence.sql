-- Named queries of the relays' presence table (store.Presence) of the MySQL
-- store; "{prefix}" is the table prefix, parameters are named (named.go).
-- "now" comes from the caller.

-- name: presence_beat
insert into {prefix}relay_presence
  (relay_id, host, pid, mode, sink, version, started_at, heartbeat_at, heartbeat_every_ms,
   sink_down_since, sink_error)
values (:id, :host, :pid, :mode, :sink, :version, :now, :now, :every_ms, :down, :error)
on duplicate key update
  host = values(host), pid = values(pid), mode = values(mode), sink = values(sink),
  version = values(version), heartbeat_at = values(heartbeat_at),
  heartbeat_every_ms = values(heartbeat_every_ms),
  sink_down_since = values(sink_down_since), sink_error = values(sink_error);

-- name: presence_leave
delete from {prefix}relay_presence where relay_id = :id;

-- name: presence_prune
delete from {prefix}relay_presence where heartbeat_at < :before;

-- name: presence_list
select relay_id, host, pid, mode, sink, version, started_at, heartbeat_at, heartbeat_every_ms,
       sink_down_since, sink_error
from {prefix}relay_presence
order by started_at, relay_id;
