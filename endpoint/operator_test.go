package endpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// forEachStore runs test on a PostgreSQL store and on a SQLite one.
func forEachStore(t *testing.T, test func(t *testing.T, s outboxEndpoints)) {
	t.Run("postgres", func(t *testing.T) { t.Parallel(); test(t, pgStore(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); test(t, sqliteDriver(t)) })
}

// operatorEvents decodes the operator events rc accepted, of type typ, in
// the order they came.
func operatorEvents(t *testing.T, rc *receiver.Receiver, typ string) []receivedOperatorEvent {
	t.Helper()
	var out []receivedOperatorEvent
	for _, d := range rc.Accepted() {
		if d.EventType != typ {
			continue
		}
		var p endpoint.OperatorEvent
		if err := json.Unmarshal(d.Body, &p); err != nil {
			t.Fatalf("%s payload %s: %v", typ, d.Body, err)
		}
		out = append(out, receivedOperatorEvent{d: d, p: p})
	}
	return out
}

type receivedOperatorEvent struct {
	d receiver.Delivery
	p endpoint.OperatorEvent
}

// waitOperatorEvents waits until rc accepted n operator events of type
// typ, and returns them.
func waitOperatorEvents(t *testing.T, rc *receiver.Receiver, typ string, n int) []receivedOperatorEvent {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("%d %s events received", n, typ), func() bool {
		return len(operatorEvents(t, rc, typ)) >= n
	})
	return operatorEvents(t, rc, typ)
}

// outboxTypes counts the outbox's events by type, whatever their status.
func outboxTypes(t *testing.T, s store.Outbox) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, status := range []string{"pending", "processing", "done", "failed"} {
		recs, err := s.List(context.Background(), store.ListParams{Status: status, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			n[r.EventType]++
		}
	}
	return n
}

// The routing rule: an event whose type begins with "postbox." is wanted
// only by a glob that begins with "postbox." itself; every other event as
// before.
func TestMatchesOperatorEventsOnlyByName(t *testing.T) {
	for _, c := range []struct {
		types []string
		typ   string
		want  bool
	}{
		{nil, "order.created", true},
		{nil, endpoint.EventEndpointDisabled, false},
		{[]string{"*"}, "order.created", true},
		{[]string{"*"}, endpoint.EventEndpointFailing, false},
		{[]string{"post*"}, endpoint.EventEndpointFailing, false},
		{[]string{"order.*", "*"}, endpoint.EventDeadLettersGrew, false},
		{[]string{"postbox.endpoint.*"}, endpoint.EventEndpointDisabled, true},
		{[]string{"postbox.endpoint.*"}, endpoint.EventDeadLettersGrew, false},
		{[]string{"order.*", "postbox.*"}, endpoint.EventDeadLettersGrew, true},
		{[]string{"postbox.*"}, "order.created", false},
		{[]string{"postbox.deadletters.grew"}, endpoint.EventDeadLettersGrew, true},
	} {
		if got := endpoint.Matches(c.types, c.typ); got != c.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", c.types, c.typ, got, c.want)
		}
	}
}

// The fan-out sends operator events only to the endpoints whose types
// name them, never to one without types or with "*", and never an event
// about an endpoint to that endpoint; other events go as before.
func TestFanOutRoutesOperatorEventsToSubscribersButNotTheirSubject(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s outboxEndpoints) {
		ctx := context.Background()
		all := addEndpoint(t, s, "all", "https://all.example/", nil)
		star := addEndpoint(t, s, "star", "https://star.example/", nil, "*")
		prefix := addEndpoint(t, s, "prefix", "https://prefix.example/", nil, "post*")
		ops := addEndpoint(t, s, "ops", "https://ops.example/", nil, "postbox.endpoint.*")
		opsAll := addEndpoint(t, s, "ops-all", "https://ops-all.example/", nil, "order.*", "postbox.*")
		sup := newSupervisor(t, s, nil)
		publish := func(typ, aggregateType, aggregateID string) {
			ev := postbox.Event{ID: postbox.NewID(), AggregateType: aggregateType, AggregateID: aggregateID, EventType: typ, Payload: []byte(`{}`)}
			if err := sup.FanOut().Publish(ctx, &sink.Message{Event: ev, Attempt: 1}); err != nil {
				t.Fatal(err)
			}
		}
		publish("order.created", "order", "1")
		publish(endpoint.EventEndpointFailing, endpoint.AggregateEndpoint, ops.ID.String())
		publish(endpoint.EventEndpointDisabled, endpoint.AggregateEndpoint, all.ID.String())
		publish(endpoint.EventDeadLettersGrew, endpoint.AggregateDeadLetters, opsAll.ID.String()+"/0123456789ab")
		publish(endpoint.EventDeadLettersGrew, endpoint.AggregateDeadLetters, "outbox/0123456789ab")
		want := map[string][]string{
			"all":     {"order.created"},
			"star":    {"order.created"},
			"prefix":  nil,
			"ops":     {"postbox.endpoint.disabled"},
			"ops-all": {"order.created", "postbox.endpoint.failing", "postbox.endpoint.disabled", "postbox.deadletters.grew outbox/0123456789ab"},
		}
		for _, e := range []store.Endpoint{all, star, prefix, ops, opsAll} {
			list, err := s.DeliveryList(ctx, e.ID, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range list {
				what := d.EventType
				if d.AggregateType == endpoint.AggregateDeadLetters {
					what += " " + d.AggregateID
				}
				got = append(got, what)
			}
			if strings.Join(got, ", ") != strings.Join(want[e.Name], ", ") {
				t.Errorf("endpoint %s got deliveries of %q, want %q", e.Name, got, want[e.Name])
			}
		}
	})
}

