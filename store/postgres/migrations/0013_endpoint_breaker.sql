-- endpoints.breaker_open_until: when the circuit breaker of the
-- endpoint's lane lets its next probe through, as the relay running the
-- lane last recorded it (store.Endpoint.BreakerOpenUntil); null while the
-- breaker is closed. The breaker lives in the relay process: this column
-- is what postbox status, a process of its own, shows of it. A relay that
-- stopped leaves its last value; the next lane of the endpoint clears it.
-- A nullable column without a default: no rewrite of the table.
alter table {schema}.endpoints
  add column breaker_open_until timestamptz;
