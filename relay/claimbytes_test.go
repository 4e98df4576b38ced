package relay_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// largeEvent is an event of about size bytes of payload.
func largeEvent(agg string, n, size int) postbox.Event {
	e := ev(agg, n)
	e.Payload = []byte(fmt.Sprintf(`{"n": %d, "blob": "%s"}`, n, strings.Repeat("x", size)))
	return e
}

// A backlog of large events with small ones among them drains, every
// claim bounded by Config.ClaimBytes (store.ClaimParams.MaxBytes), and
// the relay never holds much more than ClaimBytes of payload at once: the
// bytes it holds are taken from the next claim's bound. (The test store
// emulates MaxBytes where the store underneath ignores it.)
func TestLargeEventsAreClaimedWithinClaimBytes(t *testing.T) {
	t.Parallel()
	const large, size, claimBytes = 8, 2 << 20, 5 << 20
	s := newRowStore(pgtest.Store(t).Driver())
	s.boundBytes = true
	var events []postbox.Event
	for i := range large {
		events = append(events, largeEvent("large", i, size), ev("small", i), ev("small", large+i))
	}
	for i := 0; i < len(events); i += 6 {
		if err := s.Enqueue(context.Background(), events[i:min(i+6, len(events))]...); err != nil {
			t.Fatal(err)
		}
	}
	// The sink takes its time with large events, so that the relay could
	// claim many more meanwhile.
	bs := newBatchSink()
	slowLarge := &scriptedSink{publish: func(ctx context.Context, m *sink.Message) error {
		if len(m.Payload) > size {
			time.Sleep(time.Second)
		}
		return bs.Publish(ctx, m)
	}}
	start(t, relay.Config{Store: s, Sink: slowLarge, ClaimBytes: claimBytes, PollInterval: 20 * time.Millisecond})
	waitFor(t, "the backlog delivered", 60*time.Second, func() bool { return stats(t, s).Done == int64(len(events)) })
	for _, e := range events {
		if n := bs.sent(e.ID); n != 1 {
			t.Fatalf("event %s sent %d times", e.ID, n)
		}
	}
	for _, p := range s.claimsSeen() {
		if p.MaxBytes <= 0 || p.MaxBytes > claimBytes {
			t.Fatalf("a claim with MaxBytes %d, want within (0, %d]", p.MaxBytes, claimBytes)
		}
	}
	if peak, most := s.peakHeld(), int64(claimBytes+size+64); peak > most {
		t.Fatalf("%d bytes of payload held at once, want at most ClaimBytes and one event: %d", peak, most)
	}
}

// Claims carry ClaimBytesDefault unless told otherwise; a negative
// ClaimBytes is refused.
func TestClaimBytesDefault(t *testing.T) {
	t.Parallel()
	s := newRowStore(pgtest.Store(t).Driver())
	bs := newBatchSink()
	start(t, relay.Config{Store: s, Sink: &orderSink{batchSink: bs}, PollInterval: 20 * time.Millisecond})
	waitFor(t, "a claim", 10*time.Second, func() bool { return len(s.claimsSeen()) > 0 })
	if got := s.claimsSeen()[0].MaxBytes; got != relay.ClaimBytesDefault {
		t.Fatalf("first claim with MaxBytes %d, want ClaimBytesDefault %d", got, relay.ClaimBytesDefault)
	}
	if _, err := relay.New(relay.Config{Store: s, Sink: bs, ClaimBytes: -1}); err == nil || !strings.Contains(err.Error(), "ClaimBytes") {
		t.Fatalf("New with ClaimBytes -1: %v, want an error naming ClaimBytes", err)
	}
}

// A claim that times out (here: every claim of more than 4 events, while
// slow) is followed by one of half as many events, down to what gets
// through, and the relay says so; the backlog drains meanwhile, and once
// claims are fast again their size grows back.
func TestClaimShrinksAfterATimeoutAndGrowsBack(t *testing.T) {
	t.Parallel()
	s := newRowStore(pgtest.Store(t).Driver())
	var slow atomic.Bool
	slow.Store(true)
	s.claimHook = func(_ context.Context, p store.ClaimParams) error {
		if slow.Load() && p.Limit > 4 {
			return fmt.Errorf("test: claim of %d events: %w", p.Limit, context.DeadlineExceeded)
		}
		return nil
	}
	var events []postbox.Event
	for i := range 400 {
		events = append(events, ev("agg", i))
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	logs := newCapture()
	bs := newBatchSink()
	r, _ := run(t, relay.Config{Store: s, Sink: &orderSink{batchSink: bs}, BatchSize: 64, Concurrency: 4, Logger: logs.logger(), Retention: time.Hour,
		PollInterval: 20 * time.Millisecond})
	waitFor(t, "deliveries while claims of more than 4 time out", 20*time.Second, func() bool { return r.Stats().Delivered >= 40 })
	var limits []int
	for _, p := range s.claimsSeen()[:5] {
		limits = append(limits, p.Limit)
	}
	if want := []int{64, 32, 16, 8, 4}; fmt.Sprint(limits) != fmt.Sprint(want) {
		t.Fatalf("first claims of %v events, want %v", limits, want)
	}
	for _, n := range []int{32, 16, 8, 4} {
		if len(logs.matching(fmt.Sprintf("claim timed out; the next claims take at most %d events", n))) == 0 {
			t.Errorf("no log that claims shrank to %d events", n)
		}
	}
	slow.Store(false)
	claimsBefore := len(s.claimsSeen())
	waitFor(t, "a claim of more than 8 events", 20*time.Second, func() bool {
		for _, p := range s.claimsSeen()[claimsBefore:] {
			if p.Limit > 8 {
				return true
			}
		}
		return false
	})
	waitFor(t, "the backlog delivered", 30*time.Second, func() bool { return stats(t, s).Done == int64(len(events)) })
}
