-- The endpoints' lanes lease deliveries as the outbox leases events
-- (outbox_leases): a claim writes one endpoint_leases row naming the
-- deliveries it took (their event ids) and never updates them; they stay
-- 'pending', and a claim skips those that a lease of their endpoint lists.
-- A delivered delivery is deleted (or marked done when kept), a retried or
-- failed one updated once: one row version per delivery instead of three
-- (the claim's update to 'processing', the settle's), which autovacuum
-- must otherwise clean behind every claim. attempts now counts the
-- attempts that ended (as outbox_events.retries): a claim's attempt is
-- attempts + 1.
--
-- 1. The leases: one row per claim of a lane, deleted when the relay ends
--    the claim (SettleParams.Ended) or when its lease expires (reclaimed).
--    A lane reads its endpoint's rows only (endpoint_leases_endpoint_idx).
create table {schema}.endpoint_leases (
  id          bigint generated always as identity primary key,
  endpoint_id uuid not null references {schema}.endpoints (id) on delete cascade,
  owner       text not null,
  ids         uuid[] not null,
  expires_at  timestamptz not null
);
create index endpoint_leases_endpoint_idx
  on {schema}.endpoint_leases (endpoint_id);

-- 2. No delivery is 'processing' any more. A delivery that a relay of the
--    previous version was delivering when this migration ran goes back to
--    'pending', due now, its attempt counted (that relay's claim counted it
--    in attempts): it is delivered again, never lost. That relay's settle
--    of it, which looks for 'processing', changes nothing: the delivery
--    is sent again (at least once). Stop the relays of the previous
--    version in endpoints mode before migrating: one left running
--    claims as it did, unseen by this version's lanes and reclaims.
--    lease_owner and lease_expires_at stay in the table, unused (null),
--    and 'processing' in its check.
update {schema}.endpoint_deliveries
set status = 'pending', available_at = now(), lease_owner = null, lease_expires_at = null,
    last_error = coalesce(last_error, 'lease of relay ' || coalesce(lease_owner, '?') || ' ended by migration 0012')
where status = 'processing';

-- 3. The heads of the endpoints' aggregates (migration 0009) are among the
--    pending deliveries only.
create index endpoint_deliveries_aggregate_pending_idx
  on {schema}.endpoint_deliveries (endpoint_id, aggregate_type, aggregate_id, seq)
  where status = 'pending';
drop index {schema}.endpoint_deliveries_aggregate_open_idx;
