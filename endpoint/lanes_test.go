package endpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// In ordered mode each endpoint receives each aggregate's events in order,
// although a fifth of the attempts fail at random, and an endpoint's
// failures hold back only its own lane: with every delivery written first
// (deliveries kept), and with the fan-out delivering directly to the
// endpoints that have nothing queued.
func TestOrderedLanesKeepEachAggregatesOrderPerEndpoint(t *testing.T) {
	t.Parallel()
	t.Run("written first", func(t *testing.T) { orderedLanes(t, true) })
	t.Run("direct", func(t *testing.T) { orderedLanes(t, false) })
}

func orderedLanes(t *testing.T, keepDelivered bool) {
	s := pgtest.OrderedStore(t).Driver()
	const aggregates, perAggregate = 8, 12
	// The first requests succeed: the direct case then starts with
	// deliveries made directly (a failure queues the endpoint's next ones).
	flaky := func() receiver.Respond {
		var requests atomic.Int64
		return func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
			if requests.Add(1) > 8 && rand.N(5) == 0 {
				return http.StatusInternalServerError
			}
			return 0
		}
	}
	a := receiver.New(t, secret, flaky())
	b := receiver.New(t, secret, flaky())
	addEndpoint(t, s, "a", a.URL, nil)
	addEndpoint(t, s, "b", b.URL, func(e *store.Endpoint) { e.Concurrency = 8 })
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.Relay.Ordered = true
		c.Relay.MaxAttempts = 1000
		c.KeepDelivered = keepDelivered
	})
	waitFor(t, 10*time.Second, "both lanes running", func() bool { return sup.Stats().Lanes == 2 })
	f := sup.FanOut()
	// One event of an aggregate of its own first: its deliveries, written,
	// are what the lanes measure the endpoints with (the direct case then
	// offers the next ones).
	fanOut(t, f, "warm.up")
	waitFor(t, 10*time.Second, "the warm-up delivered", func() bool { return sup.Stats().Delivered == 2 })
	for i := range perAggregate {
		for agg := range aggregates {
			ev := postbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: strconv.Itoa(agg),
				EventType: "order.changed", Payload: []byte(`{"seq":` + strconv.Itoa(i) + `}`)}
			if err := f.Publish(context.Background(), &sink.Message{Event: ev, Attempt: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, rc := range map[string]*receiver.Receiver{"a": a, "b": b} {
		rc.WaitAccepted(t, aggregates*perAggregate+1, 60*time.Second)
		next := map[string]int{}
		for _, d := range rc.Accepted() {
			if d.EventType == "warm.up" {
				continue
			}
			var p struct{ Seq int }
			if err := json.Unmarshal(d.Body, &p); err != nil {
				t.Fatal(err)
			}
			if p.Seq != next[d.AggregateID] {
				t.Errorf("endpoint %s, aggregate %s: received event %d, want %d", name, d.AggregateID, p.Seq, next[d.AggregateID])
			}
			next[d.AggregateID] = p.Seq + 1
		}
	}
	if st := sup.Stats(); st.Retried == 0 || st.Failed != 0 {
		t.Errorf("stats = %+v: want retries (a fifth of attempts failed) and no failure", st)
	}
	if st := sup.Stats(); keepDelivered != (st.Direct == 0) {
		t.Errorf("stats = %+v: want deliveries made directly exactly when delivered ones are not kept", st)
	}
}

// An endpoint that refuses connections is an outage of its lane: its
// deliveries are probed, no attempt counts and none fails, while a healthy
// endpoint and a slow one receive theirs.
func TestUnreachableEndpointBurnsNoAttempts(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	const n = 20
	healthy := receiver.New(t, secret, nil)
	slow := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, _ receiver.Delivery, _ int) int {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
		}
		return 0
	})
	eh := addEndpoint(t, s, "healthy", healthy.URL, nil)
	es := addEndpoint(t, s, "slow", slow.URL, func(e *store.Endpoint) { e.Concurrency = 2 })
	ed := addEndpoint(t, s, "dead", refusingURL(t), nil)
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.Relay.MaxAttempts = 2 })
	types := make([]string, n)
	for i := range types {
		types[i] = "order.created"
	}
	fanOut(t, sup.FanOut(), types...)

	healthy.WaitAccepted(t, n, 20*time.Second)
	if c := counts(t, s, es.ID); c.Pending+c.Processing == 0 {
		t.Errorf("slow endpoint's counts %+v: its deliveries all ended before the healthy one's", c)
	}
	waitFor(t, 10*time.Second, "the healthy endpoint's deliveries done", func() bool { return counts(t, s, eh.ID) == store.DeliveryCounts{Done: n} })
	waitFor(t, 10*time.Second, "the dead endpoint probed", func() bool {
		attempts, err := s.AttemptList(context.Background(), ed.ID, 10)
		return err == nil && len(attempts) >= 3
	})
	if c := counts(t, s, ed.ID); c.Failed != 0 || c.Pending+c.Processing != n {
		t.Errorf("dead endpoint's counts %+v, want all %d waiting, none failed", c, n)
	}
	list, err := s.DeliveryList(context.Background(), ed.ID, "", n)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		// A probe under way counts its attempt until it is released.
		if d.Attempt > 1 || d.Attempt == 1 && d.Status != store.StatusProcessing {
			t.Errorf("dead endpoint's %s delivery %s has %d attempts counted, want 0 (1 while probed)", d.Status, d.ID, d.Attempt)
		}
	}
	attempts, err := s.AttemptList(context.Background(), ed.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 1 || !strings.Contains(attempts[0].Error, "connection refused") {
		t.Errorf("dead endpoint's last attempt %+v, want a refused connection logged", attempts)
	}
	// A probe's release is counted once its settle is written, which may
	// come after its attempt is logged.
	waitFor(t, 10*time.Second, "the dead endpoint's probes released", func() bool { return sup.Stats().Released > 0 })
	if st := sup.Stats(); st.Failed != 0 {
		t.Errorf("stats = %+v, want none failed and the dead endpoint's deliveries released", st)
	}
	slow.WaitAccepted(t, n, 30*time.Second)
}

