package relay_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// One event breaks the sink's connection whenever it is sent (a RabbitMQ
// header over the broker's limits): the sink reports sink.Unavailable for
// it alone, and the relay takes it for an outage. The outage must end: the
// probes that keep failing on that event give way to another event, whose
// success shows the event is the problem; every other event is delivered,
// and the poison event counts its failures as rejections and ends failed.
func TestConnectionBrokenByOneEventIsNoEndlessOutage(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	poison := ev("poison", 1)
	var poisonSent atomic.Int64
	fake := &scriptedSink{publish: func(_ context.Context, m *sink.Message) error {
		if m.ID == poison.ID {
			poisonSent.Add(1)
			return &sink.Error{Kind: sink.Unavailable, Err: errors.New("connection closed: FRAME_ERROR - frame size too large")}
		}
		return nil
	}}
	r := newRelay(t, relay.Config{Store: s, Sink: fake, RejectedAttempts: 3,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		ProbeInterval: 40 * time.Millisecond, PollInterval: 20 * time.Millisecond, Retention: time.Hour})
	relaytest.Run(t, r)
	if err := s.Enqueue(context.Background(), poison); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay to take the broken connection for an outage", 10*time.Second, func() bool { return r.Stats().Probes >= 2 })
	for i := range 20 {
		if err := s.Enqueue(context.Background(), ev("good", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the other events delivered, the poison one failed", 30*time.Second, func() bool {
		st := stats(t, s)
		return st.Done == 20 && st.Failed == 1
	})
	waitFor(t, "the sink taken for reachable", 10*time.Second, r.SinkAvailable)
	got := record(t, s, poison.ID)
	if got.Status != store.StatusFailed || got.Retries != 3 {
		t.Fatalf("the poison event: status %s, retries %d; want failed after 3", got.Status, got.Retries)
	}
	if !strings.Contains(got.LastError, "FRAME_ERROR") {
		t.Fatalf("the poison event's last error %q does not say what the sink said", got.LastError)
	}
	if st := r.Stats(); st.Failed != 1 || st.Delivered != 20 {
		t.Fatalf("relay stats %+v, want 20 delivered, 1 failed", st)
	}
}
