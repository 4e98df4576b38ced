package relay_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
)

// TestOfferDecidesAsASettleWould offers events the relay's store does not
// hold, to a receiver that answers each as the test says: each outcome is
// what the relay would have settled for a claimed event of that attempt
// (retry within the backoff, a dead letter for a refusal or the last
// attempt, released without counting when the sink is unreachable), it is
// counted and observed, and nothing reaches the store.
func TestOfferDecidesAsASettleWould(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	answers := map[string]int{}
	var mu sync.Mutex
	rcv := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, d receiver.Delivery, _ int) int {
		mu.Lock()
		defer mu.Unlock()
		return answers[d.ID]
	})
	obs := &recorder{}
	r, err := relay.New(relay.Config{
		Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Logger: testlog.Discard(), Observer: obs,
		MaxAttempts: 3, BackoffMin: time.Minute, BackoffMax: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	offer := func(status, attempt int) relay.Offered {
		t.Helper()
		e := ev("a", attempt)
		mu.Lock()
		answers[e.ID.String()] = status
		mu.Unlock()
		o, ok := r.Offer(context.Background(), store.ClaimedEvent{Event: e, Attempt: attempt, CreatedAt: time.Now()})
		if !ok {
			t.Fatalf("offer of attempt %d answered %d: not taken", attempt, status)
		}
		return o
	}

	if _, ok := r.Offer(context.Background(), store.ClaimedEvent{Event: ev("a", 0), Attempt: 1}); ok {
		t.Fatal("a relay that does not run took an offer")
	}
	stop := relaytest.Run(t, r).Stop
	waitFor(t, "the relay to run", 10*time.Second, r.Ready)

	if o := offer(0, 1); o.Outcome != relay.OutcomeDelivered || !o.Sent || o.LastError != "" {
		t.Errorf("answered 200: %+v, want delivered", o)
	}
	before := time.Now()
	if o := offer(http.StatusServiceUnavailable, 1); o.Outcome != relay.OutcomeRetry ||
		o.RetryAt.Before(before.Add(time.Minute)) || o.RetryAt.After(time.Now().Add(2*time.Minute)) || o.LastError == "" {
		t.Errorf("attempt 1 answered 503: %+v, want a retry after the first backoff step (1 to 2 minutes)", o)
	}
	if o := offer(http.StatusServiceUnavailable, 3); o.Outcome != relay.OutcomeFailed || o.LastError == "" {
		t.Errorf("attempt 3 of 3 answered 503: %+v, want failed", o)
	}
	if o := offer(http.StatusBadRequest, 1); o.Outcome == relay.OutcomeDelivered || o.LastError == "" {
		t.Errorf("answered 400: %+v, want a failure with its error", o)
	}

	st := r.Stats()
	if st.Delivered != 1 || st.Retried < 1 || st.Failed < 1 || st.Claimed != 0 {
		t.Errorf("stats %+v: want 1 delivered, retries and failures counted, nothing claimed", st)
	}
	if got := len(obs.attempts); got != 4 {
		t.Errorf("observer told %d attempts, want the 4 offered", got)
	}
	if st := stats(t, s); st.Pending+st.Processing+st.Done+st.Failed != 0 {
		n := st.Pending + st.Processing + st.Done + st.Failed
		t.Errorf("the store holds %d events after offers: an offer must write nothing", n)
	}

	// Unreachable: released, no attempt counted, and no more offers taken
	// until the relay's own probes find the sink again.
	rcv.Server.Close()
	var released bool
	for range 10 {
		o, ok := r.Offer(context.Background(), store.ClaimedEvent{Event: ev("b", 1), Attempt: 1, CreatedAt: time.Now()})
		if !ok {
			break
		}
		switch o.Outcome {
		case relay.OutcomeReleased:
			released = true
		case relay.OutcomeRetry:
			// A kept-alive connection closed under a request: it may have
			// been processed, so it counts.
		default:
			t.Fatalf("offer to a closed receiver: %+v, want released (or a retry on a connection closed under it)", o)
		}
	}
	if !released {
		t.Error("no offer reached the closed receiver")
	}
	if _, ok := r.Offer(context.Background(), store.ClaimedEvent{Event: ev("b", 2), Attempt: 1}); ok || r.SinkAvailable() {
		t.Error("a relay whose sink is unreachable took an offer")
	}

	stop()
	if _, ok := r.Offer(context.Background(), store.ClaimedEvent{Event: ev("c", 1), Attempt: 1}); ok {
		t.Error("a stopped relay took an offer")
	}
}
