-- Numbered and named like the PostgreSQL store's migration 0009: endpoints
-- mode as lanes of the relay (store.Endpoints.EndpointLane).
--
-- 1. endpoints.allow_private (0 or 1, as shadow): the endpoint may be
--    delivered to loopback, private and link-local addresses, which the
--    SSRF guard refuses otherwise (store.Endpoint.AllowPrivate).
alter table {prefix}endpoints
  add column allow_private integer not null default 0;

-- 2. The heads of an endpoint's aggregates, for its lane's ordered claims:
--    the lowest seq among the endpoint's pending or processing deliveries
--    of an aggregate, one index probe per aggregate.
create index {prefix}endpoint_deliveries_aggregate_open_idx
  on {prefix}endpoint_deliveries (endpoint_id, aggregate_type, aggregate_id, seq)
  where status in ('pending', 'processing');
