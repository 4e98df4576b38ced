// Package chaos is the fault suite behind "postbox chaos": on a real
// PostgreSQL, in a schema of its own, producers write events (one per
// transaction, in plain SQL and through the Go API), several `postbox relay`
// processes deliver them as signed webhooks to a consumer built on the
// inbox, and faults are injected on a schedule: relays killed or paused,
// their database connections terminated, network faults between the relays
// and PostgreSQL and between the relays and the consumer (through a netfault.Proxy),
// consumer errors, timeouts and outages, and, when allowed, a crash of the
// database server. At the end the outcome is reconciled from the database:
// every event produced must have been applied exactly once, and in order
// per aggregate when the relays are ordered.
//
// In endpoints mode (Config.Endpoints) the relays run `postbox relay
// --endpoints` and deliver every event to several webhook endpoints
// registered with `postbox endpoints add`, each a consumer of its own
// (its own inbox, behind its own fault proxy, a share of its requests
// failing at random); the invariants are checked at each endpoint.
package chaos
