package main

import (
	"cmp"
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
)

// metricsShutdownTimeout bounds the metrics server's shutdown, after the
// relay stopped.
const metricsShutdownTimeout = 5 * time.Second

// metricsServer is the listener of --metrics-addr: GET /metrics and GET
// /healthz, on a server of its own.
type metricsServer struct {
	// reg holds the Go and process collectors, and the metrics the
	// service registers on it (service.RelayConfig.Metrics).
	reg *prometheus.Registry
	// gather, when set, is what GET /metrics serves instead of reg: reg's
	// metrics and others (the sources', sourceRegistries).
	gather prometheus.Gatherer
	ln     net.Listener
	log    *slog.Logger
}

// newMetricsServer registers the Go and process collectors on a registry
// of its own, and listens on addr; serve starts it.
func newMetricsServer(addr string, log *slog.Logger) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return &metricsServer{reg: reg, ln: ln, log: log}, nil
}

// close closes the listener of a server that did not serve (serve's stop
// closes it otherwise).
func (m *metricsServer) close() { _ = m.ln.Close() }

// serve serves until the returned function is called, which shuts the
// server down gracefully; health is what /healthz checks (the relay's,
// service.Relay.Health).
func (m *metricsServer) serve(health observe.Health) (stop func()) {
	srv := &http.Server{
		Handler:           observe.Handler(cmp.Or[prometheus.Gatherer](m.gather, m.reg), health),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
	}
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
