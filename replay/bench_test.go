package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/replay"
	"github.com/postbox-go/postbox/store"
)

// markDelivered claims every pending event of s and settles it done and
// kept, as a relay with a Retention leaves it, a claim of 1000 at a time.
func markDelivered(b *testing.B, s store.Outbox) {
	b.Helper()
	ctx := context.Background()
	for {
		claimed, err := s.Claim(ctx, store.ClaimParams{Owner: "bench", Limit: 1000, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if len(claimed) == 0 {
			return
		}
		p := store.SettleParams{Owner: "bench", KeepDone: true, Ended: []int64{claimed[0].Lease}}
		for _, c := range claimed {
			p.Done = append(p.Done, c.Event.ID)
		}
		if err := s.Settle(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplayToOutbox measures how fast a replay reads kept delivered
// events and sends them back to the queue on PostgreSQL (events/s): 10,000
// events in batches of the default size.
func BenchmarkReplayToOutbox(b *testing.B) {
	const n = 10_000
	s := pgtest.Store(b).Driver()
	ctx := context.Background()
	events := newEvents(n, "order.created", "order.paid")
	for i := 0; i < n; i += 1000 {
		if err := s.Enqueue(ctx, events[i:i+1000]...); err != nil {
			b.Fatal(err)
		}
	}
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		markDelivered(b, s)
		b.StartTimer()
		start := time.Now()
		pr, err := replay.Run(ctx, replay.Config{Outbox: s}, replay.Params{})
		total += time.Since(start)
		if err != nil || pr.Requeued != n {
			b.Fatalf("replay: %+v, %v", pr, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "events/s")
}
