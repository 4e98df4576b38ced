-- Numbered and named like the PostgreSQL store's migration 0006: webhook
-- endpoints, their deliveries (one row per event and endpoint, with a copy of
-- the event) and the attempts log. Ids are UUID text, times DATETIME(6) in
-- UTC, JSON as in 0001. Secrets are stored in clear until sealed (migration
-- 0014): protect the database.
create table {prefix}endpoints (
  id                    char(36) character set ascii collate ascii_bin not null,
  name                  mediumtext not null default (''),
  url                   mediumtext not null,
  types                 mediumtext not null default (''),
  secret                mediumtext not null,
  previous_secret       mediumtext,
  previous_secret_until datetime(6),
  rate_per_second       double not null default 0,
  concurrency           int not null default 8,
  shadow                boolean not null default false,
  state                 varchar(16) character set ascii collate ascii_bin not null default 'enabled',
  failing_since         datetime(6),
  created_at            datetime(6) not null,
  updated_at            datetime(6) not null,
  primary key (id),
  constraint {prefix}endpoints_concurrency check (concurrency > 0),
  constraint {prefix}endpoints_state check (state in ('enabled', 'disabled', 'auto_disabled'))
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin;

create table {prefix}endpoint_deliveries (
  seq              bigint not null auto_increment,
  event_id         char(36) character set ascii collate ascii_bin not null,
  endpoint_id      char(36) character set ascii collate ascii_bin not null,
  aggregate_type   mediumtext not null default (''),
  aggregate_id     mediumtext not null default (''),
  event_type       mediumtext not null,
  payload          json not null,
  headers          json not null default ('{}'),
  status           varchar(16) character set ascii collate ascii_bin not null default 'pending',
  attempts         int not null default 0,
  available_at     datetime(6) not null,
  lease_owner      varchar(255),
  lease_expires_at datetime(6),
  last_error       mediumtext,
  created_at       datetime(6) not null,
  processed_at     datetime(6),
  primary key (seq),
  unique key {prefix}endpoint_deliveries_event_endpoint_uq (event_id, endpoint_id),
  key {prefix}endpoint_deliveries_pending_idx (endpoint_id, status, available_at, seq),
  key {prefix}endpoint_deliveries_endpoint_idx (endpoint_id, status, seq),
  constraint {prefix}endpoint_deliveries_endpoint_fk foreign key (endpoint_id)
    references {prefix}endpoints (id) on delete cascade,
  constraint {prefix}endpoint_deliveries_status
    check (status in ('pending', 'processing', 'done', 'failed', 'dropped'))
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin;

create table {prefix}endpoint_attempts (
  id          bigint not null auto_increment,
  endpoint_id char(36) character set ascii collate ascii_bin not null,
  event_id    char(36) character set ascii collate ascii_bin not null,
  event_type  mediumtext not null default (''),
  attempt     int not null,
  status_code int not null default 0,
  duration_us bigint not null default 0,
  response    mediumtext not null default (''),
  error       mediumtext not null default (''),
  at          datetime(6) not null,
  -- An attempt made at a time DATETIME cannot hold (a clock gone wrong)
  -- keeps the first or the last time it holds, and says where it was: -1
  -- before year 1, 1 after year 9999 (0: at is the attempt's time).
  at_range    tinyint not null default 0,
  primary key (id),
  key {prefix}endpoint_attempts_endpoint_idx (endpoint_id, id),
  constraint {prefix}endpoint_attempts_endpoint_fk foreign key (endpoint_id)
    references {prefix}endpoints (id) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin;
