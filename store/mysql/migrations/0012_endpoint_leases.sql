-- Numbered and named like the PostgreSQL store's migration 0012: the
-- endpoints' lanes lease deliveries as a claim of the PostgreSQL outbox
-- leases events. A claim writes one endpoint_leases row naming the
-- deliveries it took (their event ids, a JSON array) and never updates
-- them; they stay 'pending', and a claim skips those a lease of their
-- endpoint lists. A delivered delivery is deleted (or marked done when
-- kept). attempts counts the attempts that ended: a claim's attempt is
-- attempts + 1.
create table {prefix}endpoint_leases (
  id          bigint not null auto_increment,
  endpoint_id char(36) character set ascii collate ascii_bin not null,
  owner       varchar(255) not null,
  ids         json not null,
  expires_at  datetime(6) not null,
  primary key (id),
  key {prefix}endpoint_leases_endpoint_idx (endpoint_id),
  constraint {prefix}endpoint_leases_endpoint_fk foreign key (endpoint_id)
    references {prefix}endpoints (id) on delete cascade
) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin;
