package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/relay/presence"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// RelayConfig is what a Relay runs: the pieces the caller opened (stores,
// a sink) and their settings. Outbox, and one of Sink and Endpoints, are
// required.
type RelayConfig struct {
	// Outbox is what the relay drains. Required.
	Outbox store.Outbox
	// Sink publishes the events: sink mode. Give Sink or Endpoints, not
	// both.
	Sink sink.Sink
	// Endpoints, when set, is endpoints mode: the relay publishes into the
	// fan-out to the webhook endpoints of Endpoints.Store.
	Endpoints *EndpointsConfig
	// Relay configures the relay over the outbox; its zero fields take
	// relay.Config's defaults. NewRelay sets Store (Outbox) and Sink (Sink,
	// or the fan-out), which must be left nil, and composes Observer with
	// the metrics' and the presence heartbeat's (relay.Observers). Its
	// Logger (slog.Default() when nil) receives every line of the
	// service: the relay's, the lanes', the heartbeat's.
	//
	// In endpoints mode it is also the template of every endpoint's lane
	// (endpoint.SupervisorConfig.Relay): Lease, BackoffMin and BackoffMax,
	// MaxAttempts, RejectedAttempts, ProbeInterval, BatchSize,
	// ClaimBytes, Ordered, ShutdownTimeout, Tracer and Owner apply to each
	// lane too; Concurrency, PublishBatch, DisableListen, Stream,
	// DedupWindow, Archive and Observer are the outbox relay's alone (each lane has
	// its endpoint's concurrency, and the observer of Metrics under the
	// endpoint's label). PollInterval is also how often one query looks
	// for the lanes' due deliveries, and a Retention other than 0
	// (delivered events kept) keeps the endpoints' delivered deliveries
	// too, until Endpoints.Retention. The outbox relay's Owner is the
	// supervisor's, so that the lanes' leases name the same process.
	Relay relay.Config
	// Archive, when set, is where retention keeps delivered events before
	// it removes them from the outbox: Relay.Archive is set to its Keep
	// (the relay over the outbox only: an endpoint's deliveries are copies
	// of the outbox's events, not history). It needs a positive
	// Relay.Retention, and Relay.Archive left nil. NewRelay logs it (its
	// String, never a credential); closing it, once Run returned, is the
	// caller's.
	Archive *archive.Archive
	// Presence, when set, keeps the relay's row in the presence table
	// while it runs.
	Presence *PresenceConfig
	// Metrics, when set, receives the Prometheus metrics of the relay (see
	// package observe), of endpoints mode (postbox_endpoint_*) and
	// postbox_relay_ready: a registry of the caller's, which serves them
	// with observe.Handler(registry, Relay.Health()). They are registered
	// by NewRelay; a NewRelay that fails may have registered some.
	Metrics prometheus.Registerer
	// MetricsSample is how often the outbox's counts are sampled for
	// Metrics, one query each time (observe.SampleEveryDefault when zero).
	MetricsSample time.Duration
}

// PresenceConfig configures the relay's row in the presence table (see
// package relay/presence). Only Store is required.
type PresenceConfig struct {
	// Store holds the presence table: the outbox's store, in which postbox
	// status looks. Required.
	Store store.Presence
	// Sink describes the sink in the row, without credentials (see
	// sink.Describe). Default: the sink's String in sink mode, "endpoints
	// from the database" in endpoints mode.
	Sink string
	// Secrets are texts that must never reach the row (a sink's password,
	// its URL's query: sink.Describe returns them): a sink error quoting
	// one is written with "…" in its place.
	Secrets []string
	// Version is the relay's version, as the row shows it.
	Version string
	// Every is how often the row is renewed (presence.EveryDefault when
	// zero; at most presence.EveryMax).
	Every time.Duration
}

// endpointsSinkDesc describes the sink of endpoints mode in the presence
// table.
const endpointsSinkDesc = "endpoints from the database"

// ConfigError is how NewRelay refuses a RelayConfig, before anything runs:
// the caller's mistake, which no retry mends.
type ConfigError struct {
	// Field names the RelayConfig field at fault: "Outbox", "Sink",
	// "Relay", "Archive", "Endpoints", "Endpoints.Guard", "Presence", "Metrics",
	// "MetricsSample".
	Field string
	// Err says why: for "Relay", "Endpoints" and "Presence", the error
	// of relay.New, endpoint.New or presence.New, which names the fields
	// of their own Config.
	Err error
}

func (e *ConfigError) Error() string { return "service: RelayConfig." + e.Field + ": " + e.Err.Error() }

func (e *ConfigError) Unwrap() error { return e.Err }

