package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// guardFlags are the SSRF guard's flags.
type guardFlags struct {
	allowPrivate bool
	allow        prefixList
}

func (g *guardFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&g.allowPrivate, "allow-private-endpoints", false, "let every endpoint's deliveries reach loopback, private and link-local addresses (internal endpoints); to allow one endpoint only: postbox endpoints add|update --allow-private")
	fs.Var(&g.allow, "allow-cidr", "comma-separated CIDRs endpoint deliveries may reach although private, such as 10.1.0.0/16")
}

// guard returns the SSRF guard of the flags, which refuses loopback,
// private, link-local, CGNAT, unique-local, multicast and other special
// addresses at connect time (after DNS, so rebinding cannot get round it)
// unless the flags allow them, or allowPrivate (an endpoint's
// AllowPrivate) does.
func (g *guardFlags) guard(allowPrivate bool) (*guard.Guard, error) {
	gd, err := guard.New(guard.Config{AllowPrivate: g.allowPrivate || allowPrivate, Allow: g.allow})
	if err != nil {
		return nil, fmt.Errorf("%w: SSRF guard: %v", errUsage, err)
	}
	return gd, nil
}

// endpointClient is the client of endpoints test: the guard of the flags
// and of e, whole requests bounded by timeout.
func (g *guardFlags) endpointClient(e store.Endpoint, timeout time.Duration) (*http.Client, error) {
	gd, err := g.guard(e.AllowPrivate)
	if err != nil {
		return nil, err
	}
	return gd.Client(timeout), nil
}

// describe says what the guard lets through, for the start log.
func (g *guardFlags) describe() string {
	switch {
	case g.allowPrivate:
		return "on, allowing private addresses to every endpoint (--allow-private-endpoints)"
	case len(g.allow) > 0:
		return "on, refusing private addresses but " + g.allow.String() + ", except to endpoints added with --allow-private"
	}
	return "on, refusing private, loopback and link-local addresses, except to endpoints added with --allow-private"
}

// prefixList is --allow-cidr.
type prefixList []netip.Prefix

func (p *prefixList) String() string {
	s := make([]string, len(*p))
	for i, v := range *p {
		s[i] = v.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(f)
		if err != nil {
			return err
		}
		*p = append(*p, prefix.Masked())
	}
	return nil
}

// endpointsFlags are the relay's flags of endpoints mode.
type endpointsFlags struct {
	on           bool
	guard        guardFlags
	disableAfter time.Duration
	retention    time.Duration
	breaker      int
	direct       time.Duration
}

func (e *endpointsFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&e.on, "endpoints", false, "deliver to the webhook endpoints in the database (postbox endpoints add): the relay drains the outbox into a fan-out that delivers directly to idle endpoints (--direct-within) and writes one delivery for each other matching endpoint, "+
		"and one lane per enabled endpoint delivers those, with the relay's flags (--lease, --backoff-*, --max-attempts, --probe-interval, --timeout, --batch, --claim-bytes, --ordered, --signature) and the endpoint's own concurrency and rate")
	e.guard.register(fs)
	fs.DurationVar(&e.disableAfter, "disable-after", endpoint.DisableAfterDefault, "with --endpoints: disable an endpoint whose attempts all failed for this long")
	fs.DurationVar(&e.retention, "attempts-retention", endpoint.RetentionDefault, "with --endpoints: how long attempts, dropped deliveries and (with --retention) delivered ones are kept")
	fs.IntVar(&e.breaker, "breaker-failures", endpoint.BreakerFailuresDefault, "with --endpoints: consecutive failed attempts that open an endpoint's breaker: its lane then probes it, counting no attempt, as the relay does a sink it finds unreachable")
	fs.DurationVar(&e.direct, "direct-within", endpoint.DirectWithinDefault, "with --endpoints: the fan-out delivers each event directly to the matching endpoints that have no rate limit and answer within this "+
		"(or within 4 times the median endpoint's time), writing a delivery only for the others and for attempts that did not deliver; with --ordered, only to endpoints with nothing queued; "+
		"0: every delivery is written first, as it always is with --retention (a kept delivery is what stops an event published again after a crash from reaching an endpoint twice)")
}

