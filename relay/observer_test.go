package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
)

// recorder is an Observer that keeps everything it is told.
type recorder struct {
	mu          sync.Mutex
	attempts    []relay.Attempt
	claims      int
	claimed     int
	claimErrors int
	renewals    int
	lost        int
	reclaimed   int
	sinkStates  []bool
	probes      int
}

func (o *recorder) Claimed(n int, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.claimErrors++
		return
	}
	o.claims++
	o.claimed += n
}

func (o *recorder) Attempted(a relay.Attempt) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts = append(o.attempts, a)
}

func (o *recorder) LeasesRenewed(_, lost int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.renewals++
	}
	o.lost += lost
}

func (o *recorder) Reclaimed(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reclaimed += n
}

func (o *recorder) SinkState(up bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sinkStates = append(o.sinkStates, up)
}

func (o *recorder) SinkProbed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.probes++
}

// count returns the recorded attempts with outcome oc.
func (o *recorder) count(oc relay.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, a := range o.attempts {
		if a.Outcome == oc {
			n++
		}
	}
	return n
}

func (o *recorder) snapshot() recorder {
	o.mu.Lock()
	defer o.mu.Unlock()
	return recorder{attempts: append([]relay.Attempt(nil), o.attempts...), claims: o.claims, claimed: o.claimed,
		claimErrors: o.claimErrors, renewals: o.renewals, lost: o.lost, reclaimed: o.reclaimed,
		sinkStates: append([]bool(nil), o.sinkStates...), probes: o.probes}
}

// The observer sees every attempt once its outcome is recorded, as Stats
// counts them: 100 events of which every fifth is answered 503 once, and
// one answered 410, give 100 delivered, 20 retries and one failed, with the
// status codes, the event types and the sink call.
func TestObserverSeesEveryAttempt(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, d receiver.Delivery, n int) int {
		switch {
		case d.AggregateID == "gone":
			return http.StatusGone
		case d.EventType == "order.flaky" && n == 1:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	events := make([]postbox.Event, 0, 101)
	for i := range 100 {
		e := ev(fmt.Sprint(i), 0)
		if i%5 == 0 {
			e.EventType = "order.flaky"
		}
		events = append(events, e)
	}
	events = append(events, ev("gone", 0))
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	obs := &recorder{}
	r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Observer: obs,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	waitFor(t, "every outcome", 10*time.Second, func() bool {
		return obs.count(relay.OutcomeDelivered) == 100 && obs.count(relay.OutcomeFailed) == 1
	})
	got := obs.snapshot()
	st := r.Stats()
	if n := got.count(relay.OutcomeRetry); n != 20 || int64(n) != st.Retried {
		t.Errorf("%d retries observed, stats %d; want 20", n, st.Retried)
	}
	if int64(got.claimed) != st.Claimed || got.claimed < 121 {
		t.Errorf("%d events claimed observed, stats %d; want them equal, and at least 121 (101 + 20 retries)", got.claimed, st.Claimed)
	}
	for _, a := range got.attempts {
		if !a.Sent || a.Duration <= 0 || a.Age < a.Duration {
			t.Fatalf("attempt %+v: want sent, with a duration, and an age at least as long", a)
		}
		switch a.Outcome {
		case relay.OutcomeRetry:
			if a.StatusCode != http.StatusServiceUnavailable || a.EventType != "order.flaky" || a.Attempt != 1 {
				t.Errorf("retry %+v: want status 503 of an order.flaky event's first attempt", a)
			}
		case relay.OutcomeFailed:
			if a.StatusCode != http.StatusGone {
				t.Errorf("failed %+v: want status 410", a)
			}
		case relay.OutcomeDelivered:
			if a.StatusCode != 0 {
				t.Errorf("delivered %+v: want no status code", a)
			}
		}
	}
}

// Failed claims, reclaimed events and lost leases reach the observer, as
// Stats counts them.
func TestObserverSeesClaimErrorsAndLeases(t *testing.T) {
	// Not parallel: its 200 and 300 ms leases must be renewed in time,
	// which the load of tests run beside it may delay.
	t.Run("claim errors", func(t *testing.T) {
		s := &faultyStore{Driver: pgtest.Store(t).Driver()}
		s.failClaims.Store(true)
		rcv := receiver.New(t, secret, nil)
		obs := &recorder{}
		r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Observer: obs})
		waitFor(t, "two failed claims", 10*time.Second, func() bool { return r.Stats().ClaimErrors >= 2 })
		if r.Ready() || !r.Failing() {
			t.Errorf("a relay whose claims fail: Ready %v, Failing %v; want false, true", r.Ready(), r.Failing())
		}
		if got := obs.snapshot(); got.claimErrors < 2 || got.claims != 0 {
			t.Fatalf("observed %d claim errors and %d claims; want at least 2 errors, no claim", got.claimErrors, got.claims)
		}
	})
	t.Run("reclaimed", func(t *testing.T) {
		s := pgtest.Store(t).Driver()
		ctx := context.Background()
		if err := s.Enqueue(ctx, ev("1", 1), ev("2", 1), ev("3", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, store.ClaimParams{Owner: "crashed", Limit: 10, Lease: 100 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		rcv := receiver.New(t, secret, nil)
		obs := &recorder{}
		run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Lease: 200 * time.Millisecond, Observer: obs})
		waitFor(t, "the crashed relay's events to be delivered", 10*time.Second, func() bool { return obs.count(relay.OutcomeDelivered) == 3 })
		if got := obs.snapshot(); got.reclaimed != 3 {
			t.Fatalf("observed %d reclaimed events, want 3", got.reclaimed)
		}
	})
	t.Run("lost leases", func(t *testing.T) {
		s := &faultyStore{Driver: pgtest.Store(t).Driver()}
		hold := make(chan struct{})
		var requests atomic.Int32
		rcv := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
			requests.Add(1)
			<-hold
			return http.StatusOK
		})
		defer close(hold)
		events := make([]postbox.Event, 5)
		for i := range events {
			events[i] = ev(fmt.Sprint(i), 0)
		}
		if err := s.Enqueue(context.Background(), events...); err != nil {
			t.Fatal(err)
		}
		obs := &recorder{}
		r, _ := run(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, time.Minute), Concurrency: 1, Observer: obs,
			Lease: 300 * time.Millisecond, PollInterval: time.Hour, ShutdownTimeout: 100 * time.Millisecond})
		waitFor(t, "the first delivery", 10*time.Second, func() bool { return requests.Load() > 0 })
		waitFor(t, "a lease renewal", 10*time.Second, func() bool { return obs.snapshot().renewals > 0 })
		s.takeOver.Store(true)
		waitFor(t, "the lost leases to be counted", 10*time.Second, func() bool { return r.Stats().LostLeases > 0 })
		if got := obs.snapshot(); got.lost != 4 {
			t.Fatalf("observed %d lost leases, want 4 (the started delivery does not count)", got.lost)
		}
		// The four lost events are released without being sent.
		waitFor(t, "the lost events to be released", 10*time.Second, func() bool { return obs.count(relay.OutcomeReleased) >= 4 })
		unsent := 0
		for _, a := range obs.snapshot().attempts {
			if a.Outcome == relay.OutcomeReleased && !a.Sent {
				unsent++
			}
		}
		if unsent != 4 {
			t.Fatalf("%d events released unsent, want 4", unsent)
		}
	})
}
