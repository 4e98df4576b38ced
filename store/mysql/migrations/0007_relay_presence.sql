-- Numbered and named like the PostgreSQL store's migration 0007: the relays'
-- presence, one row per running relay process (store.Presence). It holds no
-- secret.
create table {prefix}relay_presence (
  relay_id           varchar(255) not null,
  host               varchar(1024) not null default '',
  pid                bigint not null default 0,
  mode               varchar(255) not null default '',
  sink               mediumtext not null default (''),
  version            varchar(255) not null default '',
  started_at         datetime(6) not null,
  heartbeat_at       datetime(6) not null,
  heartbeat_every_ms bigint not null default 5000,
  sink_down_since    datetime(6),
  sink_error         mediumtext not null default (''),
  primary key (relay_id),
  constraint {prefix}relay_presence_every check (heartbeat_every_ms > 0)
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin;