// endpointsOnlyFlags are the relay's flags that mean something only with
// --endpoints.
var endpointsOnlyFlags = []string{"allow-private-endpoints", "allow-cidr", "disable-after", "attempts-retention", "breaker-failures", "direct-within"}

// notWithEndpoints are the relay's flags that --endpoints refuses, and why.
var notWithEndpoints = map[string]string{
	"webhook-secret": "each endpoint signs with its own secret (postbox endpoints add --secret, rotate-secret)",
}

// checkModeFlags refuses the flags given (on the command line or by their
// environment variable) that do not apply to the mode: those of
// notWithEndpoints with --endpoints, those of endpointsOnlyFlags without.
func (e *endpointsFlags) checkModeFlags(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		if why, refused := notWithEndpoints[f.Name]; refused && e.on {
			err = fmt.Errorf("%w: --%s ($%s) does not apply with --endpoints: %s", errUsage, f.Name, envName(f.Name), why)
		}
		if slices.Contains(endpointsOnlyFlags, f.Name) && !e.on {
			err = fmt.Errorf("%w: --%s ($%s) applies only with --endpoints", errUsage, f.Name, envName(f.Name))
		}
	})
	return err
}

// fanOutPublishBatchDefault is the relay's --publish-batch in endpoints
// mode: the fan-out writes the deliveries of up to this many events in one
// statement, and with --concurrency 64 two such writes run at once.
const fanOutPublishBatchDefault = 32

// endpointsRelay is endpoints mode: the supervisor of the endpoints'
// lanes, whose fan-out is the sink of the relay that drains the outbox.
type endpointsRelay struct {
	fanOut     *endpoint.FanOut
	supervisor *endpoint.Supervisor
	logger     *slog.Logger
}

// endpointsConfig is what endpoints mode takes from the relay's flags.
type endpointsConfig struct {
	// lane is the template of every lane's relay.
	lane relay.Config
	// scheme, timeout: every endpoint's webhook sink's.
	scheme  signature.Scheme
	timeout time.Duration
	// poll is the interval of the due-poll of every lane.
	poll time.Duration
	// prom, when not nil, observes each lane with its endpoint's label.
	prom *observe.Prometheus
	// keepDelivered: --retention keeps delivered events, and so the lanes
	// keep delivered deliveries (until --attempts-retention).
	keepDelivered bool
}

