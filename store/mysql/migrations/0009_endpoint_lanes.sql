-- Numbered and named like the PostgreSQL store's migration 0009: endpoints
-- mode as lanes of the relay (store.Endpoints.EndpointLane).
--
-- 1. endpoints.allow_private: the endpoint may be delivered to loopback,
--    private and link-local addresses, which the SSRF guard refuses
--    otherwise (store.Endpoint.AllowPrivate).
alter table {prefix}endpoints
  add column allow_private boolean not null default false;

-- 2. The heads of an endpoint's aggregates, for its lane's ordered claims:
--    the lowest seq among the endpoint's pending deliveries of an
--    aggregate, one index probe per aggregate.
create index {prefix}endpoint_deliveries_aggregate_pending_idx
  on {prefix}endpoint_deliveries (endpoint_id, aggregate_type(64), aggregate_id(191), status, seq);
