package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/postbox-go/postbox/store"
)

// endpointsGoal is the goal of the endpoints scenario: the 8 healthy
// endpoints beside a refusing and a slow one reach this share of their
// rate beside 2 more healthy ones.
const endpointsGoal = 0.9

// endpointsHealthy is how many of the scenario's 10 endpoints stay
// healthy in both phases.
const endpointsHealthy = 8

// runEndpoints measures per-endpoint isolation through `postbox relay
// --endpoints` as a child process: 10 webhook endpoints on loopback, a
// backlog of WebhookEvents/20 events, which the relay fans out to each
// endpoint and delivers. The rate of the 8 endpoints that stay healthy is
// measured twice in the run: with the other 2 healthy too, then with one of
// them refusing connections and the other answering after 2 s.
func runEndpoints(ctx context.Context, e *env, p *progress) error {
	n := max(e.cfg.WebhookEvents/20, 100)
	healthy, err := endpointsPhase(ctx, e, p, "endpoints_healthy", n, false)
	if err != nil {
		return err
	}
	faulty, err := endpointsPhase(ctx, e, p, "endpoints_faulty", n, true)
	if err != nil {
		return err
	}
	e.rep.add(ScenarioEndpoints, "endpoints.healthy", "`postbox relay --endpoints`: 8 endpoints' deliveries, beside 2 more healthy ones", healthy, UnitEventsPerSec, nil)
	e.rep.add(ScenarioEndpoints, "endpoints.faulty", "`postbox relay --endpoints`: 8 endpoints' deliveries, beside one refusing and one answering after 2 s", faulty, UnitEventsPerSec, nil)
	e.rep.add(ScenarioEndpoints, "endpoints.isolation", "isolation: the 8 healthy endpoints' rate beside faulty ones / beside healthy ones",
		faulty/healthy, UnitRatio, atLeast(endpointsGoal))
	return nil
}

// endpointsPhase fills a backlog of n events, adds 10 endpoints, starts
// `postbox relay --endpoints` and returns the rate of the 8 always healthy
// endpoints: their deliveries over the time from the relay's start until
// they all arrived (the fan-out included).
func endpointsPhase(ctx context.Context, e *env, p *progress, label string, n int, faulty bool) (v float64, err error) {
	sc, err := e.filled(ctx, p, label, n)
	if err != nil {
		return 0, err
	}
	defer e.release(ctx, sc)
	s, ok := sc.outbox().(store.Endpoints)
	if !ok {
		return 0, fmt.Errorf("bench: the %s store has no endpoints", e.b.kind())
	}
	var healthy []*receiver
	for i := range 10 {
		url, delay := "", time.Duration(0)
		switch {
		case faulty && i == endpointsHealthy:
			if url, err = refusingURL(); err != nil {
				return 0, err
			}
		case faulty && i == endpointsHealthy+1:
			delay = 2 * time.Second
		}
		if url == "" {
			rec, err := startReceiver(delay)
			if err != nil {
				return 0, err
			}
			defer rec.close()
			url = rec.url
			if i < endpointsHealthy {
				healthy = append(healthy, rec)
			}
		}
		if _, err := s.EndpointCreate(ctx, store.Endpoint{Name: "bench-" + strconv.Itoa(i), URL: url, Secret: newSecret(), Concurrency: 16}); err != nil {
			return 0, err
		}
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() { err = relayExit(parent, ctx, err) }()
	start := time.Now()
	args := append(sc.relayFlags(), "--endpoints", "--allow-private-endpoints", "--log-level", "warn")
	rp, err := e.startRelayProcess(ctx, p, args, cancel)
	if err != nil {
		return 0, err
	}
	defer func() { _, _ = rp.stop() }()
	want := int64(endpointsHealthy * n)
	for {
		var got int64
		for _, r := range healthy {
			got += r.distinct()
		}
		if got >= want {
			break
		}
		select {
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-time.After(5 * time.Millisecond):
		}
	}
	took := time.Since(start)
	if _, err := rp.stop(); err != nil {
		return 0, err
	}
	v = rate(int(want), took)
	p.printf("%s: the 8 healthy endpoints received %d events in %s: %.0f events/s", label, want, took.Round(time.Millisecond), v)
	return v, nil
}

// refusingURL is an http URL on loopback where nothing listens.
func refusingURL() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", errors.Join(errors.New("bench: free a port"), err)
	}
	return "http://" + addr + "/", nil
}