// An endpoint answering 500 opens its breaker after BreakerFailures
// attempts: it is then probed one event at a time, counting no attempt (no
// delivery fails however many probes fail), and the breaker closes once the
// endpoint answers again.
func TestBreakerOpensOnFailuresProbesAndCloses(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	const maxAttempts = 3
	var healthy atomic.Bool
	// Requests that arrived once the breaker had opened: the probes, and
	// at most one request sent before it opened.
	var whileOpen atomic.Int64
	var sup *endpoint.Supervisor
	rc := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, _ receiver.Delivery, _ int) int {
		if healthy.Load() {
			return 0
		}
		if sup.Stats().BreakerOpened > 0 {
			whileOpen.Add(1)
		}
		return http.StatusInternalServerError
	})
	e := addEndpoint(t, s, "flaky", rc.URL, func(e *store.Endpoint) { e.Concurrency = 2 })
	sup = startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.BreakerFailures, c.BreakerPauseMin, c.BreakerPauseMax = 2, 50*time.Millisecond, 200*time.Millisecond
		c.Relay.MaxAttempts = maxAttempts
	})
	fanOut(t, sup.FanOut(), "a", "b", "c")
	// Three events of three attempts each: probes that counted would
	// fail them all before this many.
	waitFor(t, 20*time.Second, "the breaker opened and probes failed, or a delivery failed", func() bool {
		return whileOpen.Load() >= 3*maxAttempts+2 || counts(t, s, e.ID).Failed > 0
	})
	if st := sup.Stats(); st.BreakerOpened != 1 || st.Failed != 0 {
		t.Errorf("stats = %+v, want the breaker opened once (probes failing reopen it) and nothing failed", st)
	}
	list, err := s.DeliveryList(context.Background(), e.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if d.Status == store.StatusFailed || d.Attempt >= maxAttempts {
			t.Errorf("delivery %s: %s after %d attempts, want the probes not counted", d.ID, d.Status, d.Attempt)
		}
	}
	healthy.Store(true)
	rc.WaitAccepted(t, 3, 10*time.Second)
	waitFor(t, 5*time.Second, "all delivered", func() bool { return counts(t, s, e.ID).Done == 3 })
}

