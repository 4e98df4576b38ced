// Package endpoint delivers outbox events to many endpoints, each
// receiving the event types its filter matches, each failing on its own,
// through one delivery engine: package relay. An endpoint is a webhook (an
// http or https URL), or any other sink the program offers
// (SupervisorConfig.Kinds: a nats://, amqp:// or kafka:// URL with the
// parameters of postbox relay --sink), so that one event fans out to a mix
// of them.
//
// Endpoints mode (postbox relay --endpoints) has two stages:
//
//   - The FanOut (Supervisor.FanOut) is the sink of the relay that drains
//     the outbox. It offers each event directly to the lanes of the
//     matching endpoints measured fast (relay.Relay.Offer: the
//     lane's own sink chain, retry policy and observer; see direct.go and
//     SupervisorConfig.DirectWithin), and writes one delivery for each other
//     matching endpoint and each offer that did not deliver, as the lane's
//     settle would have left it (store.Endpoints.DeliveryInsert:
//     idempotent, keyed by event and endpoint, a copy of the event; a whole
//     batch in one statement, as a sink.BatchSink). Then it reports the
//     event published, so the outbox event is done. An event no endpoint
//     wants is done too, and counted (FanOut.Unrouted). It wakes the lanes
//     it wrote for.
//   - Each enabled endpoint is a lane: a relay.Relay of its own over the
//     endpoint's deliveries (store.Endpoints.EndpointLane), with the
//     relay's claims, leases and their renewal, settle batching, outage
//     probing, backoff, Retry-After, dead letters (postbox failed), observer
//     and tracing, configured by SupervisorConfig.Relay as a relay is. With
//     Relay.Ordered each endpoint receives each aggregate's events in order,
//     one endpoint's failures holding back only its own lane.
//
// The Supervisor reads the endpoints every SupervisorConfig.RefreshEvery: it starts a
// lane for each enabled endpoint, stops the lanes of endpoints disabled or
// removed (deliveries in flight end, the rest go back to the queue), and
// restarts a lane whose settings changed (URL, secrets, a rotation's grace
// period that ended, rate, concurrency, shadow, allow-private). Lanes do not
// poll the database each on its own: every SupervisorConfig.PollInterval one query
// (store.Endpoints.DeliveryDue) finds the lanes with deliveries due, written
// by other processes or retried by other relays, and wakes them; a lane's
// relay wakes itself for the retries it scheduled.
//
// A lane's sink is the endpoint's own sink (OpenSink) inside middleware.
// For an http or https URL it is a webhook sink (package sink/webhook,
// SupervisorConfig.Webhook as template, signed with the endpoint's secrets:
// during a rotation the old one too, until its grace period ends; the HTTP
// client of SupervisorConfig.Client, the SSRF-guarded one in postbox
// relay). For another URL it is the sink its kind opens: one connection
// (or client) per lane, opened before the lane starts and closed when it
// ends; a broker that cannot be reached then holds back only that lane,
// tried again at every refresh. The middleware, for every kind:
//
//   - a circuit breaker: after SupervisorConfig.BreakerFailures failed attempts in a
//     row, the endpoint counts as unreachable (sink.Unavailable): the lane
//     probes it with one event at a time, counting no attempt, and the
//     breaker lets the first probe through after a pause that grows from
//     BreakerPauseMin to BreakerPauseMax;
//   - a token-bucket rate limit (store.Endpoint.RatePerSecond);
//   - the attempts log: every attempt with its status code, duration, the
//     start of the answer and the error (a broker's attempts have no status
//     code nor answer: 0 and empty), written in batches
//     (store.Endpoints.AttemptInsert), kept for SupervisorConfig.Retention;
//   - the endpoint's health: the start of a run of failures is recorded
//     (store.Endpoints.EndpointFailing), and an endpoint whose attempts all
//     failed for SupervisorConfig.DisableAfter is disabled (store.EndpointAutoDisabled)
//     and its lane stopped; its deliveries wait, and enabling it delivers
//     them.
//
// With SupervisorConfig.OperatorEvents the supervisor reports what
// happens to the endpoints as events of its own, written into the outbox
// the relay drains (store.Outbox.Enqueue): EventEndpointFailing (every
// attempt failed for a while, not at the first failure),
// EventEndpointRecovered, EventEndpointDisabled, and EventDeadLettersGrew
// (a dead-letter group of the outbox or of an endpoint grew past a
// threshold), each once per transition whichever relay of several sees it
// (its id and dedup key derived from the transition), its payload an
// OperatorEvent. They reach the endpoints subscribed to them by name:
// an event whose type begins with "postbox." goes only to the endpoints
// whose types hold a glob that begins with "postbox." too (Matches), and
// never to the endpoint it is about.
//
// An endpoint that cannot be reached at all (a connection refused, a name
// that does not resolve) is an outage of its lane, as for a relay: no
// attempt counts, and no delivery is dead-lettered for it. A connection the
// SSRF guard (webhooks only) refuses is a permanent failure whose error
// says so, whole. An event an endpoint's sink refuses fails its delivery at
// the first attempt, as the sink's kind would for a relay: for a webhook, a
// header that is not valid HTTP, one that would set credentials or the
// transport (see webhook.TransportHeader), or a payload over the webhook's
// MaxMessageBytes. Shadow endpoints never
// dead-letter: a delivery that used its attempts is dropped
// (store.StatusDropped) and counted (SupervisorStats.Dropped).
package endpoint