// Relay is what `postbox relay` runs: the relay over the outbox and, as
// its RelayConfig asks, the endpoints' supervisor, the presence heartbeat
// and the outbox sampler. Create it with NewRelay and run it once with
// Run.
type Relay struct {
	relay     *relay.Relay
	endpoints *endpointsMode         // nil in sink mode
	heartbeat *presence.Heartbeat    // nil without RelayConfig.Presence
	sampler   *observe.OutboxSampler // nil without RelayConfig.Metrics
	started   atomic.Bool
}

// NewRelay validates cfg and builds what it asks for; in endpoints mode
// it checks that the outbox's tables are migrated (ordered, with
// Relay.Ordered), reads the endpoints and logs what endpoints mode will do;
// it logs what retention will do (how long delivered events are kept, and
// where they are archived); the relay logs the rest when it starts: how it
// finds new events, which sink, which store. A RelayConfig that cannot run is refused with a
// *ConfigError; the other errors are the database's.
func NewRelay(ctx context.Context, cfg RelayConfig) (*Relay, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Relay.Logger == nil {
		cfg.Relay.Logger = slog.Default()
	}
	r := &Relay{}
	var prom *observe.Prometheus
	if cfg.Metrics != nil {
		var err error
		if prom, r.sampler, err = newMetrics(cfg); err != nil {
			return nil, err
		}
	}
	rc := cfg.Relay
	rc.Store, rc.Sink = cfg.Outbox, cfg.Sink
	if cfg.Archive != nil {
		rc.Archive = cfg.Archive.Keep
	}
	var observer relay.Observer
	if prom != nil {
		observer = prom.Relay()
	}
	if cfg.Endpoints != nil {
		e, err := newEndpointsMode(ctx, cfg, prom)
		if err != nil {
			return nil, err
		}
		r.endpoints = e
		rc.Sink = e.supervisor.FanOut()
		rc.Owner = e.supervisor.Owner() // the lanes' leases name the same process
		if prom != nil {
			observer = prom.FanOut()
			e.register(cfg.Metrics)
		}
	}
	if cfg.Presence != nil {
		hb, err := newHeartbeat(cfg)
		if err != nil {
			return nil, &ConfigError{Field: "Presence", Err: err}
		}
		r.heartbeat = hb
	}
	var heartbeat relay.Observer // nil without Presence: a nil *Heartbeat in the interface would be called
	if r.heartbeat != nil {
		heartbeat = r.heartbeat
	}
	rc.Observer = relay.Observers(cfg.Relay.Observer, observer, heartbeat)
	rl, err := relay.New(rc)
	if err != nil {
		return nil, &ConfigError{Field: "Relay", Err: err}
	}
	r.relay = rl
	logRetention(cfg)
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "postbox", Name: "relay_ready",
			Help: "1 while the relay runs and its last claim succeeded (relay.Ready), 0 otherwise.",
		}, func() float64 {
			if rl.Ready() {
				return 1
			}
			return 0
		}))
	}
	return r, nil
}

// newMetrics registers on cfg.Metrics the relay's metrics (package
// observe) and the outbox's gauges, and returns them and the sampler that
// fills the gauges.
func newMetrics(cfg RelayConfig) (*observe.Prometheus, *observe.OutboxSampler, error) {
	prom, err := observe.NewPrometheus(cfg.Metrics, observe.Options{})
	if err != nil {
		return nil, nil, &ConfigError{Field: "Metrics", Err: err}
	}
	sampler, err := prom.NewOutboxSampler(cfg.Outbox, observe.SamplerConfig{Every: cfg.MetricsSample})
	if err != nil {
		return nil, nil, &ConfigError{Field: "MetricsSample", Err: err}
	}
	return prom, sampler, nil
}

// check refuses a RelayConfig that names no outbox, or not one sink.
func (c *RelayConfig) check() error {
	switch {
	case c.Outbox == nil:
		return &ConfigError{Field: "Outbox", Err: errors.New("required")}
	case c.Sink == nil && c.Endpoints == nil:
		return &ConfigError{Field: "Sink", Err: errors.New("required, unless Endpoints is set")}
	case c.Sink != nil && c.Endpoints != nil:
		return &ConfigError{Field: "Sink", Err: errors.New("give Sink or Endpoints, not both")}
	case c.Relay.Store != nil || c.Relay.Sink != nil:
		return &ConfigError{Field: "Relay", Err: errors.New("leave Store and Sink nil: NewRelay sets them from Outbox and Sink")}
	case c.Archive != nil && c.Relay.Archive != nil:
		return &ConfigError{Field: "Archive", Err: errors.New("give Archive or Relay.Archive, not both")}
	case c.Archive != nil && c.Relay.Retention <= 0:
		return &ConfigError{Field: "Archive", Err: fmt.Errorf("needs a positive Relay.Retention (%v: delivered events are otherwise deleted when delivered, or never)", c.Relay.Retention)}
	}
	return nil
}