// A run of failures that outlasted FailingAfter with no failed attempt
// past it (the retry that came after FailingAfter succeeded) was never
// reported failing, so its end is no news: the ops endpoint gets the
// recovered event of a later run that was reported failing, and none of
// the first.
func TestOperatorEventsNoRecoveredWithoutFailing(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s outboxEndpoints) {
		var attempts atomic.Int64
		var failUntil atomic.Int64 // unix nanoseconds: the second run fails until then
		down := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, _ int) int {
			switch n := attempts.Add(1); {
			case n == 1: // the first run: one failure...
				return http.StatusInternalServerError
			case n == 2: // ...and the retry succeeds once FailingAfter has passed
				time.Sleep(600 * time.Millisecond)
				return 0
			case time.Now().UnixNano() < failUntil.Load(): // the second run: failing past FailingAfter
				return http.StatusInternalServerError
			}
			return 0
		})
		ops := receiver.New(t, secret, nil)
		addEndpoint(t, s, "partner", down.URL, nil)
		addEndpoint(t, s, "ops", ops.URL, nil, "postbox.endpoint.*")
		sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
			c.Relay.MaxAttempts = 1000
			c.OperatorEvents = &endpoint.OperatorEventsConfig{Outbox: s, FailingAfter: 300 * time.Millisecond, DeadLetters: -1}
		})
		startRelay(t, s, sup.FanOut(), func(c *relay.Config) { c.Retention = time.Hour })
		enqueue(t, s, "order.created", 1)
		down.WaitAccepted(t, 1, 20*time.Second)
		failUntil.Store(time.Now().Add(time.Second).UnixNano())
		enqueue(t, s, "order.created", 1)
		down.WaitAccepted(t, 2, 30*time.Second)
		failing := waitOperatorEvents(t, ops, endpoint.EventEndpointFailing, 1)[0].p
		recovered := waitOperatorEvents(t, ops, endpoint.EventEndpointRecovered, 1)
		// The writer writes in order: a recovered event of the first run
		// would have been written before the second run's failing one.
		if n := len(operatorEvents(t, ops, endpoint.EventEndpointRecovered)); n != 1 || !recovered[0].p.FailingSince.Equal(*failing.FailingSince) {
			t.Errorf("%d recovered events, the first of the run that began at %v; want one, of the run reported failing at %v", n, recovered[0].p.FailingSince, failing.FailingSince)
		}
	})
}

