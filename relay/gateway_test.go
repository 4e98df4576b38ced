package relay_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
)

// The endpoint is down behind its load balancer, which answers 502 Bad
// Gateway to every request, for many times what MaxAttempts and the backoff
// allow: the relay takes the run of 502s for an outage, probes, counts no
// attempt while it lasts (the probes go to different events), and delivers
// everything once the endpoint is back.
func TestGatewayOutageDeadLettersNothing(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	var down atomic.Bool
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, _ *http.Request, _ receiver.Delivery, _ int) int {
		if down.Load() {
			http.Error(w, "<html>502 Bad Gateway</html>", http.StatusBadGateway)
			return receiver.Answered
		}
		return http.StatusOK
	})
	r := newRelay(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 2*time.Second), MaxAttempts: 3,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		ProbeInterval: 40 * time.Millisecond, BatchSize: 20, Concurrency: 4, PollInterval: 20 * time.Millisecond, Retention: time.Hour})
	relaytest.Run(t, r)
	stopProducing := produce(t, s)
	waitFor(t, "first deliveries", 10*time.Second, func() bool { return len(rcv.Accepted()) >= 10 })

	down.Store(true)
	waitFor(t, "the relay to see the sink down", 10*time.Second, func() bool { return !r.SinkAvailable() })
	// The answers to the requests sent before the outage began (the 502s
	// that started it count their attempts) are recorded once nothing but
	// a probe is in flight.
	waitFor(t, "the requests sent before the outage to be settled", 10*time.Second, func() bool { return r.Stats().InFlight <= 1 })
	retriesBefore, probesBefore := retriesCounted(t, s), r.Stats().Probes
	waitFor(t, "probes while down", 20*time.Second, func() bool { return r.Stats().Probes >= probesBefore+15 })
	if st := r.Stats(); !st.SinkDown || st.SinkError == "" {
		t.Fatalf("stats while the gateway answers 502: %+v", st)
	}
	if got := retriesCounted(t, s); got != retriesBefore {
		t.Fatalf("failed attempts counted while the gateway answered 502: %d, then %d", retriesBefore, got)
	}
	if got := stats(t, s).Failed; got != 0 {
		t.Fatalf("%d events dead-lettered during the outage", got)
	}

	down.Store(false)
	waitFor(t, "the relay to see the sink back", 10*time.Second, r.SinkAvailable)
	produced := stopProducing()
	waitFor(t, "every event delivered", 20*time.Second, func() bool {
		st := stats(t, s)
		return st.Done == int64(produced) && st.Failed == 0
	})
}

// One event the gateway always answers 502 (its request crashes the
// endpoint behind it), alone in the outbox: its 502s in a row are taken
// for an outage. It must not hold the outbox: a probe is never the event a
// gateway answered at the last probe while another can be taken, the
// first other event that gets through ends the outage, and the poison
// event, probed alone, counts its attempts and ends failed.
func TestPoisonGatewayEventDoesNotBlockTheOutbox(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	poison := ev("poison", 1)
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, _ *http.Request, d receiver.Delivery, _ int) int {
		if d.ID == poison.ID.String() {
			http.Error(w, "<html>502 Bad Gateway</html>", http.StatusBadGateway)
			return receiver.Answered
		}
		return http.StatusOK
	})
	r := newRelay(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 2*time.Second), MaxAttempts: 6,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		ProbeInterval: 40 * time.Millisecond, PollInterval: 20 * time.Millisecond, Retention: time.Hour})
	relaytest.Run(t, r)
	if err := s.Enqueue(context.Background(), poison); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay to take the 502s for an outage", 10*time.Second, func() bool { return r.Stats().Probes >= 2 })
	for i := range 5 {
		if err := s.Enqueue(context.Background(), ev("good", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the sink back", 10*time.Second, r.SinkAvailable)
	waitFor(t, "the other events delivered, the poison one failed", 20*time.Second, func() bool {
		st := stats(t, s)
		return st.Done == 5 && st.Failed == 1
	})
	if got := record(t, s, poison.ID); got.Status != store.StatusFailed || got.Retries != 6 {
		t.Fatalf("the poison event: status %s, retries %d; want failed after 6", got.Status, got.Retries)
	}
}
