package endpoint_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/internal/receiver"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// One endpoint refusing connections and one answering after 2 s do not
// hold back the healthy ones: theirs are all delivered while the slow one
// still has deliveries waiting, and the dead one's failures dead-letter
// only its own deliveries.
func TestSlowAndDeadEndpointsDoNotDelayTheOthers(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore, _ func(string, string) string) { testSlowAndDead(t, s) })
}

func testSlowAndDead(t *testing.T, s store.Endpoints) {
	const n = 40
	a := receiver.New(t, secret, nil)
	b := receiver.New(t, secret, nil)
	slow := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, _ int) int {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
		return 0
	})
	ea := addEndpoint(t, s, "a", a.URL, nil)
	eb := addEndpoint(t, s, "b", b.URL, nil)
	es := addEndpoint(t, s, "slow", slow.URL, func(e *store.Endpoint) { e.Concurrency = 2 })
	ed := addEndpoint(t, s, "dead", refusingURL(t), nil)
	d := startDispatcher(t, s, func(c *endpoint.Config) { c.MaxAttempts = 2 })
	types := make([]string, n)
	for i := range types {
		types[i] = "order.created"
	}
	fanOut(t, newFanOut(t, s, d), types...)

	a.WaitAccepted(t, n, 20*time.Second)
	b.WaitAccepted(t, n, 20*time.Second)
	if c := counts(t, s, es.ID); c.Pending+c.Processing == 0 {
		t.Errorf("slow endpoint's counts %+v: its deliveries all ended before the healthy ones'", c)
	}
	waitFor(t, 20*time.Second, "the dead endpoint's deliveries failed", func() bool { return counts(t, s, ed.ID).Failed == n })
	for _, e := range []store.Endpoint{ea, eb} {
		waitFor(t, 5*time.Second, e.Name+"'s deliveries done", func() bool { return counts(t, s, e.ID) == store.DeliveryCounts{Done: n} })
	}
	if c := counts(t, s, es.ID); c.Failed != 0 {
		t.Errorf("slow endpoint has %d failed deliveries, want none", c.Failed)
	}
}

// A failing endpoint's breaker opens after BreakerFailures failures, lets
// one probe through at a time, and closes when the endpoint answers again.
func TestBreakerOpensProbesAndCloses(t *testing.T) {
	s := pgStore(t)
	var healthy atomic.Bool
	// Requests that started once the breaker had opened (the probes), and
	// the most of them at once; requests sent before it opened may still be
	// finishing, and are not probes.
	var probing, maxWhileOpen atomic.Int64
	var d *endpoint.Dispatcher
	rc := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, _ receiver.Delivery, _ int) int {
		if d.Stats().BreakerOpened > 0 && !healthy.Load() {
			now := probing.Add(1)
			defer probing.Add(-1)
			for m := maxWhileOpen.Load(); now > m && !maxWhileOpen.CompareAndSwap(m, now); m = maxWhileOpen.Load() {
			}
		}
		time.Sleep(20 * time.Millisecond)
		if healthy.Load() {
			return 0
		}
		return http.StatusServiceUnavailable
	})
	e := addEndpoint(t, s, "flaky", rc.URL, func(e *store.Endpoint) { e.Concurrency = 4 })
	d = startDispatcher(t, s, func(c *endpoint.Config) {
		c.BreakerFailures, c.BreakerPauseMin, c.BreakerPauseMax = 3, 100*time.Millisecond, 400*time.Millisecond
	})
	fanOut(t, newFanOut(t, s, d), "a", "b", "c", "d", "e", "f")
	waitFor(t, 10*time.Second, "the breaker opened and failed a probe", func() bool { return d.Stats().BreakerOpened >= 2 })
	if got := maxWhileOpen.Load(); got > 1 {
		t.Errorf("%d requests at once while the breaker was open, want one probe at a time", got)
	}
	healthy.Store(true)
	rc.WaitAccepted(t, 6, 10*time.Second)
	waitFor(t, 5*time.Second, "all delivered", func() bool { return counts(t, s, e.ID).Done == 6 })
}

