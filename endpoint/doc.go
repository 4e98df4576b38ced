// Package endpoint delivers outbox events to many webhook endpoints, each
// receiving the event types its filter matches, each failing on its own.
//
// It is a two-stage pipeline, so the relay itself stays as it is:
//
//   - FanOut is the relay's sink in endpoints mode (postbox relay
//     --endpoints). Its Publish writes one delivery row per matching endpoint
//     (store.Endpoints.DeliveryInsert: idempotent, keyed by event and
//     endpoint, with a copy of the event) and returns nil, so the outbox
//     event is done at once. An event no endpoint wants is done too, and
//     counted (FanOut.Unrouted).
//   - Dispatcher delivers those rows. Every enabled endpoint has a loop of
//     its own: its own claims (leases, so several processes share the work),
//     concurrency, token-bucket rate limit, exponential backoff, attempt
//     count and dead letters, and a circuit breaker that pauses it after
//     consecutive failures (growing pauses, one probe at a time). An
//     endpoint failing for Config.DisableAfter is disabled automatically;
//     enabling it delivers what accumulated meanwhile. Shadow endpoints
//     never dead-letter: a delivery that used its attempts is dropped and
//     counted. Every attempt is written to the attempts log in batches, kept
//     for Config.Retention.
//
// Deliveries are sent by package sink/webhook, one Sink per endpoint signed
// with the endpoint's secrets (during a rotation the old one too, until its
// grace period ends). The HTTP client comes from Config.Client: postbox relay
// gives it the SSRF-guarded dialer. An event that sink refuses fails its
// delivery at the first attempt, for every endpoint alike: a header that
// is not valid HTTP, one that would set credentials or the transport
// (Authorization, Cookie, Proxy-*, Connection, Host, ...: see
// webhook.TransportHeader), which would otherwise reach every partner, or
// a payload over webhook.MaxMessageBytesDefault.
//
// A disabled endpoint receives nothing more: deliveries its loop claimed
// when it stopped go back, not attempted, and those in flight end.
package endpoint
