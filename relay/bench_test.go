package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store/postgres"
)

// BenchmarkDrainToWebhook drains a backlog of b.N events to a local
// receiver with the default settings (run with -benchtime=100000x for a
// 100,000-event backlog). It reports events/s.
func BenchmarkDrainToWebhook(b *testing.B) {
	s := pgtest.Store(b).Driver()
	fillBacklog(b, s, b.N)
	drainToReceiver(b, relay.Config{Store: s})
}

// drainToReceiver runs a relay of cfg (its sink: a local receiver) until
// the receiver has had b.N requests, and reports events/s.
func drainToReceiver(b *testing.B, cfg relay.Config) {
	b.Helper()
	var got atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got.Add(1) == int64(b.N) {
			close(done)
		}
	}))
	defer srv.Close()
	cfg.Sink, cfg.Logger = newSink(&testing.T{}, srv.URL, 10*time.Second), testlog.Discard()
	r, err := relay.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.ResetTimer()
	start := time.Now()
	stopped := make(chan struct{})
	go func() { _ = r.Run(ctx); close(stopped) }()
	<-done
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-stopped
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// BenchmarkCommitToDelivery measures the time from an event's commit to its
// arrival at the receiver, one event at a time, with the default settings
// (LISTEN/NOTIFY wake-up). It reports the median and 99th percentile.
func BenchmarkCommitToDelivery(b *testing.B) {
	s := pgtest.Store(b).Driver()
	arrived := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- time.Now()
	}))
	b.Cleanup(srv.Close) // after the relay stops
	relaytest.Start(b, relay.Config{Store: s, Sink: newSink(&testing.T{}, srv.URL, 10*time.Second)})
	ctx := context.Background()
	// Warm up: the first event also waits for the listener to connect.
	if err := s.Enqueue(ctx, postbox.Event{EventType: "warm-up", Payload: []byte(`{}`)}); err != nil {
		b.Fatal(err)
	}
	<-arrived
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		if err := s.Enqueue(ctx, postbox.Event{EventType: "order.created", Payload: []byte(`{}`)}); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		lat = append(lat, (<-arrived).Sub(committed))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// noopSink accepts every message at once: it measures the relay and the
// store alone.
type noopSink struct{ n atomic.Int64 }

func (s *noopSink) Publish(context.Context, *sink.Message) error {
	s.n.Add(1)
	return nil
}

func (s *noopSink) String() string { return "no-op sink" }

func (s *noopSink) Destination() sink.Destination {
	return sink.Destination{System: "noop", Name: "noop"}
}

// BenchmarkDrainToNoopSink drains a backlog of b.N events to a sink that
// accepts everything at once, and reports events/s.
func BenchmarkDrainToNoopSink(b *testing.B) {
	s := pgtest.Store(b).Driver()
	fillBacklog(b, s, b.N)
	sk := &noopSink{}
	r, err := relay.New(relay.Config{Store: s, Sink: sk, Logger: testlog.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.ResetTimer()
	start := time.Now()
	stopped := make(chan struct{})
	go func() { _ = r.Run(ctx); close(stopped) }()
	for sk.n.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	// Publishing is done; the time counted ends when the last outcome is
	// recorded.
	for {
		st, err := s.Stats(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if st.Pending == 0 && st.Processing == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-stopped
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// fillBacklog enqueues n order events, a thousand per transaction.
func fillBacklog(b *testing.B, s *postgres.Driver, n int) {
	b.Helper()
	events := make([]postbox.Event, 0, 1000)
	for i := range n {
		events = append(events, postbox.Event{AggregateType: "order", AggregateID: fmt.Sprint(i),
			EventType: "order.created", Payload: []byte(`{"order_id": 1, "amount": 1250}`)})
		if len(events) == cap(events) || i == n-1 {
			if err := s.Enqueue(context.Background(), events...); err != nil {
				b.Fatal(err)
			}
			events = events[:0]
		}
	}
}

// BenchmarkDrainOrdered drains a backlog of b.N events spread over
// aggregates to a local webhook receiver, ordered and unordered, with the
// default settings. It reports events/s.
func BenchmarkDrainOrdered(b *testing.B) {
	for _, aggregates := range []int{128, 1000} {
		for _, ordered := range []bool{false, true} {
			b.Run(fmt.Sprintf("aggregates=%d/ordered=%v", aggregates, ordered), func(b *testing.B) {
				st := pgtest.Store(b)
				ctx := context.Background()
				if ordered {
					if err := st.MigrateOrdered(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := st.Pool().Exec(ctx, fmt.Sprintf(`insert into %s (aggregate_type, aggregate_id, event_type, payload)
select 'order', 'agg-' || (g %% %d), 'order.created', '{"a": 1}' from generate_series(1, %d) g`, st.Table("outbox_events"), aggregates, b.N)); err != nil {
					b.Fatal(err)
				}
				drainToReceiver(b, relay.Config{Store: st.Driver(), Ordered: ordered})
			})
		}
	}
}
