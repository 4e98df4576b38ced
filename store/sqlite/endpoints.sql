-- Named queries of the webhook endpoints (store.Endpoints) of the SQLite
-- store; "{prefix}" is the table prefix. Parameters are numbered (?1); times
-- are Unix microseconds, "now" (?9 where used) comes from the caller.

-- name: endpoint_create
insert into {prefix}endpoints (id, name, url, types, secret, rate_per_second, concurrency, shadow, state,
                               created_at, updated_at)
values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10);

-- name: endpoint_columns
select id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
       rate_per_second, concurrency, shadow, state, failing_since, created_at, updated_at
from {prefix}endpoints

-- name: endpoint_set_state
update {prefix}endpoints
set state = ?2, updated_at = ?3,
    failing_since = case when ?2 = 'enabled' then null else failing_since end
where id = ?1;

-- name: endpoint_wake_pending
update {prefix}endpoint_deliveries set available_at = ?2
where endpoint_id = ?1 and status = 'pending' and available_at > ?2;

-- name: endpoint_delete
delete from {prefix}endpoints where id = ?1;

-- name: endpoint_rotate_secret
update {prefix}endpoints
set previous_secret = secret, previous_secret_until = ?3, secret = ?2, updated_at = ?4
where id = ?1;

-- name: endpoint_failing
update {prefix}endpoints set failing_since = coalesce(failing_since, ?2)
where id = ?1
returning failing_since;

-- name: endpoint_recovered
update {prefix}endpoints set failing_since = null where id = ?1 and failing_since is not null;

-- name: delivery_insert
-- One pending delivery of the event per endpoint among the JSON array ?8
-- still in the table; a delivery already written is kept.
insert into {prefix}endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at, created_at)
select ?1, e.id, ?2, ?3, ?4, ?5, ?6, ?7, ?9
from {prefix}endpoints e
where e.id in (select value from json_each(?8))
on conflict (event_id, endpoint_id) do nothing;

-- name: delivery_claim
update {prefix}endpoint_deliveries
set status = 'processing', attempts = min(attempts, 999999999) + 1, lease_owner = ?3, lease_expires_at = ?4 + ?5
where seq in (select seq from {prefix}endpoint_deliveries
              where endpoint_id = ?1 and status = 'pending' and available_at <= ?4
              order by available_at, seq limit ?2)
returning event_id, aggregate_type, aggregate_id, event_type, payload, headers,
          endpoint_id, status, attempts, available_at, coalesce(last_error, ''), created_at, seq;

-- name: delivery_settle
update {prefix}endpoint_deliveries
set status = ?4, available_at = coalesce(?5, available_at), last_error = nullif(?6, ''),
    lease_owner = null, lease_expires_at = null,
    processed_at = case when ?4 = 'pending' then null else ?7 end
where event_id = ?1 and endpoint_id = ?2 and lease_owner = ?3 and status = 'processing';

-- name: delivery_reclaim
update {prefix}endpoint_deliveries
set status = case when attempts >= ?1 then 'failed' else 'pending' end,
    last_error = 'lease expired: the dispatcher ' || lease_owner || ' stopped during the attempt',
    processed_at = case when attempts >= ?1 then ?2 end,
    lease_owner = null, lease_expires_at = null
where status = 'processing' and lease_expires_at < ?2;

-- name: delivery_retry_failed
update {prefix}endpoint_deliveries
set status = 'pending', attempts = 0, available_at = ?3, processed_at = null
where seq in (select seq from {prefix}endpoint_deliveries
              where endpoint_id = ?1 and status = 'failed' limit ?2);

-- name: delivery_due
-- ?1 is a JSON array of endpoint ids, ?2 now.
select e.value from json_each(?1) e
where exists (select 1 from {prefix}endpoint_deliveries d
              where d.endpoint_id = e.value and d.status = 'pending' and d.available_at <= ?2);

-- name: delivery_counts
select count(*) filter (where status = 'pending'), count(*) filter (where status = 'processing'),
       count(*) filter (where status = 'done'), count(*) filter (where status = 'failed'),
       count(*) filter (where status = 'dropped')
from {prefix}endpoint_deliveries where endpoint_id = ?1;

-- name: delivery_list
select event_id, aggregate_type, aggregate_id, event_type, payload, headers,
       endpoint_id, status, attempts, available_at, coalesce(last_error, ''), created_at, seq
from {prefix}endpoint_deliveries
where endpoint_id = ?1 and (?2 = '' or status = ?2)
order by seq
limit ?3;

-- name: attempt_insert
-- The attempts are a JSON array of objects.
insert into {prefix}endpoint_attempts
  (endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at)
select value ->> 'endpoint_id', value ->> 'event_id', value ->> 'event_type', value ->> 'attempt',
       value ->> 'status_code', value ->> 'duration_us', value ->> 'response', value ->> 'error', value ->> 'at'
from json_each(?1);

-- name: attempt_list
select endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at
from {prefix}endpoint_attempts
where endpoint_id = ?1
order by id desc
limit ?2;

-- name: attempt_purge
delete from {prefix}endpoint_attempts
where id in (select id from {prefix}endpoint_attempts where at < ?1 limit ?2);

-- name: delivery_purge
delete from {prefix}endpoint_deliveries
where seq in (select seq from {prefix}endpoint_deliveries
              where status in ('done', 'dropped') and processed_at < ?1 limit ?2);
