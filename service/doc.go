// Package service runs what `postbox relay` runs, as a library: the relay
// over an outbox and what the command assembles around it, in the order the
// command starts and stops them.
//
//   - Sink mode (RelayConfig.Sink): the relay publishes the outbox's events
//     through one sink.
//   - Endpoints mode (RelayConfig.Endpoints): the relay drains the outbox
//     into the fan-out of an endpoint.Supervisor, which runs one lane per
//     enabled webhook endpoint of the database, each endpoint's requests
//     going through the SSRF guard (package sink/webhook/guard); with
//     EndpointsConfig.OperatorEvents, the supervisor writes operator
//     events (postbox.endpoint.disabled, ...) into the outbox, for the
//     endpoints subscribed to them.
//   - The relay's row in the presence table (RelayConfig.Presence, package
//     relay/presence), written at start, renewed every heartbeat and
//     deleted at a clean stop, which postbox status and the console read.
//   - Its Prometheus metrics (RelayConfig.Metrics, package observe): the
//     relay's, the fan-out's and each endpoint lane's observers, the
//     endpoints mode's counters, the outbox gauges sampled in the
//     background, postbox_relay_ready; Relay.Health is what /healthz checks.
//
// The command line only parses its flags, opens the sink and the database
// (and tracing, and the metrics listener), and calls NewRelay and
// Relay.Run; so do the demo and the examples, so that they run what ships.
//
//	r, err := service.NewRelay(ctx, service.RelayConfig{
//		Outbox:   pg.Driver(), // a store.Outbox: the PostgreSQL or the SQLite store's driver
//		Sink:     sk,
//		Presence: &service.PresenceConfig{Store: pg.Driver()},
//	})
//	if err != nil {
//		return err // a *ConfigError for a RelayConfig that cannot run
//	}
//	return r.Run(ctx) // until ctx ends, then a graceful stop
//
// What is opened is the caller's to close, once Run returned: the sink (a
// broker's connections) and the stores.
package service
