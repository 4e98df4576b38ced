package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/guard"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// guardFlags are the SSRF guard's flags.
type guardFlags struct {
	allowPrivate bool
	allow        prefixList
}

func (g *guardFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&g.allowPrivate, "allow-private-endpoints", false, "let endpoint deliveries reach loopback, private and link-local addresses (internal endpoints)")
	fs.Var(&g.allow, "allow-cidr", "comma-separated CIDRs endpoint deliveries may reach although private, such as 10.1.0.0/16")
}

// transport returns the HTTP transport of deliveries to e, whose dialer
// refuses loopback, private, link-local, CGNAT, unique-local, multicast
// and other special addresses at connect time (after DNS, so rebinding
// cannot get round it) unless the flags or e.AllowPrivate allow them. It
// keeps as many idle connections to e as e's concurrency.
func (g *guardFlags) transport(e store.Endpoint, timeout time.Duration) (*http.Transport, error) {
	gd, err := guard.New(guard.Config{AllowPrivate: g.allowPrivate || e.AllowPrivate, Allow: g.allow})
	if err != nil {
		return nil, fmt.Errorf("%w: SSRF guard: %v", errUsage, err)
	}
	t := gd.Transport(timeout)
	t.MaxIdleConnsPerHost = max(e.Concurrency, http.DefaultMaxIdleConnsPerHost)
	return t, nil
}

// endpointClient is an http.Client on transport(e, timeout), whose whole
// requests are bounded by timeout.
func (g *guardFlags) endpointClient(e store.Endpoint, timeout time.Duration) (*http.Client, error) {
	t, err := g.transport(e, timeout)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: t, Timeout: timeout}, nil
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
}

func (e *endpointsFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&e.on, "endpoints", false, "deliver to the webhook endpoints in the database (postbox endpoints add): each event fans out into one delivery per matching endpoint, delivered per endpoint")
	e.guard.register(fs)
	fs.DurationVar(&e.disableAfter, "disable-after", endpoint.DisableAfterDefault, "with --endpoints: disable an endpoint whose attempts all failed for this long")
	fs.DurationVar(&e.retention, "attempts-retention", endpoint.RetentionDefault, "with --endpoints: how long attempts and delivered rows are kept")
	fs.IntVar(&e.breaker, "breaker-failures", endpoint.BreakerFailuresDefault, "with --endpoints: consecutive failures that pause an endpoint")
}

// endpointsRelay is endpoints mode: the relay's sink (the fan-out) and the
// supervisor of the endpoints' lanes that runs beside it.
type endpointsRelay struct {
	fanOut     *endpoint.FanOut
	supervisor *endpoint.Supervisor
	logger     *slog.Logger
}

// newEndpointsRelay builds the supervisor on s, and logs what the relay
// will do.
func newEndpointsRelay(ctx context.Context, s store.Endpoints, f endpointsFlags, opts sinkOptions, lease time.Duration, maxAttempts int, backoffMin, backoffMax time.Duration) (*endpointsRelay, error) {
	guardText := f.guard.describe()
	client, err := f.guard.endpointClient(store.Endpoint{}, opts.timeout)
	if err != nil {
		return nil, err
	}
	// The client of the endpoints allowed private addresses (AllowPrivate).
	private := f.guard
	private.allowPrivate = true
	privateClient, _, err := private.client(opts.timeout)
	if err != nil {
		return nil, err
	}
	all, err := s.EndpointList(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the endpoints: %w", err)
	}
	enabled := 0
	for _, e := range all {
		if e.State == store.EndpointEnabled {
			enabled++
		}
	}
	sup, err := endpoint.New(endpoint.Config{
		Store: s, Logger: opts.logger,
		Client: func(e store.Endpoint) *http.Client {
			if e.AllowPrivate {
				return privateClient
			}
			return client
		},
		Relay:           relay.Config{Logger: opts.logger, Lease: lease, MaxAttempts: maxAttempts, BackoffMin: backoffMin, BackoffMax: backoffMax},
		Webhook:         webhook.Config{Timeout: opts.timeout},
		BreakerFailures: f.breaker, DisableAfter: f.disableAfter, Retention: f.retention,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	opts.logger.Info("endpoints mode: each event fans out into one delivery per matching endpoint, then each endpoint's lane delivers its own",
		"endpoints", len(all), "enabled", enabled, "ssrf_guard", guardText,
		"disable_after", f.disableAfter, "attempts_retention", f.retention)
	if enabled == 0 {
		opts.logger.Warn("no enabled endpoint: events are marked done undelivered until one is added (postbox endpoints add)")
	}
	return &endpointsRelay{fanOut: sup.FanOut(), supervisor: sup, logger: opts.logger}, nil
}

// run runs the supervisor beside runRelay, until runRelay returns, and
// logs the counts now and then.
func (e *endpointsRelay) run(ctx context.Context, runRelay func(context.Context) error) error {
	dctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.supervisor.Run(dctx); err != nil {
			e.logger.Error("endpoint lanes stopped", "error", err)
		}
	})
	wg.Go(func() {
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		var last endpoint.Stats
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
	return err
}

// register adds endpoints mode's counts to the --metrics-addr registry:
// postbox_endpoint_unrouted_events_total, postbox_endpoint_deliveries_total
// by outcome (delivered, retry, failed, dropped),
// postbox_endpoint_breaker_opened_total and
// postbox_endpoint_auto_disabled_total.
func (e *endpointsRelay) register(reg prometheus.Registerer) {
	counter := func(name, help string, labels prometheus.Labels, value func(endpoint.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "postbox", Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(value(e.supervisor.Stats())) })
	}
	const deliveries = "endpoint_deliveries_total"
	const deliveriesHelp = "Endpoint delivery attempts by outcome: delivered, retry, failed (dead letter), dropped (a shadow endpoint's)."
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "postbox", Name: "endpoint_unrouted_events_total",
			Help: "Events that matched no endpoint's filter: marked done undelivered."},
			func() float64 { return float64(e.fanOut.Unrouted()) }),
		counter(deliveries, deliveriesHelp, prometheus.Labels{"outcome": "delivered"}, func(s endpoint.Stats) int64 { return s.Delivered }),
		counter(deliveries, deliveriesHelp, prometheus.Labels{"outcome": "retry"}, func(s endpoint.Stats) int64 { return s.Retried }),
		counter(deliveries, deliveriesHelp, prometheus.Labels{"outcome": "failed"}, func(s endpoint.Stats) int64 { return s.Failed }),
		counter(deliveries, deliveriesHelp, prometheus.Labels{"outcome": "dropped"}, func(s endpoint.Stats) int64 { return s.Dropped }),
		counter("endpoint_breaker_opened_total", "Times an endpoint's circuit breaker opened.", nil, func(s endpoint.Stats) int64 { return s.BreakerOpened }),
		counter("endpoint_auto_disabled_total", "Endpoints disabled for failing too long.", nil, func(s endpoint.Stats) int64 { return s.AutoDisabled }),
	)
}

func (e *endpointsRelay) log(msg string, st endpoint.Stats) {
	e.logger.Info(msg, "unrouted_events", e.fanOut.Unrouted(), "deliveries_written", e.fanOut.Written(),
		"delivered", st.Delivered, "retried", st.Retried, "failed", st.Failed, "dropped", st.Dropped,
		"breaker_opened", st.BreakerOpened, "auto_disabled", st.AutoDisabled)
}
