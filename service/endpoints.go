package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// EndpointsConfig configures endpoints mode (see package endpoint and
// docs/endpoints.md): the settings of `postbox relay --endpoints` that are
// not RelayConfig.Relay's. Only Store is required; a zero field takes
// endpoint.SupervisorConfig's default.
type EndpointsConfig struct {
	// Store holds the endpoints, their deliveries and the attempts log:
	// the outbox's store. Required.
	Store store.Endpoints
	// Keyring opens the endpoints' sealed secrets
	// (endpoint.SupervisorConfig.Keyring). Required.
	Keyring *keyring.Keyring
	// Signature is the scheme every endpoint's requests are signed in,
	// each with the endpoint's own secret (default signature.Standard).
	Signature signature.Scheme
	// Timeout bounds each request, or a broker endpoint's publish, and the
	// opening of a broker endpoint's sink (webhook.TimeoutDefault when
	// zero).
	Timeout time.Duration
	// Kinds are the sinks other than webhooks an endpoint's URL may name
	// (endpoint.SupervisorConfig.Kinds: the program's list, such as
	// nats.URL, amqp.URL and kafka.URL, with the URL parameters of each as
	// postbox relay --sink takes them). Nil: endpoints are webhooks only
	// (http and https URLs).
	Kinds []sink.URLKind
	// Guard is the SSRF guard every http or https endpoint's deliveries go
	// through, at connect time (a broker endpoint's address is the
	// operator's, as a relay's --sink is): it refuses loopback, private, link-local and the
	// other special addresses but those it allows (guard.Config); an
	// endpoint added with AllowPrivate (postbox endpoints add
	// --allow-private) gets it with AllowPrivate set.
	Guard guard.Config
	// BreakerFailures, DisableAfter and Retention (of the attempts log,
	// dropped and kept deliveries) are endpoint.SupervisorConfig's.
	BreakerFailures int
	DisableAfter    time.Duration
	Retention       time.Duration
	// DirectWithin is endpoint.SupervisorConfig.DirectWithin: the fan-out delivers
	// directly to the idle endpoints that answer within it; negative: every
	// delivery is written first, as it always is when RelayConfig.Relay's
	// Retention keeps delivered events.
	DirectWithin time.Duration
	// OperatorEvents, when set, has endpoints mode write operator events
	// (endpoint.SupervisorConfig.OperatorEvents: postbox.endpoint.failing,
	// .recovered, .disabled, postbox.deadletters.grew) into the outbox,
	// RelayConfig.Outbox unless its Outbox is set, so that the relay
	// delivers them to the endpoints subscribed to them; its zero fields
	// take endpoint.OperatorEventsConfig's defaults. Nil: none.
	OperatorEvents *endpoint.OperatorEventsConfig
}

// endpointsMode is the supervisor of the endpoints' lanes, whose fan-out
// is the sink of the relay over the outbox.
type endpointsMode struct {
	supervisor *endpoint.Supervisor
	logger     *slog.Logger
	// operatorEvents is set when the supervisor writes operator events.
	operatorEvents bool
}

// newEndpointsMode checks the outbox's tables, reads the endpoints, builds
// the supervisor and logs what endpoints mode will do; prom, when not nil,
// observes each lane under its endpoint's label.
func newEndpointsMode(ctx context.Context, cfg RelayConfig, prom *observe.Prometheus) (*endpointsMode, error) {
	c, log := cfg.Endpoints, cfg.Relay.Logger
	if c.Store == nil {
		return nil, &ConfigError{Field: "Endpoints", Err: errors.New("Store is required")}
	}
	if err := cfg.Outbox.CheckSchema(ctx, store.SchemaParams{Ordered: cfg.Relay.Ordered}); err != nil {
		return nil, err
	}
	all, err := c.Store.EndpointList(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the endpoints: %w", err)
	}
	timeout := cmp.Or(c.Timeout, webhook.TimeoutDefault)
	client, err := guardedClients(c.Guard, timeout)
	if err != nil {
		return nil, err
	}
	ec := endpoint.SupervisorConfig{
		Store: c.Store, Keyring: c.Keyring, Logger: log, Relay: laneTemplate(cfg.Relay),
		Webhook: webhook.Config{Scheme: c.Signature, Timeout: timeout}, Client: client, Kinds: c.Kinds,
		BreakerFailures: c.BreakerFailures, DisableAfter: c.DisableAfter, Retention: c.Retention,
		PollInterval:  cmp.Or(cfg.Relay.PollInterval, relay.PollIntervalDefault),
		KeepDelivered: cfg.Relay.Retention != 0, DirectWithin: c.DirectWithin,
	}
	if c.OperatorEvents != nil {
		oc := *c.OperatorEvents
		if oc.Outbox == nil {
			oc.Outbox = cfg.Outbox
		}
		ec.OperatorEvents = &oc
	}
	if prom != nil {
		ec.Observer = func(e store.Endpoint) relay.Observer { return prom.Endpoint(endpointLabel(e)) }
	}
	sup, err := endpoint.New(ec)
	if err != nil {
		return nil, &ConfigError{Field: "Endpoints", Err: err}
	}
	logEndpointsMode(log, cfg, ec, all)
	return &endpointsMode{supervisor: sup, logger: log, operatorEvents: ec.OperatorEvents != nil}, nil
}

