package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// BenchmarkEnqueue measures Enqueue calls (one transaction each) of one and
// of a hundred events, and of one event from parallel producers.
func BenchmarkEnqueue(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			s := newStore(b, sqlite.Config{})
			ctx := b.Context()
			events := make([]postbox.Event, n)
			b.ReportAllocs()
			for b.Loop() {
				for i := range events {
					events[i] = event("agg", i)
				}
				if err := s.Enqueue(ctx, events...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
	b.Run("events=1/parallel", func(b *testing.B) {
		s := newStore(b, sqlite.Config{})
		ctx := b.Context()
		b.ReportAllocs()
		b.SetParallelism(2) // 2×GOMAXPROCS producers
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Enqueue(ctx, event("agg", 1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkClaimSettle measures the relay's round trip per event: claims of
// a hundred events, each batch settled as delivered.
func BenchmarkClaimSettle(b *testing.B) {
	const batch = 100
	s := newStore(b, sqlite.Config{})
	ctx := b.Context()
	events := make([]postbox.Event, 0, 1000)
	for i := 0; i < b.N; i += cap(events) {
		events = events[:0]
		for j := i; j < min(b.N, i+cap(events)); j++ {
			events = append(events, event(fmt.Sprint(j%100), j))
		}
		if err := s.Enqueue(ctx, events...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for claimed := 0; claimed < b.N; {
		got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "relay", Limit: batch, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			b.Fatalf("claimed %d of %d events, then nothing", claimed, b.N)
		}
		if err := s.Driver().Settle(ctx, store.SettleParams{Owner: "relay", Done: deliveryIDs(got)}); err != nil {
			b.Fatal(err)
		}
		claimed += len(got)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
