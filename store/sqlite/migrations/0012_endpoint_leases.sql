-- Numbered and named like the PostgreSQL store's migration 0012: the
-- endpoints' lanes lease deliveries as a claim of the PostgreSQL outbox
-- leases events. A claim writes one endpoint_leases row naming the
-- deliveries it took (their event ids, a JSON array) and never updates
-- them; they stay 'pending', and a claim skips those a lease of their
-- endpoint lists. A delivered delivery is deleted (or marked done when
-- kept). attempts now counts the attempts that ended: a claim's attempt is
-- attempts + 1.
--
-- 1. The leases: one row per claim of a lane, deleted when the relay ends
--    the claim (SettleParams.Ended) or when its lease expires (reclaimed).
create table {prefix}endpoint_leases (
  id          integer primary key autoincrement,
  endpoint_id text not null references {prefix}endpoints (id) on delete cascade,
  owner       text not null,
  ids         text not null check (json_valid(ids)),
  expires_at  integer not null
);
create index {prefix}endpoint_leases_endpoint_idx
  on {prefix}endpoint_leases (endpoint_id);

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
update {prefix}endpoint_deliveries
set status = 'pending',
    available_at = cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000,
    last_error = coalesce(last_error, 'lease of relay ' || coalesce(lease_owner, '?') || ' ended by migration 0012'),
    lease_owner = null, lease_expires_at = null
where status = 'processing';

-- 3. The heads of the endpoints' aggregates (migration 0009) are among the
--    pending deliveries only.
create index {prefix}endpoint_deliveries_aggregate_pending_idx
  on {prefix}endpoint_deliveries (endpoint_id, aggregate_type, aggregate_id, seq)
  where status = 'pending';
drop index {prefix}endpoint_deliveries_aggregate_open_idx;
