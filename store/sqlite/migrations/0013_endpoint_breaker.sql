-- Numbered and named like the PostgreSQL store's migration 0013:
-- endpoints.breaker_open_until (Unix microseconds, as failing_since) is
-- when the circuit breaker of the endpoint's lane lets its next probe
-- through, as the relay running the lane last recorded it
-- (store.Endpoint.BreakerOpenUntil); null while the breaker is closed.
-- The breaker lives in the relay process: this column is what postbox
-- status, a process of its own, shows of it. A relay that stopped leaves
-- its last value; the next lane of the endpoint clears it.
alter table {prefix}endpoints
  add column breaker_open_until integer;
