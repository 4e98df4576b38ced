-- Named queries of the webhook endpoints (store.Endpoints) of the
-- PostgreSQL store; "{schema}" is filled in as in queries.sql.

-- name: endpoint_create
insert into {schema}.endpoints (id, name, url, types, secret, rate_per_second, concurrency, shadow, state)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
returning created_at, updated_at;

-- name: endpoint_columns
select id, name, url, types, secret, coalesce(previous_secret, ''), previous_secret_until,
       rate_per_second, concurrency, shadow, state, failing_since, created_at, updated_at
from {schema}.endpoints

-- name: endpoint_set_state
update {schema}.endpoints
set state = $2, updated_at = now(),
    failing_since = case when $2 = 'enabled' then null else failing_since end
where id = $1;

-- name: endpoint_wake_pending
-- An enabled endpoint's accumulated deliveries are due at once.
update {schema}.endpoint_deliveries set available_at = now()
where endpoint_id = $1 and status = 'pending' and available_at > now();

-- name: endpoint_delete
delete from {schema}.endpoints where id = $1;

-- name: endpoint_rotate_secret
update {schema}.endpoints
set previous_secret = secret, previous_secret_until = $3, secret = $2, updated_at = now()
where id = $1;

-- name: endpoint_failing
update {schema}.endpoints set failing_since = coalesce(failing_since, $2)
where id = $1
returning failing_since;

-- name: endpoint_recovered
update {schema}.endpoints set failing_since = null where id = $1 and failing_since is not null;

-- name: delivery_insert
-- One pending delivery of the event per endpoint among $8 still in the
-- table, due at $7 (null: now); a delivery already written for (event,
-- endpoint) is kept.
insert into {schema}.endpoint_deliveries
  (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, headers, available_at)
select $1, e.id, $2, $3, $4, $5, $6, coalesce($7::timestamptz, now())
from {schema}.endpoints e
where e.id = any($8::uuid[])
on conflict (event_id, endpoint_id) do nothing;

-- name: delivery_claim
with picked as (
  select event_id, endpoint_id from {schema}.endpoint_deliveries
  where endpoint_id = $1 and status = 'pending' and available_at <= now()
  order by available_at, seq
  limit $2
  for update skip locked
)
update {schema}.endpoint_deliveries d
set status = 'processing', attempts = least(d.attempts, 999999999) + 1, lease_owner = $3,
    lease_expires_at = now() + $4 * interval '1 microsecond'
from picked
where d.event_id = picked.event_id and d.endpoint_id = picked.endpoint_id
returning d.event_id, d.aggregate_type, d.aggregate_id, d.event_type, d.payload, d.headers,
          d.endpoint_id, d.status, d.attempts, d.available_at, coalesce(d.last_error, ''), d.created_at;

-- name: delivery_settle
update {schema}.endpoint_deliveries
set status = $4, available_at = coalesce($5, available_at), last_error = nullif($6, ''),
    lease_owner = null, lease_expires_at = null,
    processed_at = case when $4 = 'pending' then null else now() end
where event_id = $1 and endpoint_id = $2 and lease_owner = $3 and status = 'processing';

-- name: delivery_reclaim
update {schema}.endpoint_deliveries
set status = case when attempts >= $1 then 'failed' else 'pending' end,
    last_error = 'lease expired: the dispatcher ' || lease_owner || ' stopped during the attempt',
    processed_at = case when attempts >= $1 then now() end,
    lease_owner = null, lease_expires_at = null
where status = 'processing' and lease_expires_at < now();

-- name: delivery_retry_failed
update {schema}.endpoint_deliveries d
set status = 'pending', attempts = 0, available_at = now(), processed_at = null
from (select event_id from {schema}.endpoint_deliveries
      where endpoint_id = $1 and status = 'failed' limit $2 for update skip locked) f
where d.endpoint_id = $1 and d.event_id = f.event_id;

-- name: delivery_due
select e.id from unnest($1::uuid[]) e(id)
where exists (select 1 from {schema}.endpoint_deliveries d
              where d.endpoint_id = e.id and d.status = 'pending' and d.available_at <= now());

-- name: delivery_counts
select count(*) filter (where status = 'pending'), count(*) filter (where status = 'processing'),
       count(*) filter (where status = 'done'), count(*) filter (where status = 'failed'),
       count(*) filter (where status = 'dropped')
from {schema}.endpoint_deliveries where endpoint_id = $1;

-- name: delivery_list
select event_id, aggregate_type, aggregate_id, event_type, payload, headers,
       endpoint_id, status, attempts, available_at, coalesce(last_error, ''), created_at
from {schema}.endpoint_deliveries
where endpoint_id = $1 and ($2 = '' or status = $2)
order by seq
limit $3;

-- name: attempt_insert
insert into {schema}.endpoint_attempts
  (endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at)
select * from unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::int[], $6::bigint[], $7::text[], $8::text[], $9::timestamptz[]);

-- name: attempt_list
select endpoint_id, event_id, event_type, attempt, status_code, duration_us, response, error, at
from {schema}.endpoint_attempts
where endpoint_id = $1
order by id desc
limit $2;

-- name: attempt_purge
delete from {schema}.endpoint_attempts
where id in (select id from {schema}.endpoint_attempts where at < $1 limit $2);

-- name: delivery_purge
delete from {schema}.endpoint_deliveries d
using (select event_id, endpoint_id from {schema}.endpoint_deliveries
       where status in ('done', 'dropped') and processed_at < $1 limit $2) old
where d.event_id = old.event_id and d.endpoint_id = old.endpoint_id;
