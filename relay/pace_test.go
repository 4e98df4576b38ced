package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
)

// slowSink accepts every message after delay.
type slowSink struct{ delay time.Duration }

func (s slowSink) Publish(ctx context.Context, _ *sink.Message) error {
	select {
	case <-time.After(s.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowSink) String() string { return "slow sink" }

func (s slowSink) Destination() sink.Destination {
	return sink.Destination{System: "test", Name: "slow"}
}

// A relay whose deliveries are slow claims no more events ahead of its
// publishers than they can start within half a lease: once it knows a
// delivery takes 100 ms, two publishers and a lease of 1 s hold at most 2
// in delivery and 10 waiting, not the batch of 100 a claim may take.
func TestSlowDeliveriesBoundTheEventsClaimedAhead(t *testing.T) {
	// Not parallel: it counts what the relay claims against how long
	// deliveries take, which the load of tests run beside it changes.
	s := pgtest.Store(t).Driver()
	enqueue := func(from, to int) {
		var events []postbox.Event
		for i := from; i < to; i++ {
			events = append(events, ev(fmt.Sprint(i), i))
		}
		if err := s.Enqueue(context.Background(), events...); err != nil {
			t.Fatal(err)
		}
	}
	r := newRelay(t, relay.Config{Store: s, Sink: slowSink{100 * time.Millisecond}, Concurrency: 2, BatchSize: 100,
		Lease: time.Second, PollInterval: 10 * time.Millisecond})
	relaytest.Run(t, r)
	enqueue(0, 4)
	waitFor(t, "the first deliveries", 10*time.Second, func() bool { return r.Stats().Delivered == 4 })

	enqueue(4, 64)
	most := 0
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		most = max(most, r.Stats().InFlight)
	}
	if most > 12 {
		t.Fatalf("%d events held at once with deliveries of 100 ms, 2 publishers and a lease of 1s; want at most 12", most)
	}
	waitFor(t, "every event delivered", 20*time.Second, func() bool { return r.Stats().Delivered == 64 })
}