// An endpoint whose every attempt fails for FailingAfter gets one
// postbox.endpoint.failing, and one postbox.endpoint.recovered when it
// answers again, each delivered once, signed, to the endpoint subscribed
// to them (never to the failing one), with the documented payload: the
// URL redacted, the last error without the URL's secret, the start of
// the failures as the store has it.
func TestOperatorEventsFailingThenRecovered(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s outboxEndpoints) {
		ctx := context.Background()
		const urlSecret = "pw-in-url-7f3kq2"
		var healthy atomic.Bool
		var operatorSeen atomic.Int64
		down := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, _ int) int {
			if endpoint.IsOperatorEvent(d.EventType) {
				operatorSeen.Add(1)
			}
			if healthy.Load() {
				return 0
			}
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "no, not at %s", r.URL.RequestURI()) // the URL's secret, which the event must not repeat
			return receiver.Answered
		})
		ops := receiver.New(t, secret, nil)
		e := addEndpoint(t, s, "partner-a", down.URL+"/hook?password="+urlSecret, nil)
		addEndpoint(t, s, "ops", ops.URL, nil, "postbox.endpoint.*")
		sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
			c.Relay.MaxAttempts = 1000 // the failures go on until it answers
			c.OperatorEvents = &endpoint.OperatorEventsConfig{Outbox: s, FailingAfter: 300 * time.Millisecond, DeadLetters: -1}
		})
		startRelay(t, s, sup.FanOut(), func(c *relay.Config) { c.Retention = time.Hour })
		enqueue(t, s, "order.created", 3)

		failing := waitOperatorEvents(t, ops, endpoint.EventEndpointFailing, 1)[0]
		stored, err := s.EndpointGet(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		p := failing.p
		switch {
		case p.Endpoint == nil || p.Endpoint.ID != e.ID || p.Endpoint.Name != "partner-a":
			t.Errorf("failing event about %+v, want endpoint %s partner-a", p.Endpoint, e.ID)
		case strings.Contains(p.Endpoint.URL, urlSecret) || strings.Contains(p.Endpoint.URL, "/hook") || !strings.Contains(p.Endpoint.URL, strings.TrimPrefix(down.URL, "http://")):
			t.Errorf("failing event's url %q: want %s described (its host, no path nor query)", p.Endpoint.URL, down.URL)
		case p.State != store.EndpointEnabled || p.FailingSince == nil || !p.FailingSince.Equal(stored.FailingSince):
			t.Errorf("failing event: state %q failing_since %v, want enabled and %v", p.State, p.FailingSince, stored.FailingSince)
		case !strings.Contains(p.LastError, "Internal Server Error") || !strings.Contains(p.LastError, "no, not at") || strings.Contains(p.LastError, urlSecret):
			t.Errorf("failing event's last_error %q: want the 500's, without the URL's secret", p.LastError)
		case p.Deliveries == nil || p.ConsolePath != "/endpoints/"+e.ID.String() || !strings.Contains(p.Text, `"partner-a"`):
			t.Errorf("failing event: deliveries %+v, console_path %q, text %q", p.Deliveries, p.ConsolePath, p.Text)
		case p.At.Sub(*p.FailingSince) < 300*time.Millisecond:
			t.Errorf("failing event written %v after the first failure, before FailingAfter", p.At.Sub(*p.FailingSince))
		}
		if failing.d.AggregateType != endpoint.AggregateEndpoint || failing.d.AggregateID != e.ID.String() {
			t.Errorf("failing event's aggregate %s/%s, want %s/%s", failing.d.AggregateType, failing.d.AggregateID, endpoint.AggregateEndpoint, e.ID)
		}

		healthy.Store(true)
		recovered := waitOperatorEvents(t, ops, endpoint.EventEndpointRecovered, 1)[0].p
		if recovered.FailingSince == nil || !recovered.FailingSince.Equal(*p.FailingSince) || recovered.State != store.EndpointEnabled || recovered.LastError != "" {
			t.Errorf("recovered event %+v: want the failing event's failing_since, enabled, no error", recovered)
		}
		down.WaitAccepted(t, 3, 20*time.Second)
		waitFor(t, 20*time.Second, "the operator events delivered", func() bool {
			return len(operatorEvents(t, ops, endpoint.EventEndpointRecovered)) == 1 && counts(t, s, e.ID).Pending == 0
		})
		types := outboxTypes(t, s)
		if types[endpoint.EventEndpointFailing] != 1 || types[endpoint.EventEndpointRecovered] != 1 {
			t.Errorf("the outbox holds %v, want one failing and one recovered event", types)
		}
		if n, m := len(operatorEvents(t, ops, endpoint.EventEndpointFailing)), len(operatorEvents(t, ops, endpoint.EventEndpointRecovered)); n != 1 || m != 1 {
			t.Errorf("the ops endpoint received %d failing and %d recovered events, want one each", n, m)
		}
		for _, d := range ops.Accepted() {
			if !endpoint.IsOperatorEvent(d.EventType) {
				t.Errorf("the ops endpoint, subscribed to postbox.endpoint.*, received a %s", d.EventType)
			}
		}
		if n := operatorSeen.Load(); n != 0 {
			t.Errorf("the failing endpoint, which has no types, was sent %d operator events", n)
		}
		if st := sup.Stats().OperatorEvents; st.Failing != 1 || st.Recovered != 1 || st.Disabled != 0 {
			t.Errorf("Stats().OperatorEvents = %+v, want one failing and one recovered", st)
		}
	})
}

