package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/store"
)

// metricsShutdownTimeout bounds the metrics server's shutdown, after the
// relay stopped.
const metricsShutdownTimeout = 5 * time.Second

// metricsServer is the listener of --metrics-addr: GET /metrics and GET
// /healthz, on a server of its own.
type metricsServer struct {
	reg     *prometheus.Registry
	prom    *observe.Prometheus
	sampler *observe.OutboxSampler
	ln      net.Listener
	log     *slog.Logger
}

// newMetricsServer registers the metrics and the Go and process collectors
// on a registry of its own, and listens on addr; the relay's observer is
// prom.Relay(). Serve starts it.
func newMetricsServer(addr string, in store.Inspector, every time.Duration, log *slog.Logger) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	prom, err := observe.NewPrometheus(reg, observe.Options{})
	if err != nil {
		return nil, err
	}
	sampler, err := prom.NewOutboxSampler(in, observe.SamplerConfig{Every: every})
	if err != nil {
		return nil, fmt.Errorf("%w: --metrics-sample: %v", errUsage, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return &metricsServer{reg: reg, prom: prom, sampler: sampler, ln: ln, log: log}, nil
}

// serve samples the outbox and serves until the returned function is
// called, which shuts the server down gracefully. ready is the relay's
// Ready.
func (m *metricsServer) serve(ready func() bool) (stop func()) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "postbox", Name: "relay_ready",
		Help: "1 while the relay runs and its last claim succeeded (relay.Ready), 0 otherwise.",
	}, func() float64 {
		if ready() {
			return 1
		}
		return 0
	}))
	srv := &http.Server{
		Handler:           observe.Handler(m.reg, observe.Health{Ready: ready, Outbox: m.sampler}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
	}
	ctx, cancel := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		m.sampler.Run(ctx)
	}()
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("metrics server failed", "error", err)
		}
	}()
	addr := m.ln.Addr().String()
	attrs := []any{"healthz", "http://" + addr + "/healthz"}
	if ap, err := netipAddrPort(addr); err == nil && !ap.IsLoopback() {
		attrs = append(attrs, "note", "not a loopback address: other hosts can read the metrics")
	}
	m.log.Info("metrics on http://"+addr+"/metrics", attrs...)
	return func() {
		shutdownCtx, done := context.WithTimeout(context.Background(), metricsShutdownTimeout)
		defer done()
		_ = srv.Shutdown(shutdownCtx)
		<-served
		cancel()
		<-sampled
	}
}

// netipAddrPort parses the listener's address.
func netipAddrPort(addr string) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr().Unmap(), nil
}
