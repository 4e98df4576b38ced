package endpoint_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
)

// BenchmarkDrainToEndpoints drains a backlog of b.N events to 10 local
// endpoints that each take every event, in endpoints mode with the default
// settings (a relay over the outbox publishing batches of 100 into the
// fan-out, one lane per endpoint of concurrency 64): run with
// -benchtime=5000x for a 5,000-event backlog, 50,000 deliveries. It reports
// deliveries/s, from the start to the last delivery, and the share of the
// deliveries the fan-out made directly (direct/delivery); the "written"
// case writes every delivery first (SupervisorConfig.DirectWithin negative), the
// baseline of the direct deliveries' ratio.
func BenchmarkDrainToEndpoints(b *testing.B) {
	b.Run("direct", func(b *testing.B) { drainToEndpoints(b, 0) })
	b.Run("written", func(b *testing.B) { drainToEndpoints(b, -1) })
}

func drainToEndpoints(b *testing.B, within time.Duration) {
	const endpoints = 10
	s := pgtest.Store(b)
	ctx := context.Background()
	var got atomic.Int64
	want := int64(b.N * endpoints)
	done := make(chan struct{})
	for i := range endpoints {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if got.Add(1) == want {
				close(done)
			}
		}))
		defer srv.Close()
		if _, err := s.EndpointCreate(ctx, store.Endpoint{Name: fmt.Sprint("bench-", i), URL: srv.URL, Secret: secret, Concurrency: 64}); err != nil {
			b.Fatal(err)
		}
	}
	for start := 0; start < b.N; start += 1000 {
		events := make([]postbox.Event, min(1000, b.N-start))
		for i := range events {
			events[i] = postbox.Event{AggregateType: "order", AggregateID: fmt.Sprint(start + i), EventType: "order.created", Payload: []byte(`{"n": 1}`)}
		}
		if err := s.Enqueue(ctx, events...); err != nil {
			b.Fatal(err)
		}
	}
	quiet := testlog.Discard()
	sup, err := endpoint.New(endpoint.SupervisorConfig{Store: s.Driver(), Keyring: testKeyring, Logger: quiet, DirectWithin: within})
	if err != nil {
		b.Fatal(err)
	}
	r, err := relay.New(relay.Config{Store: s.Driver(), Sink: sup.FanOut(), PublishBatch: 100, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	b.ResetTimer()
	start := time.Now()
	stopped := make(chan struct{}, 2)
	go func() { _ = sup.Run(runCtx); stopped <- struct{}{} }()
	go func() { _ = r.Run(runCtx); stopped <- struct{}{} }()
	<-done
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-stopped
	<-stopped
	b.ReportMetric(float64(want)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(sup.Stats().Direct)/float64(want), "direct/delivery")
}