// The breaker's state is in the store for other processes (postbox
// status): open until its next probe from when it opens, later each time a
// failed probe opens it again, cleared when it closes; and a lane clears
// the state a previous lane left (a relay that stopped with its breaker
// open), its own breaker starting closed.
func TestBreakerStateRecordedInTheStore(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	ctx := context.Background()
	var healthy atomic.Bool
	rc := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		if healthy.Load() {
			return 0
		}
		return http.StatusInternalServerError
	})
	e := addEndpoint(t, s, "flaky", rc.URL, nil)
	left := addEndpoint(t, s, "left open", receiver.New(t, secret, nil).URL, nil)
	if err := s.EndpointBreaker(ctx, left.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	openUntil := func(id uuid.UUID) time.Time {
		t.Helper()
		got, err := s.EndpointGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got.BreakerOpenUntil
	}
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.BreakerFailures, c.BreakerPauseMin, c.BreakerPauseMax = 2, 50*time.Millisecond, 200*time.Millisecond
		c.Relay.MaxAttempts = 1000
	})
	waitFor(t, 10*time.Second, "the breaker a previous lane left open cleared", func() bool { return openUntil(left.ID).IsZero() })
	fanOut(t, sup.FanOut(), "a", "b", "c")
	var first time.Time
	waitFor(t, 10*time.Second, "the breaker recorded open", func() bool {
		first = openUntil(e.ID)
		return !first.IsZero()
	})
	if st := sup.Stats(); st.BreakerOpened == 0 {
		t.Errorf("the store says the breaker is open until %v, the stats that it never opened: %+v", first, st)
	}
	waitFor(t, 10*time.Second, "a failed probe recorded, the breaker open until later", func() bool { return openUntil(e.ID).After(first) })
	healthy.Store(true)
	waitFor(t, 10*time.Second, "the breaker recorded closed", func() bool { return openUntil(e.ID).IsZero() })
	waitFor(t, 10*time.Second, "all delivered", func() bool { return counts(t, s, e.ID).Done == 3 })
	if until := openUntil(e.ID); !until.IsZero() {
		t.Errorf("the breaker recorded open until %v once every delivery went through", until)
	}
}

// A shadow endpoint's deliveries that used their attempts are dropped,
// never failed, and its lane never alerts: it logs at info level at most.
func TestShadowEndpointNeverDeadLetters(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	rc := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		return http.StatusInternalServerError
	})
	e := addEndpoint(t, s, "shadow", rc.URL, func(e *store.Endpoint) { e.Shadow = true })
	var logs logbuf.Buffer
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.Relay.MaxAttempts = 2
		c.Relay.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	fanOut(t, sup.FanOut(), "a", "b", "c")
	waitFor(t, 10*time.Second, "three dropped", func() bool { return counts(t, s, e.ID) == store.DeliveryCounts{Dropped: 3} })
	waitFor(t, 5*time.Second, "three dropped in the stats", func() bool { return sup.Stats().Dropped == 3 })
	if st := sup.Stats(); st.Failed != 0 || st.Retried != 3 {
		t.Errorf("stats = %+v, want 3 retried, 3 dropped, none failed", st)
	}
	text := logs.String()
	if !strings.Contains(text, "attempts exhausted") {
		t.Errorf("the shadow lane's log says nothing of the attempts exhausted:\n%s", text)
	}
	if strings.Contains(text, "level=WARN") || strings.Contains(text, "level=ERROR") {
		t.Errorf("the shadow lane alerted:\n%s", text)
	}
}

