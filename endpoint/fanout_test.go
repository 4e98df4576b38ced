package endpoint_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// Events written by plain SQL go, through the relay, the fan-out and the
// lanes, to exactly the endpoints whose filter matches them, each once,
// signed.
func TestFanOutAndLanesDeliverEachEventOnceToEachMatchingEndpoint(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		s := pgStore(t)
		testDeliverOnce(t, s, func(aggregateID, eventType string) (id string, err error) {
			err = s.Pool().QueryRow(context.Background(), "insert into "+s.Table("outbox_events")+
				" (aggregate_type, aggregate_id, event_type, payload) values ('order', $1, $2, '{\"n\": 1}') returning id::text",
				aggregateID, eventType).Scan(&id)
			return id, err
		})
	})
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "postbox.db"), sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		testDeliverOnce(t, s.Driver(), func(aggregateID, eventType string) (id string, err error) {
			err = s.DB().QueryRow("insert into outbox_events (aggregate_type, aggregate_id, event_type, payload) values ('order', ?, ?, '{\"n\": 1}') returning id",
				aggregateID, eventType).Scan(&id)
			return id, err
		})
	})
}

// testDeliverOnce is TestFanOutAndLanesDeliverEachEventOnceToEachMatchingEndpoint
// on s, into which insert writes an event with plain SQL.
func testDeliverOnce(t *testing.T, s interface {
	store.Outbox
	store.Endpoints
}, insert func(aggregateID, eventType string) (string, error)) {
	ctx := context.Background()
	orders := receiver.New(t, secret, nil)
	everything := receiver.New(t, secret, nil)
	payments := receiver.New(t, secret, nil)
	addEndpoint(t, s, "orders", orders.URL, nil, "order.*")
	addEndpoint(t, s, "everything", everything.URL, nil)
	addEndpoint(t, s, "payments", payments.URL, nil, "payment.succeeded", "refund.?")
	sup := startSupervisor(t, s, nil)

	types := []string{"order.created", "order.paid", "payment.succeeded", "payment.failed", "refund.a", "audit.x"}
	want := map[string][]string{}
	const n = 120
	for i := range n {
		typ := types[i%len(types)]
		id, err := insert(fmt.Sprint(i), typ)
		if err != nil {
			t.Fatal(err)
		}
		want["everything"] = append(want["everything"], id)
		for name, types := range map[string][]string{"orders": {"order.*"}, "payments": {"payment.succeeded", "refund.?"}} {
			if endpoint.Matches(types, typ) {
				want[name] = append(want[name], id)
			}
		}
	}
	startRelay(t, s, sup.FanOut(), nil)

	total := 0
	for name, rc := range map[string]*receiver.Receiver{"orders": orders, "everything": everything, "payments": payments} {
		rc.WaitAccepted(t, len(want[name]), 30*time.Second)
		total += len(want[name])
		var got []string
		for _, d := range rc.Accepted() {
			got = append(got, d.ID)
		}
		slices.Sort(got)
		slices.Sort(want[name])
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s received %d events (%d distinct), want exactly the %d its filter matches, once each", name, len(got), len(slices.Compact(got)), len(want[name]))
		}
		if rc.BadSignatures() != 0 {
			t.Errorf("%s got %d requests with a bad signature", name, rc.BadSignatures())
		}
	}
	waitFor(t, 10*time.Second, "the outbox drained and every delivery counted", func() bool {
		st, err := s.Stats(ctx)
		return err == nil && st.Pending == 0 && st.Processing == 0 && sup.Stats().Delivered == int64(total)
	})
	st := sup.Stats()
	if st.Written != int64(total) || st.Unrouted != 0 || st.Failed != 0 || st.Lanes != 3 {
		t.Errorf("stats = %+v, want %d written and delivered, none unrouted nor failed, 3 lanes", st, total)
	}
	if f := sup.FanOut(); f.Routed() != n {
		t.Errorf("routed = %d, want %d (every event, the everything endpoint takes all)", f.Routed(), n)
	}
}