// newEndpointsRelay builds the supervisor on s, and logs what the relay
// will do; where names the store (its schema). The relay's own start lines
// say how it finds the outbox's new events (listening or polling).
func newEndpointsRelay(ctx context.Context, s store.Endpoints, f endpointsFlags, c endpointsConfig, where string) (*endpointsRelay, error) {
	all, err := s.EndpointList(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the endpoints: %w", err)
	}
	enabled, allowedPrivate := 0, 0
	for _, e := range all {
		if e.State == store.EndpointEnabled {
			enabled++
		}
		if e.AllowPrivate {
			allowedPrivate++
		}
	}
	strict, err := f.guard.guard(false)
	if err != nil {
		return nil, err
	}
	private, err := f.guard.guard(true)
	if err != nil {
		return nil, err
	}
	// No client Timeout: the webhook sink bounds each request with its
	// context and sends it straight to the transport, which each lane
	// clones into a pool of its own, sized by the endpoint's concurrency.
	strictClient := &http.Client{Transport: strict.Transport(c.timeout)}
	privateClient := &http.Client{Transport: private.Transport(c.timeout)}
	cfg := endpoint.SupervisorConfig{
		Store: s, Logger: c.lane.Logger, Relay: c.lane,
		Webhook: webhook.Config{Scheme: c.scheme, Timeout: c.timeout},
		Client: func(e store.Endpoint) *http.Client {
			if e.AllowPrivate {
				return privateClient
			}
			return strictClient
		},
		BreakerFailures: f.breaker, DisableAfter: f.disableAfter, Retention: f.retention, PollInterval: c.poll,
		KeepDelivered: c.keepDelivered, DirectWithin: f.direct,
	}
	direct := fmt.Sprintf("to idle endpoints answering within %v (or 4 times the median endpoint's time)", f.direct)
	switch {
	case f.direct == 0:
		cfg.DirectWithin = -1
		direct = "off (--direct-within 0): every delivery written first"
	case c.keepDelivered:
		direct = "off: --retention keeps delivered deliveries, so every delivery is written first"
	}
	if c.prom != nil {
		cfg.Observer = func(e store.Endpoint) relay.Observer { return c.prom.Endpoint(endpointLabel(e)) }
	}
	sup, err := endpoint.New(cfg)
	if err != nil {
		return nil, endpointsConfigError(err)
	}
	order := "unordered"
	if c.lane.Ordered {
		order = "ordered: each aggregate's events reach each endpoint in order"
	}
	c.lane.Logger.Info("endpoints mode: the relay drains the outbox into the fan-out, which delivers directly to idle endpoints and writes one delivery for each other matching endpoint; one lane per enabled endpoint delivers those, as a relay does (its concurrency and rate are the endpoint's)",
		"store", where, "endpoints", len(all), "enabled", enabled, "allowed_private", allowedPrivate, "ssrf_guard", f.guard.describe(),
		"deliveries", order, "direct_delivery", direct, "signature", c.scheme, "due_poll", c.poll,
		"breaker_failures", f.breaker, "disable_after", f.disableAfter, "attempts_retention", f.retention)
	if enabled == 0 {
		c.lane.Logger.Warn("no enabled endpoint: events are marked done undelivered until one is added (postbox endpoints add)")
	}
	return &endpointsRelay{fanOut: sup.FanOut(), supervisor: sup, logger: c.lane.Logger}, nil
}

// endpointsConfigError rewrites an error of endpoint.New, which names the
// fields of its Config and of the relay and webhook templates in it, as a
// usage error that names the relay's flags that set them.
func endpointsConfigError(err error) error {
	msg := strings.NewReplacer("Config.Relay: relay: Config.", "Config.", "Config.Webhook: webhook: Config.", "Config.").Replace(err.Error())
	fields := map[string]string{
		"BreakerFailures": "breaker-failures", "DisableAfter": "disable-after", "Retention": "attempts-retention", "PollInterval": "poll",
		"ClaimBytes": "claim-bytes", "Timeout": "timeout",
	}
	for field, name := range relayConfigFlags {
		if field != "Retention" && field != "PollInterval" {
			fields[field] = name
		}
	}
	return withFlagNames(errors.New(msg), fields)
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
func (e *endpointsRelay) run(ctx context.Context, runRelay func(context.Context) error) error {
	ctx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	dctx, stop := context.WithCancel(context.Background())
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

// register adds to the --metrics-addr registry what the lanes' and the
// fan-out's observers do not count: postbox_endpoint_unrouted_events_total,
// postbox_endpoint_direct_deliveries_total,
// postbox_endpoint_breaker_opened_total,
// postbox_endpoint_auto_disabled_total,
// postbox_endpoint_dropped_deliveries_total and postbox_endpoint_lanes.
func (e *endpointsRelay) register(reg prometheus.Registerer) {
	counter := func(name, help string, value func(endpoint.SupervisorStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "postbox", Name: name, Help: help},
			func() float64 { return float64(value(e.supervisor.Stats())) })
	}
	reg.MustRegister(
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

func (e *endpointsRelay) log(msg string, st endpoint.SupervisorStats) {
	e.logger.Info(msg, "lanes", st.Lanes, "unrouted_events", st.Unrouted, "deliveries_written", st.Written, "offered", st.Offered, "delivered_directly", st.Direct,
		"delivered", st.Delivered, "retried", st.Retried, "failed", st.Failed, "dropped", st.Dropped, "released", st.Released,
		"breaker_opened", st.BreakerOpened, "auto_disabled", st.AutoDisabled)
}