// guardedClients returns the HTTP client of each endpoint's requests: one
// through the SSRF guard g, another through g allowing private addresses
// for the endpoints added with AllowPrivate.
func guardedClients(g guard.Config, timeout time.Duration) (func(store.Endpoint) *http.Client, error) {
	strict, err := guard.New(g)
	if err != nil {
		return nil, &ConfigError{Field: "Endpoints.Guard", Err: err}
	}
	g.AllowPrivate = true
	private, err := guard.New(g)
	if err != nil {
		return nil, &ConfigError{Field: "Endpoints.Guard", Err: err}
	}
	// No client Timeout: the webhook sink bounds each request with its
	// context and sends it straight to the transport, which each lane
	// clones into a pool of its own, sized by the endpoint's concurrency.
	strictClient := &http.Client{Transport: strict.Transport(timeout)}
	privateClient := &http.Client{Transport: private.Transport(timeout)}
	return func(e store.Endpoint) *http.Client {
		if e.AllowPrivate {
			return privateClient
		}
		return strictClient
	}, nil
}

// logEndpointsMode logs what endpoints mode will do, as ec configures it
// for the endpoints all (the relay's own start lines say how it finds the
// outbox's new events), and warns when no endpoint is enabled.
func logEndpointsMode(log *slog.Logger, cfg RelayConfig, ec endpoint.SupervisorConfig, all []store.Endpoint) {
	enabled, allowedPrivate, inClear, subscribers := 0, 0, 0, 0
	byKey := map[string]int{}
	byKind := map[string]int{}
	for _, e := range all {
		switch {
		case e.Sealed.Data == nil:
			inClear++
		default:
			byKey[e.Sealed.Key]++
		}
		if e.State == store.EndpointEnabled {
			enabled++
			if slices.ContainsFunc(e.Types, endpoint.IsOperatorEvent) {
				subscribers++
			}
		}
		if e.AllowPrivate {
			allowedPrivate++
		}
		kind := "unknown"
		if k, _, err := endpoint.LookupKind(ec.Kinds, e.URL); err == nil {
			kind = k.Name
		}
		byKind[kind]++
	}
	kinds := []string{"webhook (http, https)"}
	counts := []string{fmt.Sprintf("webhook %d", byKind[webhook.URL.Name])}
	for _, k := range ec.Kinds {
		if k.Name != webhook.URL.Name {
			kinds = append(kinds, k.Name+" ("+strings.Join(k.Schemes, ", ")+")")
			counts = append(counts, fmt.Sprintf("%s %d", k.Name, byKind[k.Name]))
		}
	}
	if n := byKind["unknown"]; n > 0 {
		counts = append(counts, fmt.Sprintf("of a scheme no kind has %d (not delivered to)", n))
	}
	direct := fmt.Sprintf("to idle endpoints answering within %v (or 4 times the median endpoint's time)", cmp.Or(ec.DirectWithin, endpoint.DirectWithinDefault))
	switch {
	case ec.DirectWithin < 0:
		direct = "off (--direct-within 0): every delivery written first"
	case ec.KeepDelivered:
		direct = "off: --retention keeps delivered deliveries, so every delivery is written first"
	}
	order := "unordered"
	if cfg.Relay.Ordered {
		order = "ordered: each aggregate's events reach each endpoint in order"
	}
	log.Info("endpoints mode: the relay drains the outbox into the fan-out, which delivers directly to idle endpoints and writes one delivery for each other matching endpoint; one lane per enabled endpoint delivers those, as a relay does (its concurrency and rate are the endpoint's)",
		"store", cfg.Outbox.String(), "endpoints", len(all), "by_kind", strings.Join(counts, ", "), "kinds", strings.Join(kinds, ", "), "enabled", enabled, "allowed_private", allowedPrivate, "ssrf_guard", describeGuard(cfg.Endpoints.Guard),
		"deliveries", order, "direct_delivery", direct, "signature", ec.Webhook.Scheme, "due_poll", ec.PollInterval,
		"secrets_key", ec.Keyring.String(), "sealed_by_other_keys", sealedElsewhere(ec.Keyring, byKey),
		"breaker_failures", cmp.Or(ec.BreakerFailures, endpoint.BreakerFailuresDefault),
		"disable_after", cmp.Or(ec.DisableAfter, endpoint.DisableAfterDefault), "attempts_retention", cmp.Or(ec.Retention, endpoint.RetentionDefault),
		"operator_events", endpoint.DescribeOperatorEvents(ec.OperatorEvents), "operator_event_subscribers", subscribers)
	if ec.OperatorEvents != nil && subscribers == 0 {
		log.Info("operator events on, but no enabled endpoint subscribes to them: they are written and marked done undelivered; " +
			"postbox endpoints add --types 'postbox.endpoint.*,postbox.deadletters.*' --url ... sends them to your chat or on-call service")
	}
	if inClear > 0 {
		log.Warn("endpoints with their secrets in clear in the database (written before secrets were sealed): postbox endpoints rekey seals them",
			"endpoints", inClear)
	}
	if enabled == 0 {
		log.Warn("no enabled endpoint: events are marked done undelivered until one is added (postbox endpoints add)")
	}
}