// Two supervisors (two relays) running the same endpoints over one store
// both see it fail for long and both disable it: the outbox holds one
// postbox.endpoint.failing and one postbox.endpoint.disabled, written by
// one of them, the other's copies refused as duplicates.
func TestOperatorEventsWrittenOnceByTwoSupervisors(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s outboxEndpoints) {
		ctx := context.Background()
		// The first two requests wait for each other: with an endpoint
		// concurrency of 1, they are one from each supervisor's lane, so
		// both lanes fail, and neither disables the endpoint before the
		// other tried.
		var mu sync.Mutex
		inFlight := 0
		both := make(chan struct{})
		down := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
			mu.Lock()
			if inFlight++; inFlight == 2 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both:
			case <-time.After(10 * time.Second):
			}
			return http.StatusInternalServerError
		})
		e := addEndpoint(t, s, "partner-b", down.URL, func(e *store.Endpoint) { e.Concurrency = 1 })
		since := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
		if _, err := s.EndpointFailing(ctx, e.ID, since); err != nil {
			t.Fatal(err)
		}
		var routes []store.Route
		for i := range 10 {
			ev := postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprint(i), EventType: "order.created", Payload: []byte(`{}`)}
			routes = append(routes, store.Route{Event: ev, Endpoints: []uuid.UUID{e.ID}})
		}
		if _, err := s.DeliveryInsert(ctx, routes); err != nil {
			t.Fatal(err)
		}
		var sups []*endpoint.Supervisor
		var stops []func()
		for range 2 {
			sup, stop := runSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
				c.Relay.BatchSize = 1
				c.RefreshEvery = time.Hour // each lane stops by its own disabling, not by reading the other's
				c.DisableAfter = 30 * time.Minute
				c.OperatorEvents = &endpoint.OperatorEventsConfig{Outbox: s, DeadLetters: -1}
			})
			sups, stops = append(sups, sup), append(stops, stop)
		}
		waitFor(t, 20*time.Second, "both supervisors disabled the endpoint", func() bool {
			return sups[0].Stats().AutoDisabled == 1 && sups[1].Stats().AutoDisabled == 1
		})
		for _, stop := range stops {
			stop() // writes what each has left
		}
		written := endpoint.OperatorEventCounts{}
		for _, sup := range sups {
			c := sup.Stats().OperatorEvents
			written.Failing += c.Failing
			written.Disabled += c.Disabled
		}
		if written.Failing != 1 || written.Disabled != 1 {
			t.Errorf("the two supervisors wrote %+v, want one failing and one disabled event between them", written)
		}
		types := outboxTypes(t, s)
		if types[endpoint.EventEndpointFailing] != 1 || types[endpoint.EventEndpointDisabled] != 1 || len(types) != 2 {
			t.Fatalf("the outbox holds %v, want one failing and one disabled event", types)
		}
		recs, err := s.List(ctx, store.ListParams{Status: "pending", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			var p endpoint.OperatorEvent
			if err := json.Unmarshal(r.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if !p.FailingSince.Equal(since) || p.Endpoint.ID != e.ID || r.AggregateID != e.ID.String() || r.DedupKey == "" {
				t.Errorf("%s event %+v (dedup key %q): want failing_since %v of endpoint %s", r.EventType, p, r.DedupKey, since, e.ID)
			}
			if r.EventType == endpoint.EventEndpointDisabled && p.State != store.EndpointAutoDisabled {
				t.Errorf("disabled event's state %q", p.State)
			}
		}
	})
}

