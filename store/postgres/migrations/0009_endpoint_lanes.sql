-- Endpoints mode as lanes of the relay (store.Endpoints.EndpointLane).
--
-- 1. endpoints.allow_private: the endpoint may be delivered to loopback,
--    private and link-local addresses, which the SSRF guard refuses
--    otherwise (store.Endpoint.AllowPrivate).
alter table {schema}.endpoints
  add column allow_private boolean not null default false;

-- 2. The heads of an endpoint's aggregates, for its lane's ordered claims:
--    the lowest seq among the endpoint's pending or processing deliveries
--    of an aggregate, one index probe per aggregate (and the walk from one
--    aggregate to the next).
create index endpoint_deliveries_aggregate_open_idx
  on {schema}.endpoint_deliveries (endpoint_id, aggregate_type, aggregate_id, seq)
  where status in ('pending', 'processing');