// An event no endpoint wants is published (done) and counted; disabled
// endpoints get no deliveries, auto-disabled ones do.
func TestFanOutUnroutedAndDisabled(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	ctx := context.Background()
	off := addEndpoint(t, s, "off", "http://127.0.0.1:9/", nil, "order.*")
	auto := addEndpoint(t, s, "auto", "http://127.0.0.1:9/", nil, "order.*")
	if err := s.EndpointSetState(ctx, off.ID, store.EndpointDisabled); err != nil {
		t.Fatal(err)
	}
	if err := s.EndpointSetState(ctx, auto.ID, store.EndpointAutoDisabled); err != nil {
		t.Fatal(err)
	}
	f := newSupervisor(t, s, nil).FanOut()
	fanOut(t, f, "order.created", "audit.x", "audit.y")
	if f.Unrouted() != 2 || f.Routed() != 1 || f.Written() != 1 {
		t.Errorf("unrouted %d, routed %d, written %d; want 2, 1, 1", f.Unrouted(), f.Routed(), f.Written())
	}
	if c := counts(t, s, off.ID); c.Pending != 0 {
		t.Errorf("disabled endpoint got %d deliveries", c.Pending)
	}
	if c := counts(t, s, auto.ID); c.Pending != 1 {
		t.Errorf("auto-disabled endpoint got %d deliveries, want 1 waiting", c.Pending)
	}
}

// PublishBatch writes a whole batch at once and gives each event its own
// result: an event no endpoint wants is published whatever happens to the
// others, the others share the statement's fate.
func TestFanOutPublishBatchResultsPerEvent(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	a := addEndpoint(t, s, "a", "http://127.0.0.1:9/", nil, "order.*")
	b := addEndpoint(t, s, "b", "http://127.0.0.1:9/", nil, "order.paid")
	// The routes read once are kept: a statement can fail after it.
	f := newSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.RefreshEvery = time.Hour }).FanOut()
	batch := func(ctx context.Context, types ...string) ([]*sink.Message, []error) {
		var msgs []*sink.Message
		for i, typ := range types {
			msgs = append(msgs, &sink.Message{Attempt: 1, Event: postbox.Event{ID: uuid.Must(uuid.NewV7()),
				AggregateType: "order", AggregateID: fmt.Sprint(i), EventType: typ, Payload: []byte(`{}`)}})
		}
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = fmt.Errorf("not set")
		}
		f.PublishBatch(ctx, msgs, errs)
		return msgs, errs
	}
	_, errs := batch(context.Background(), "order.created", "audit.x", "order.paid", "order.paid")
	for i, err := range errs {
		if err != nil {
			t.Errorf("event %d: %v", i, err)
		}
	}
	if ca, cb := counts(t, s, a.ID), counts(t, s, b.ID); ca.Pending != 3 || cb.Pending != 2 {
		t.Errorf("pending a %d, b %d; want 3 and 2", ca.Pending, cb.Pending)
	}
	if f.Written() != 5 || f.Routed() != 3 || f.Unrouted() != 1 {
		t.Errorf("written %d, routed %d, unrouted %d; want 5, 3, 1", f.Written(), f.Routed(), f.Unrouted())
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel() // the statement fails
	_, errs = batch(cancelled, "order.created", "audit.x")
	if errs[0] == nil || errs[1] != nil {
		t.Errorf("with the statement failing: errors %v; want the routed event's alone", errs)
	}
	if f.Written() != 5 || f.Routed() != 3 || f.Unrouted() != 2 {
		t.Errorf("after the failure: written %d, routed %d, unrouted %d; want 5, 3, 2", f.Written(), f.Routed(), f.Unrouted())
	}
}

// A relay that crashed after the fan-out wrote the deliveries but before it
// settled the event publishes it again: no second delivery row, no second
// delivery, even once the first was delivered.
func TestFanOutAgainAfterCrashWritesNoDuplicate(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	var mu sync.Mutex
	hits := map[string]int{}
	rc := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
		mu.Lock()
		hits[d.ID]++
		mu.Unlock()
		return 0
	})
	e := addEndpoint(t, s, "a", rc.URL, nil)
	sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.Retention = time.Hour })
	f := sup.FanOut()
	ids := fanOut(t, f, "order.created")
	rc.WaitAccepted(t, 1, 10*time.Second)
	waitFor(t, 5*time.Second, "the delivery done", func() bool { return counts(t, s, e.ID).Done == 1 })
	// The crashed relay's event comes back and is published again.
	for range 2 {
		if err := f.Publish(context.Background(), messageOf(t, s, ids["order.created"][0].String())); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // a delivery, if one were written, would be made by now
	if c := counts(t, s, e.ID); c != (store.DeliveryCounts{Done: 1}) {
		t.Errorf("counts = %+v, want one delivery, done", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits[ids["order.created"][0].String()] != 1 {
		t.Errorf("the event was received %d times, want 1", hits[ids["order.created"][0].String()])
	}
	if w := f.Written(); w != 1 {
		t.Errorf("written = %d, want 1 (the same delivery is not written twice)", w)
	}
}