// logRetention logs what retention will do with delivered events, as cfg
// (checked) sets it: deleted when delivered, kept for ever, or kept for
// Relay.Retention and then deleted, archived first with an Archive (or a
// Relay.Archive of the caller's).
func logRetention(cfg RelayConfig) {
	log, keep := cfg.Relay.Logger, cfg.Relay.Retention
	archived := "none"
	switch {
	case cfg.Archive != nil:
		archived = cfg.Archive.String()
	case cfg.Relay.Archive != nil:
		archived = "Relay.Archive"
	}
	switch {
	case keep == 0:
		log.Info("retention: delivered events are deleted once delivered", "retention", keep, "archive", archived)
	case keep < 0:
		log.Info("retention: delivered events are kept, marked done, for ever", "retention", keep, "archive", archived)
	case archived == "none":
		log.Info(fmt.Sprintf("retention %v: delivered events are kept, marked done, then deleted (checked at start, then every minute)", keep),
			"retention", keep, "archive", archived)
	default:
		log.Info(fmt.Sprintf("retention %v, archive %s: delivered events are kept, marked done, then archived and deleted (checked at start, then every minute)", keep, archived),
			"retention", keep, "archive", archived)
	}
}

// newHeartbeat is the presence heartbeat cfg.Presence asks for: its mode
// is the relay's (endpoints, WAL, or listening and polling as the relay's
// Stats say).
func newHeartbeat(cfg RelayConfig) (*presence.Heartbeat, error) {
	p := cfg.Presence
	mode, desc := "", p.Sink
	switch {
	case cfg.Endpoints != nil:
		mode = presence.ModeEndpoints
	case cfg.Relay.Stream != nil:
		mode = presence.ModeWAL
	}
	if desc == "" {
		desc = endpointsSinkDesc
		if cfg.Sink != nil {
			desc = cfg.Sink.String()
		}
	}
	return presence.New(presence.Config{Store: p.Store, Sink: desc, Mode: mode, Version: p.Version,
		Secrets: p.Secrets, Every: p.Every, Logger: cfg.Relay.Logger})
}

// Run runs the relay until ctx ends, then stops it gracefully (see
// relay.Relay.Run) and returns nil; it returns an error when the relay
// cannot start (tables not migrated, a stream that fails its check), or,
// in endpoints mode, when the endpoints' lanes cannot. The order is the
// command's: the outbox sampler first; in endpoints mode the supervisor
// of the lanes, which the fan-out feeds; then the presence row, written
// before the relay starts and deleted once it stopped; the supervisor
// stops after the relay, so that the fan-out's last events reach their
// lanes. Run once.
func (r *Relay) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("service: Relay.Run called twice")
	}
	if r.sampler != nil {
		sampleCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		var sampling sync.WaitGroup
		sampling.Go(func() { r.sampler.Run(sampleCtx) })
		defer sampling.Wait()
		defer stop()
	}
	if r.endpoints != nil {
		return r.endpoints.run(ctx, r.runWithPresence)
	}
	return r.runWithPresence(ctx)
}

// runWithPresence runs the relay while the heartbeat, if any, keeps its
// row, and deletes the row once the relay has stopped.
func (r *Relay) runWithPresence(ctx context.Context) error {
	if r.heartbeat == nil {
		return r.relay.Run(ctx)
	}
	// The heartbeat outlives ctx: it deletes the row once the relay has
	// stopped, not while its last deliveries finish.
	hbCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var beating sync.WaitGroup
	beating.Go(func() { r.heartbeat.Run(hbCtx, r.relay) })
	err := r.relay.Run(ctx)
	stop()
	beating.Wait()
	return err
}

// Ready reports whether the relay delivers: it runs and its last claim
// succeeded (relay.Relay.Ready).
func (r *Relay) Ready() bool { return r.relay.Ready() }

// Failing reports whether the relay's last claim failed
// (relay.Relay.Failing).
func (r *Relay) Failing() bool { return r.relay.Failing() }

// Health is what GET /healthz checks (observe.Handler): the relay is
// Ready and, with RelayConfig.Metrics, the outbox was sampled lately.
func (r *Relay) Health() observe.Health {
	return observe.Health{Ready: r.relay.Ready, Outbox: r.sampler}
}

// Leave deletes the relay's presence row now, within ctx, and no beat
// writes it again: for a process about to exit before Run returned (a
// second signal), so that postbox status does not show the relay stale.
// It does nothing without RelayConfig.Presence.
func (r *Relay) Leave(ctx context.Context) {
	if r.heartbeat != nil {
		r.heartbeat.Leave(ctx)
	}
}
