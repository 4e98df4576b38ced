-- Numbered and named like the PostgreSQL store's migration 0013:
-- endpoints.breaker_open_until is when the circuit breaker of the
-- endpoint's lane lets its next probe through, as the relay running the
-- lane last recorded it (store.Endpoint.BreakerOpenUntil); null while the
-- breaker is closed.
alter table {prefix}endpoints
  add column breaker_open_until datetime(6);