// An endpoint failing for DisableAfter is disabled and its lane stopped;
// its deliveries keep accumulating, and enabling it delivers them.
func TestAutoDisableThenEnableDeliversTheAccumulated(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	var healthy atomic.Bool
	rc := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		if healthy.Load() {
			return 0
		}
		return http.StatusInternalServerError
	})
	e := addEndpoint(t, s, "down", rc.URL, nil)
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.DisableAfter = 300 * time.Millisecond })
	f := sup.FanOut()
	fanOut(t, f, "a", "b")
	waitFor(t, 10*time.Second, "the endpoint auto-disabled", func() bool {
		got, err := s.EndpointGet(context.Background(), e.ID)
		return err == nil && got.State == store.EndpointAutoDisabled
	})
	waitFor(t, 5*time.Second, "one endpoint auto-disabled in the stats, its lane stopped", func() bool {
		st := sup.Stats()
		return st.AutoDisabled == 1 && st.Lanes == 0
	})
	fanOut(t, f, "c", "d", "e")
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

// Disabling an endpoint stops its lane: nothing more is sent to it, and
// what was written for it waits, not failed, until it is enabled again.
func TestDisablingStopsDeliveries(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	rc := receiver.New(t, secret, nil)
	e := addEndpoint(t, s, "a", rc.URL, nil)
	sup := startSupervisor(t, s, nil)
	f := sup.FanOut()
	fanOut(t, f, "a")
	rc.WaitAccepted(t, 1, 10*time.Second)
	if err := s.EndpointSetState(context.Background(), e.ID, store.EndpointDisabled); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the lane stopped", func() bool { return sup.Stats().Lanes == 0 })
	// Written by another process: the fan-out of this one routes no more
	// to a disabled endpoint.
	if _, err := s.DeliveryInsert(context.Background(), []store.Route{{Endpoints: []uuid.UUID{e.ID},
		Event: postbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: "1", EventType: "b", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	fanOut(t, f, "c")
	time.Sleep(300 * time.Millisecond) // a running lane would have delivered it by now
	if got := len(rc.Accepted()); got != 1 {
		t.Errorf("a disabled endpoint received %d events, want the one before", got)
	}
	if c := counts(t, s, e.ID); c.Pending != 1 || c.Failed != 0 {
		t.Errorf("counts %+v, want the delivery written meanwhile waiting", c)
	}
	if err := s.EndpointSetState(context.Background(), e.ID, store.EndpointEnabled); err != nil {
		t.Fatal(err)
	}
	rc.WaitAccepted(t, 2, 10*time.Second)
}

// During a rotation's grace period both the new and the old secret sign;
// once it ended, the lane restarts with the new one alone.
func TestRotationSignsWithBothSecretsDuringTheGrace(t *testing.T) {
	// Not parallel: it gives the supervisor 300 ms to read the rotation,
	// which the load of tests run beside it may delay.
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
	sup := startSupervisor(t, s, nil)
	f := sup.FanOut()
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
	time.Sleep(time.Until(grace) + 300*time.Millisecond) // the supervisor reads the endpoints every 100ms
	waitFor(t, 5*time.Second, "the lane restarted", func() bool { return sup.Stats().Lanes == 1 })
	fanOut(t, f, "b")
	r = next()
	if sigs := strings.Fields(r.h.Get("webhook-signature")); len(sigs) != 1 || !verifies(r, third) || verifies(r, second) {
		t.Errorf("after the grace: signatures %q, want the newest secret's alone", r.h.Get("webhook-signature"))
	}
}

// Every attempt is logged, with the status and the first KiB of the
// answer, and the log is purged after the retention.
func TestAttemptsLogWrittenAndPurged(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	long := strings.Repeat("x", 3000)
	rc := receiver.New(t, secret, func(w http.ResponseWriter, _ *http.Request, _ receiver.Delivery, n int) int {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(long))
			return receiver.Answered
		}
		return 0
	})
	e := addEndpoint(t, s, "a", rc.URL, nil)
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.Retention = time.Hour })
	fanOut(t, sup.FanOut(), "a")
	rc.WaitAccepted(t, 1, 10*time.Second)
	var attempts []store.Attempt
	waitFor(t, 5*time.Second, "two attempts logged", func() bool {
		attempts, _ = s.AttemptList(context.Background(), e.ID, 10)
		return len(attempts) == 2
	})
	first, second := attempts[1], attempts[0]
	if first.StatusCode != 500 || first.Response != long[:store.AttemptResponseMax] || !strings.Contains(first.Error, "status 500") || first.Attempt != 1 {
		t.Errorf("first attempt = %+v", first)
	}
	if second.StatusCode != 200 || second.Error != "" || second.Attempt != 2 || second.Duration <= 0 {
		t.Errorf("second attempt = %+v", second)
	}
	waitFor(t, 5*time.Second, "the delivery kept, done", func() bool { return counts(t, s, e.ID) == store.DeliveryCounts{Done: 1} })

	startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.Retention = time.Millisecond })
	waitFor(t, 5*time.Second, "the attempts and the delivered row purged", func() bool {
		attempts, _ = s.AttemptList(context.Background(), e.ID, 10)
		return len(attempts) == 0 && counts(t, s, e.ID) == store.DeliveryCounts{}
	})
	if st := sup.Stats(); st.Delivered != 1 || st.Retried != 1 {
		t.Errorf("stats = %+v, want 1 retried, 1 delivered", st)
	}
}