// sealedElsewhere counts the endpoints sealed by a key that is not k's
// primary, by key id, for the start line: those keys must stay in the
// keyring until postbox endpoints rekey re-wraps them.
func sealedElsewhere(k *keyring.Keyring, byKey map[string]int) string {
	var parts []string
	for id, n := range byKey {
		if k == nil || id != k.PrimaryID() {
			parts = append(parts, fmt.Sprintf("%s %d", id, n))
		}
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// laneTemplate is endpoint.SupervisorConfig.Relay of the relay configured by c: c
// without what is the outbox relay's alone. The supervisor sets Store,
// Sink, Concurrency, Observer, Retention, DedupWindow, PollInterval,
// Stream and DisableListen per lane; Archive is the outbox's history
// alone (a lane's deliveries are copies: its store refuses a Keep); PublishBatch, which the fan-out
// takes, a lane refuses (a lane publishes one event at a time).
func laneTemplate(c relay.Config) relay.Config {
	c.Store, c.Sink, c.Observer, c.Stream, c.Archive = nil, nil, nil, nil, nil
	c.Concurrency, c.PublishBatch = 0, 0
	c.Retention, c.DedupWindow, c.PollInterval, c.DisableListen = 0, 0, 0, false
	return c
}

// describeGuard says what the guard configured by g lets through, for the
// start line.
func describeGuard(g guard.Config) string {
	switch {
	case g.AllowPrivate:
		return "on, allowing private addresses to every endpoint (--allow-private-endpoints)"
	case len(g.Allow) > 0:
		allow := ""
		for i, p := range g.Allow {
			if i > 0 {
				allow += ","
			}
			allow += p.String()
		}
		return "on, refusing private addresses but " + allow + ", except to endpoints added with --allow-private"
	}
	return "on, refusing private, loopback and link-local addresses, except to endpoints added with --allow-private"
}

// endpointLabel is the value of the endpoint label of e's metrics: its
// name, or its id when it has none.
func endpointLabel(e store.Endpoint) string {
	if e.Name != "" {
		return e.Name
	}
	return e.ID.String()
}

// run runs the supervisor beside runRelay, until runRelay returns, and
// logs the counts now and then. A supervisor that stops on an error (a
// lane that cannot start: tables not migrated, ordered claims not ready)
// stops the relay with that error.
func (e *endpointsMode) run(ctx context.Context, runRelay func(context.Context) error) error {
	ctx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	// The lanes outlive ctx: they stop once the relay has, so that the
	// fan-out's last deliveries reach them.
	dctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	var supErr error
	wg.Go(func() {
		if supErr = e.supervisor.Run(dctx); supErr != nil {
			stopRelay()
		}
	})
	wg.Go(func() {
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		var last endpoint.SupervisorStats
		for {
			select {
			case <-dctx.Done():
				return
			case <-tick.C:
				if st := e.supervisor.Stats(); st != last {
					e.log("endpoint deliveries", st)
					last = st
				}
			}
		}
	})
	err := runRelay(ctx)
	stop()
	wg.Wait()
	e.log("endpoints mode stopped", e.supervisor.Stats())
	if supErr != nil {
		return fmt.Errorf("endpoint lanes: %w", supErr)
	}
	return err
}

// register adds to reg what the lanes' and the fan-out's observers do not
// count: postbox_endpoint_unrouted_events_total,
// postbox_endpoint_filtered_total, postbox_endpoint_filter_errors_total,
// postbox_endpoint_direct_deliveries_total,
// postbox_endpoint_breaker_opened_total,
// postbox_endpoint_auto_disabled_total,
// postbox_endpoint_dropped_deliveries_total, postbox_endpoint_lanes, and
// with operator events postbox_operator_events_total{type}.
func (e *endpointsMode) register(reg prometheus.Registerer) {
	if e.operatorEvents {
		for _, c := range []struct {
			typ   string
			value func(endpoint.OperatorEventCounts) int64
		}{
			{endpoint.EventEndpointFailing, func(c endpoint.OperatorEventCounts) int64 { return c.Failing }},
			{endpoint.EventEndpointRecovered, func(c endpoint.OperatorEventCounts) int64 { return c.Recovered }},
			{endpoint.EventEndpointDisabled, func(c endpoint.OperatorEventCounts) int64 { return c.Disabled }},
			{endpoint.EventDeadLettersGrew, func(c endpoint.OperatorEventCounts) int64 { return c.DeadLettersGrew }},
		} {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "postbox", Name: "operator_events_total",
				Help:        "Operator events this relay wrote into the outbox, by type (not those another relay wrote first).",
				ConstLabels: prometheus.Labels{"type": c.typ}},
				func() float64 { return float64(c.value(e.supervisor.Stats().OperatorEvents)) }))
		}
	}
	counter := func(name, help string, value func(endpoint.SupervisorStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "postbox", Name: name, Help: help},
			func() float64 { return float64(value(e.supervisor.Stats())) })
	}
	reg.MustRegister(
		counter("endpoint_filtered_total", "Times an endpoint's content filter (--filter) turned away an event of its types.", func(s endpoint.SupervisorStats) int64 { return s.Filtered }),
		counter("endpoint_filter_errors_total", "Endpoint filter evaluations that failed (a missing key, the cost limit, a payload that is not JSON): the event is not sent to that endpoint.", func(s endpoint.SupervisorStats) int64 { return s.FilterErrors }),
		counter("endpoint_unrouted_events_total", "Events that matched no endpoint's filter: marked done undelivered.", func(s endpoint.SupervisorStats) int64 { return s.Unrouted }),
		counter("endpoint_direct_deliveries_total", "Deliveries the fan-out made directly, with no delivery written (--direct-within); counted in postbox_deliveries_total too.",
			func(s endpoint.SupervisorStats) int64 { return s.Direct }),
		counter("endpoint_breaker_opened_total", "Times an endpoint's circuit breaker opened.", func(s endpoint.SupervisorStats) int64 { return s.BreakerOpened }),
		counter("endpoint_auto_disabled_total", "Endpoints disabled for failing too long (--disable-after).", func(s endpoint.SupervisorStats) int64 { return s.AutoDisabled }),
		counter("endpoint_dropped_deliveries_total", "Deliveries of shadow endpoints that used their attempts: dropped, never dead letters (postbox_deliveries_total counts them failed, under the endpoint's label).",
			func(s endpoint.SupervisorStats) int64 { return s.Dropped }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "postbox", Name: "endpoint_lanes", Help: "Endpoint lanes delivering now: one per enabled endpoint."},
			func() float64 { return float64(e.supervisor.Stats().Lanes) }),
	)
}

func (e *endpointsMode) log(msg string, st endpoint.SupervisorStats) {
	e.logger.Info(msg, "lanes", st.Lanes, "unrouted_events", st.Unrouted, "deliveries_written", st.Written, "offered", st.Offered, "delivered_directly", st.Direct,
		"delivered", st.Delivered, "retried", st.Retried, "failed", st.Failed, "dropped", st.Dropped, "released", st.Released,
		"breaker_opened", st.BreakerOpened, "auto_disabled", st.AutoDisabled, "operator_events", st.OperatorEvents.Failing+st.OperatorEvents.Recovered+st.OperatorEvents.Disabled+st.OperatorEvents.DeadLettersGrew)
}