// A dead-letter group of an endpoint (its failed deliveries sharing an
// error) gets a postbox.deadletters.grew each time it reaches another
// multiple of DeadLetters, delivered to the endpoint subscribed to them;
// a group purged and grown again is news again. The groups found at the
// start are the base.
func TestOperatorEventsEndpointDeadLettersGrew(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s outboxEndpoints) {
		ctx := context.Background()
		gone := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int { return http.StatusGone })
		ops := receiver.New(t, secret, nil)
		e := addEndpoint(t, s, "partner-c", gone.URL, nil, "order.*")
		addEndpoint(t, s, "ops", ops.URL, nil, "postbox.deadletters.*")
		// The first check finds none or two (below the threshold): the
		// base is nothing either way.
		sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
			c.OperatorEvents = &endpoint.OperatorEventsConfig{Outbox: s, DeadLetters: 3, CheckEvery: 50 * time.Millisecond}
		})
		startRelay(t, s, sup.FanOut(), nil)
		enqueue(t, s, "order.created", 2)
		waitFor(t, 20*time.Second, "two dead letters", func() bool { return counts(t, s, e.ID).Failed == 2 })
		enqueue(t, s, "order.created", 1) // 3: the first multiple
		first := waitOperatorEvents(t, ops, endpoint.EventDeadLettersGrew, 1)[0]
		p := first.p
		switch {
		case p.Group == nil || p.Group.Of != "endpoint" || p.Group.Count != 3 || p.Group.Threshold != 3 || !strings.Contains(p.Group.Fingerprint, "Gone"):
			t.Errorf("grew event's group %+v, want 3 of the endpoint's dead letters with 410 Gone", p.Group)
		case p.Endpoint == nil || p.Endpoint.ID != e.ID || p.ConsolePath != "/endpoints/"+e.ID.String() || !strings.Contains(p.LastError, "Gone"):
			t.Errorf("grew event %+v: want it about endpoint %s, its page, its error", p, e.ID)
		case p.Deliveries == nil || p.Deliveries.Failed != 3:
			t.Errorf("grew event's deliveries %+v, want 3 failed", p.Deliveries)
		case first.d.AggregateType != endpoint.AggregateDeadLetters || first.d.AggregateID != e.ID.String()+"/"+p.Group.ID:
			t.Errorf("grew event's aggregate %s/%s", first.d.AggregateType, first.d.AggregateID)
		}
		enqueue(t, s, "order.created", 2)
		waitFor(t, 20*time.Second, "five dead letters", func() bool { return counts(t, s, e.ID).Failed == 5 })
		enqueue(t, s, "order.created", 1) // 6: the second multiple
		second := waitOperatorEvents(t, ops, endpoint.EventDeadLettersGrew, 2)[1].p
		if second.Group.Count != 6 || second.Group.ID != p.Group.ID {
			t.Errorf("second grew event's group %+v, want the same group at 6", second.Group)
		}
		n, err := s.FailedPurge(ctx, store.FailedPurgeParams{FailedSelection: store.FailedSelection{FailedFilter: store.FailedFilter{Endpoint: e.ID}, All: true}})
		if err != nil || n != 6 {
			t.Fatalf("purge: %d, %v", n, err)
		}
		enqueue(t, s, "order.created", 3)
		third := waitOperatorEvents(t, ops, endpoint.EventDeadLettersGrew, 3)[2].p
		if third.Group.Count != 3 || !third.Group.FirstSeen.After(second.Group.FirstSeen) {
			t.Errorf("grew event after a purge %+v, want the group grown again to 3", third.Group)
		}
		if got := sup.Stats().OperatorEvents.DeadLettersGrew; got != 3 {
			t.Errorf("Stats().OperatorEvents.DeadLettersGrew = %d, want 3", got)
		}
	})
}

// The outbox's own dead letters are grouped too: a group of failed
// outbox events reaching DeadLetters gets an event about the outbox, its
// page the Failed page; the groups there at the start are the base.
func TestOperatorEventsOutboxDeadLettersGrew(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s outboxEndpoints) {
		failOutboxEvents(t, s, 3, "broker said: no route to partner 42") // the base: no event
		logs := &logbuf.Buffer{}
		sup, stop := runSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
			c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c.OperatorEvents = &endpoint.OperatorEventsConfig{Outbox: s, DeadLetters: 2, CheckEvery: 50 * time.Millisecond}
		})
		waitFor(t, 10*time.Second, "the first check, which takes the base", func() bool {
			return strings.Contains(logs.String(), `msg="dead-letter groups checked" places=1 groups=1 grew=0 base=true`)
		})
		failOutboxEvents(t, s, 1, "broker said: no route to partner 7") // 4 of one fingerprint: the second multiple
		var recs []store.Record
		waitFor(t, 20*time.Second, "a grew event in the outbox", func() bool {
			all, err := s.List(context.Background(), store.ListParams{Status: "pending", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			recs = nil
			for _, r := range all {
				if r.EventType == endpoint.EventDeadLettersGrew {
					recs = append(recs, r)
				}
			}
			return len(recs) > 0
		})
		stop()
		if len(recs) != 1 {
			t.Fatalf("%d grew events, want 1", len(recs))
		}
		var p endpoint.OperatorEvent
		if err := json.Unmarshal(recs[0].Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Endpoint != nil || p.Group == nil || p.Group.Of != "outbox" || p.Group.Count != 4 || p.Group.Fingerprint != "broker said: no route to partner N" ||
			p.ConsolePath != "/failed" || recs[0].AggregateID != "outbox/"+p.Group.ID || p.LastError != "broker said: no route to partner 7" {
			t.Errorf("outbox grew event %+v (aggregate %s), want the outbox's group of 4", p, recs[0].AggregateID)
		}
		if got := sup.Stats().OperatorEvents.DeadLettersGrew; got != 1 {
			t.Errorf("Stats().OperatorEvents.DeadLettersGrew = %d, want 1", got)
		}
	})
}