// A delivery the SSRF guard refuses fails at its first attempt with an
// error that says so, whole, in the row and in the attempts log; an
// endpoint allowed private addresses is delivered to.
func TestGuardRefusalSaysSoWhole(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	refused := receiver.New(t, secret, nil)
	allowed := receiver.New(t, secret, nil)
	er := addEndpoint(t, s, "internal", refused.URL, nil)
	addEndpoint(t, s, "allowed", allowed.URL, func(e *store.Endpoint) { e.AllowPrivate = true })
	client := func(allowPrivate bool) *http.Client {
		g, err := guard.New(guard.Config{AllowPrivate: allowPrivate})
		if err != nil {
			t.Fatal(err)
		}
		return g.Client(5 * time.Second)
	}
	guarded, private := client(false), client(true)
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.Client = func(e store.Endpoint) *http.Client {
			if e.AllowPrivate {
				return private
			}
			return guarded
		}
	})
	fanOut(t, sup.FanOut(), "a")
	allowed.WaitAccepted(t, 1, 10*time.Second)
	waitFor(t, 10*time.Second, "the refused delivery failed", func() bool { return counts(t, s, er.ID).Failed == 1 })
	failed, err := s.DeliveryList(context.Background(), er.ID, store.StatusFailed, 1)
	if err != nil {
		t.Fatal(err)
	}
	const want = "the SSRF guard refused to connect to the endpoint: 127.0.0.1 is loopback"
	const hint = "allow it with --allow-private-endpoints or an allowlist (or let this endpoint alone reach private addresses: its allow-private setting)"
	if len(failed) != 1 || failed[0].Attempt != 1 || !strings.Contains(failed[0].LastError, want) || !strings.HasSuffix(failed[0].LastError, hint) {
		t.Errorf("failed deliveries %+v, want one at its first attempt saying %q ... %q", failed, want, hint)
	}
	var attempts []store.Attempt
	waitFor(t, 5*time.Second, "the attempt logged", func() bool {
		attempts, _ = s.AttemptList(context.Background(), er.ID, 10)
		return len(attempts) == 1
	})
	if a := attempts[0]; !strings.Contains(a.Error, want) || !strings.HasSuffix(a.Error, hint) || a.StatusCode != 0 {
		t.Errorf("attempt %+v, want the guard's refusal, whole", a)
	}
	if got := len(refused.Accepted()); got != 0 {
		t.Errorf("the refused endpoint received %d events", got)
	}
}