// An endpoint failing for DisableAfter is disabled; its deliveries keep
// accumulating, and enabling it delivers them.
func TestAutoDisableThenEnableDeliversTheAccumulated(t *testing.T) {
	s := pgStore(t)
	var healthy atomic.Bool
	rc := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		if healthy.Load() {
			return 0
		}
		return http.StatusInternalServerError
	})
	e := addEndpoint(t, s, "down", rc.URL, nil)
	d := startDispatcher(t, s, func(c *endpoint.Config) { c.DisableAfter = 300 * time.Millisecond })
	f := newFanOut(t, s, d)
	fanOut(t, f, "a", "b")
	waitFor(t, 10*time.Second, "the endpoint auto-disabled", func() bool {
		got, err := s.EndpointGet(context.Background(), e.ID)
		return err == nil && got.State == store.EndpointAutoDisabled
	})
	// The count follows the store's write.
	waitFor(t, 5*time.Second, "one endpoint auto-disabled in the stats", func() bool { return d.Stats().AutoDisabled == 1 })
	fanOut(t, f, "c", "d", "e")
	// The attempts sent before the endpoint was disabled end first.
	waitFor(t, 10*time.Second, "no delivery in flight", func() bool { return counts(t, s, e.ID).Processing == 0 })
	healthy.Store(true)
	time.Sleep(300 * time.Millisecond) // a disabled endpoint would have received them by now
	if got := len(rc.Accepted()); got != 0 {
		t.Fatalf("an auto-disabled endpoint received %d events", got)
	}
	if err := s.EndpointSetState(context.Background(), e.ID, store.EndpointEnabled); err != nil {
		t.Fatal(err)
	}
	rc.WaitAccepted(t, 5, 10*time.Second)
	waitFor(t, 5*time.Second, "all five done", func() bool { return counts(t, s, e.ID).Done == 5 })
}

// During a rotation's grace period both the new and the old secret sign;
// once it ended, the new one alone.
func TestRotationSignsWithBothSecretsDuringTheGrace(t *testing.T) {
	s := pgStore(t)
	type request struct {
		h    http.Header
		body string
	}
	requests := make(chan request, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		requests <- request{r.Header.Clone(), string(body)}
	}))
	defer srv.Close()
	e := addEndpoint(t, s, "rotating", srv.URL, nil)
	second, third := newSecret(t), newSecret(t)
	if err := s.EndpointRotateSecret(context.Background(), e.ID, second, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	d := startDispatcher(t, s, nil)
	f := newFanOut(t, s, d)
	verifies := func(r request, sec string) bool {
		v, err := signature.NewVerifier(signature.Standard, 0, sec)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = v.Verify(r.h, []byte(r.body))
		return err == nil
	}
	next := func() request {
		t.Helper()
		select {
		case r := <-requests:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no request")
			return request{}
		}
	}
	fanOut(t, f, "a")
	r := next()
	if !verifies(r, secret) || !verifies(r, second) {
		t.Errorf("during the grace: signatures %q do not verify with both the old and the new secret", r.h.Get("webhook-signature"))
	}

	grace := time.Now().Add(500 * time.Millisecond)
	if err := s.EndpointRotateSecret(context.Background(), e.ID, third, grace); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(grace) + 300*time.Millisecond) // the dispatcher reads the endpoints every 100ms
	fanOut(t, f, "b")
	r = next()
	if sigs := strings.Fields(r.h.Get("webhook-signature")); len(sigs) != 1 || !verifies(r, third) || verifies(r, second) {
		t.Errorf("after the grace: signatures %q, want the newest secret's alone", r.h.Get("webhook-signature"))
	}
}