// unreachableOutbox is an outbox whose Enqueue fails while fail is set,
// as when the database cannot be reached.
type unreachableOutbox struct {
	store.Outbox
	fail atomic.Bool
}

func (u *unreachableOutbox) Enqueue(ctx context.Context, events ...postbox.Event) error {
	if u.fail.Load() {
		return errors.New("injected: the database is unreachable")
	}
	return u.Outbox.Enqueue(ctx, events...)
}

// An operator event that cannot be written (the outbox unreachable) is
// kept and written once the outbox answers again: nothing is lost.
func TestOperatorEventWrittenOnceTheOutboxAnswers(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s outboxEndpoints) {
		down := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
			return http.StatusInternalServerError
		})
		addEndpoint(t, s, "partner-d", down.URL, nil)
		outbox := &unreachableOutbox{Outbox: s}
		outbox.fail.Store(true)
		logs := &logbuf.Buffer{}
		sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
			c.Relay.MaxAttempts = 1000
			c.DisableAfter = 200 * time.Millisecond
			c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			c.OperatorEvents = &endpoint.OperatorEventsConfig{Outbox: outbox, CheckEvery: 50 * time.Millisecond}
		})
		fanOut(t, sup.FanOut(), "order.created")
		waitFor(t, 20*time.Second, "the endpoint disabled, and writing its event failed twice", func() bool {
			return sup.Stats().AutoDisabled == 1 && strings.Count(logs.String(), "writing operator events failed") >= 2
		})
		if n := outboxTypes(t, s)[endpoint.EventEndpointDisabled]; n != 0 {
			t.Fatalf("%d disabled events written through an unreachable outbox", n)
		}
		outbox.fail.Store(false)
		waitFor(t, 20*time.Second, "the disabled event written", func() bool { return outboxTypes(t, s)[endpoint.EventEndpointDisabled] == 1 })
		if got := sup.Stats().OperatorEvents.Disabled; got != 1 {
			t.Errorf("Stats().OperatorEvents.Disabled = %d, want 1", got)
		}
	})
}

// failOutboxEvents enqueues n events and fails them with lastError, as a
// relay that used their attempts would.
func failOutboxEvents(t *testing.T, s store.Outbox, n int, lastError string) {
	t.Helper()
	ctx := context.Background()
	enqueue(t, s, "order.created", n)
	claimed, err := s.Claim(ctx, store.ClaimParams{Owner: "test", Limit: n, Lease: time.Minute})
	if err != nil || len(claimed) != n {
		t.Fatalf("claimed %d of %d: %v", len(claimed), n, err)
	}
	var failed []store.Failure
	var ended []int64
	for _, c := range claimed {
		failed = append(failed, store.Failure{ID: c.ID, LastError: lastError, Lease: c.Lease})
		if c.Lease != 0 {
			ended = append(ended, c.Lease)
		}
	}
	if err := s.Settle(ctx, store.SettleParams{Owner: "test", Failed: failed, Ended: ended}); err != nil {
		t.Fatal(err)
	}
}

// runSupervisor runs a supervisor with quick test settings and returns it
// with what stops it (waiting for Run to return); the test's end stops it
// too.
func runSupervisor(t *testing.T, s store.Endpoints, tweak func(*endpoint.SupervisorConfig)) (*endpoint.Supervisor, func()) {
	t.Helper()
	sup := newSupervisor(t, s, func(c *endpoint.SupervisorConfig) {
		c.Relay = relay.Config{Lease: 5 * time.Second, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
			ProbeInterval: 100 * time.Millisecond, ShutdownTimeout: 2 * time.Second}
		c.PollInterval, c.RefreshEvery, c.BreakerFailures, c.AttemptsFlush = 50*time.Millisecond, 100*time.Millisecond, 1000, 20*time.Millisecond
		if tweak != nil {
			tweak(c)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := sup.Run(ctx); err != nil {
			t.Errorf("supervisor: %v", err)
		}
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return sup, stop
}