// An endpoint's rate limit bounds the deliveries it receives per second.
func TestRateLimitSpacesTheDeliveries(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	rc := receiver.New(t, secret, nil)
	addEndpoint(t, s, "slow", rc.URL, func(e *store.Endpoint) { e.RatePerSecond = 10 })
	sup := startSupervisor(t, s, nil)
	fanOut(t, sup.FanOut(), "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o")
	rc.WaitAccepted(t, 15, 10*time.Second)
	got := rc.Accepted()
	// A bucket of 10 tokens refilled at 10/s: the 15th delivery cannot
	// arrive before the bucket refilled 5 of them, 0.5 s after the first.
	if spread := got[len(got)-1].At.Sub(got[0].At); spread < 400*time.Millisecond {
		t.Errorf("15 deliveries arrived within %v at 10 per second with a burst of 10", spread)
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
	t.Parallel()
	s := pgStore(t)
	a := receiver.New(t, secret, nil)
	b := receiver.New(t, secret, nil)
	ea := addEndpoint(t, s, "a", a.URL, nil)
	eb := addEndpoint(t, s, "b", b.URL, nil)
	sup := startSupervisor(t, s, nil)
	f := sup.FanOut()
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
		rc.WaitAccepted(t, 2, 10*time.Second)
		for _, got := range rc.Accepted() {
			if got.Header.Get("Authorization") != "" || got.ID == bad.ID.String() {
				t.Errorf("an endpoint received %s with Authorization %q", got.ID, got.Header.Get("Authorization"))
			}
		}
	}
}

// New refuses an invalid Config naming the field.
func TestNewRefusesAnInvalidConfig(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	for _, c := range []struct {
		cfg  endpoint.SupervisorConfig
		want string
	}{
		{endpoint.SupervisorConfig{}, "SupervisorConfig.Store"},
		{endpoint.SupervisorConfig{Store: s}, "SupervisorConfig.Keyring is required"},
		{endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, BreakerFailures: -1}, "SupervisorConfig.BreakerFailures"},
		{endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, BreakerPauseMin: time.Minute, BreakerPauseMax: time.Second}, "SupervisorConfig.BreakerPauseMax"},
		{endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, DisableAfter: -time.Second}, "SupervisorConfig.DisableAfter"},
		{endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, Relay: relay.Config{Lease: time.Millisecond}}, "SupervisorConfig.Relay: relay: Config.Lease"},
		{endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, Relay: relay.Config{PublishBatch: 10}}, "SupervisorConfig.Relay.PublishBatch"},
		{endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, Webhook: webhook.Config{Timeout: -time.Second}}, "SupervisorConfig.Webhook: webhook: Config.Timeout"},
		{endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, OperatorEvents: &endpoint.OperatorEventsConfig{}}, "SupervisorConfig.OperatorEvents.Outbox is required"},
		{endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, OperatorEvents: &endpoint.OperatorEventsConfig{Outbox: s, FailingAfter: -time.Second}}, "SupervisorConfig.OperatorEvents.FailingAfter -1s is negative"},
		{endpoint.SupervisorConfig{Store: s, Keyring: testKeyring, OperatorEvents: &endpoint.OperatorEventsConfig{Outbox: s, CheckEvery: -time.Second}}, "SupervisorConfig.OperatorEvents.CheckEvery -1s is negative"},
	} {
		if _, err := endpoint.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

// TestDeliveredDeletedUnlessKept: by default a delivered delivery is
// deleted once delivered (the attempts log keeps its record); with
// KeepDelivered it stays, marked done.
func TestDeliveredDeletedUnlessKept(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("KeepDelivered=", keep), func(t *testing.T) {
			s := pgStore(t)
			rc := receiver.New(t, secret, nil)
			e := addEndpoint(t, s, "a", rc.URL, nil)
			sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.KeepDelivered = keep })
			fanOut(t, sup.FanOut(), "a", "b")
			rc.WaitAccepted(t, 2, 10*time.Second)
			want := store.DeliveryCounts{}
			if keep {
				want.Done = 2
			}
			waitFor(t, 5*time.Second, fmt.Sprintf("counts %+v", want), func() bool { return counts(t, s, e.ID) == want })
			waitFor(t, 5*time.Second, "two attempts logged", func() bool {
				attempts, _ := s.AttemptList(context.Background(), e.ID, 10)
				return len(attempts) == 2
			})
		})
	}
}
