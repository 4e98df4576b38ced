package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// endpointsGoal is the goal of the endpoints scenario: the 8 healthy
// endpoints beside a refusing and a slow one reach this share of their
// rate beside 2 more healthy ones.
const endpointsGoal = 0.9

// endpointsHealthy is how many of the scenario's 10 endpoints stay
// healthy in both phases.
const endpointsHealthy = 8

// runEndpoints measures per-endpoint isolation: 10 webhook endpoints on
// loopback, each sent the same WebhookEvents/20 events by an endpoint
// dispatcher with default settings. The rate of the 8 healthy ones is
// measured twice in the run: with the other 2 healthy too, then with one
// of them refusing connections and the other answering after 2 s.
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
	e.rep.add(ScenarioEndpoints, "endpoints.healthy", "8 endpoints' deliveries, beside 2 more healthy ones", healthy, UnitEventsPerSec, nil)
	e.rep.add(ScenarioEndpoints, "endpoints.faulty", "8 endpoints' deliveries, beside one refusing and one answering after 2 s", faulty, UnitEventsPerSec, nil)
	e.rep.add(ScenarioEndpoints, "endpoints.isolation", "isolation: the 8 healthy endpoints' rate beside faulty ones / beside healthy ones",
		faulty/healthy, UnitRatio, atLeast(endpointsGoal))
	return nil
}

// endpointsPhase writes n deliveries to each of 10 endpoints, then
// delivers them and returns the rate of the 8 always healthy endpoints:
// their deliveries over the time until they all arrived.
func endpointsPhase(ctx context.Context, e *env, p *progress, label string, n int, faulty bool) (float64, error) {
	sc, err := e.b.newScratch(ctx, label)
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
	fan, err := endpoint.NewFanOut(endpoint.FanOutConfig{Store: s})
	if err != nil {
		return 0, err
	}
	for i := range n {
		ev := postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: strconv.Itoa(i), EventType: "order.created",
			Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`)}
		if err := fan.Publish(ctx, &sink.Message{Event: ev, Attempt: 1}); err != nil {
			return 0, err
		}
	}
	p.printf("%s: %d deliveries to each of 10 endpoints written", label, n)
	d, err := endpoint.NewDispatcher(endpoint.Config{Store: s})
	if err != nil {
		return 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() { _ = d.Run(runCtx) })
	defer func() { stop(); wg.Wait() }()
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
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	took := time.Since(start)
	v := rate(int(want), took)
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