// Every attempt is logged, with the status and the first KiB of the
// answer, and the log is purged after the retention.
func TestAttemptsLogWrittenAndPurged(t *testing.T) {
	s := pgStore(t)
	long := strings.Repeat("x", 3000)
	rc := receiver.New(t, secret, func(w http.ResponseWriter, _ *http.Request, _ receiver.Delivery, n int) int {
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(long))
			return receiver.Answered
		}
		return 0
	})
	e := addEndpoint(t, s, "a", rc.URL, nil)
	d := startDispatcher(t, s, nil)
	fanOut(t, newFanOut(t, s, d), "a")
	rc.WaitAccepted(t, 1, 10*time.Second)
	var attempts []store.Attempt
	waitFor(t, 5*time.Second, "two attempts logged", func() bool {
		attempts, _ = s.AttemptList(context.Background(), e.ID, 10)
		return len(attempts) == 2
	})
	first, second := attempts[1], attempts[0]
	if first.StatusCode != 502 || first.Response != long[:store.AttemptResponseMax] || !strings.Contains(first.Error, "Bad Gateway") || first.Attempt != 1 {
		t.Errorf("first attempt = %+v", first)
	}
	if second.StatusCode != 200 || second.Error != "" || second.Attempt != 2 || second.Duration <= 0 {
		t.Errorf("second attempt = %+v", second)
	}

	startDispatcher(t, s, func(c *endpoint.Config) { c.Retention, c.PurgeEvery = time.Millisecond, 50*time.Millisecond })
	waitFor(t, 5*time.Second, "the attempts and the delivered row purged", func() bool {
		attempts, _ = s.AttemptList(context.Background(), e.ID, 10)
		return len(attempts) == 0 && counts(t, s, e.ID) == store.DeliveryCounts{}
	})
}

// A shadow endpoint's deliveries that used their attempts are dropped,
// never failed.
func TestShadowEndpointNeverDeadLetters(t *testing.T) {
	s := pgStore(t)
	e := addEndpoint(t, s, "shadow", refusingURL(t), func(e *store.Endpoint) { e.Shadow = true })
	d := startDispatcher(t, s, func(c *endpoint.Config) { c.MaxAttempts = 2 })
	fanOut(t, newFanOut(t, s, d), "a", "b", "c")
	waitFor(t, 10*time.Second, "three dropped", func() bool { return counts(t, s, e.ID) == store.DeliveryCounts{Dropped: 3} })
	if st := d.Stats(); st.Dropped != 3 || st.Failed != 0 {
		t.Errorf("stats = %+v, want 3 dropped, none failed", st)
	}
}

func newSecret(t *testing.T) string {
	t.Helper()
	secret, err := signature.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// In endpoints mode an event's credentials or hop-by-hop header reaches no
// partner: each of its deliveries fails alone, at its first attempt, with
// an error naming the header, and the events beside it are delivered.
func TestTransportHeaderOfAnEventReachesNoEndpoint(t *testing.T) {
	s := pgStore(t)
	a := receiver.New(t, secret, nil)
	b := receiver.New(t, secret, nil)
	ea := addEndpoint(t, s, "a", a.URL, nil)
	eb := addEndpoint(t, s, "b", b.URL, nil)
	d := startDispatcher(t, s, nil)
	f := newFanOut(t, s, d)
	fanOut(t, f, "before")
	bad := postbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: "9", EventType: "forged",
		Payload: []byte(`{}`), Headers: map[string]string{"Authorization": "Bearer forged", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	if err := f.Publish(context.Background(), &sink.Message{Event: bad, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	fanOut(t, f, "after")
	for _, e := range []store.Endpoint{ea, eb} {
		waitFor(t, 10*time.Second, e.Name+": two done, one failed", func() bool {
			return counts(t, s, e.ID) == store.DeliveryCounts{Done: 2, Failed: 1}
		})
		failed, err := s.DeliveryList(context.Background(), e.ID, store.StatusFailed, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(failed) != 1 || failed[0].ID != bad.ID || failed[0].Attempt != 1 || !strings.Contains(failed[0].LastError, "header Authorization") {
			t.Errorf("%s's failed deliveries %+v, want the forged event's, at its first attempt, naming header Authorization", e.Name, failed)
		}
	}
	for _, rc := range []*receiver.Receiver{a, b} {
		for _, got := range rc.Accepted() {
			if got.Header.Get("Authorization") != "" || got.ID == bad.ID.String() {
				t.Errorf("an endpoint received %s with Authorization %q", got.ID, got.Header.Get("Authorization"))
			}
		}
	}
}
