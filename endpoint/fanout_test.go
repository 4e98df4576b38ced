package endpoint_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/internal/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store"
)

// Events written by plain SQL go, through the relay and the fan-out, to
// exactly the endpoints whose filter matches them.
func TestFanOutRoutesByTypeFilter(t *testing.T) {
	eachStore(t, testFanOutRoutesByTypeFilter)
}

func testFanOutRoutesByTypeFilter(t *testing.T, s testStore, insert func(aggregateID, eventType string) string) {
	orders := receiver.New(t, secret, nil)
	everything := receiver.New(t, secret, nil)
	payments := receiver.New(t, secret, nil)
	addEndpoint(t, s, "orders", orders.URL, nil, "order.*")
	addEndpoint(t, s, "everything", everything.URL, nil)
	addEndpoint(t, s, "payments", payments.URL, nil, "payment.succeeded", "refund.?")
	d := startDispatcher(t, s, nil)
	f := newFanOut(t, s, d)

	types := []string{"order.created", "order.paid", "payment.succeeded", "payment.failed", "refund.a", "audit.x"}
	want := map[string][]string{}
	ctx := context.Background()
	for i := range 60 {
		typ := types[i%len(types)]
		id := insert(fmt.Sprint(i), typ)
		want["everything"] = append(want["everything"], id)
		for name, types := range map[string][]string{"orders": {"order.*"}, "payments": {"payment.succeeded", "refund.?"}} {
			if endpoint.Matches(types, typ) {
				want[name] = append(want[name], id)
			}
		}
	}
	r, err := relay.New(relay.Config{Store: s, Sink: f, Logger: testLogger(t), PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx) })
	defer func() { stop(); wg.Wait() }()

	for name, rc := range map[string]*receiver.Receiver{"orders": orders, "everything": everything, "payments": payments} {
		rc.WaitAccepted(t, len(want[name]), 30*time.Second)
		var got []string
		for _, d := range rc.Accepted() {
			got = append(got, d.ID)
		}
		slices.Sort(got)
		slices.Sort(want[name])
		if !slices.Equal(slices.Compact(got), want[name]) || len(got) != len(want[name]) {
			t.Errorf("%s received %d events (%d distinct), want exactly the %d its filter matches", name, len(got), len(slices.Compact(got)), len(want[name]))
		}
	}
	waitFor(t, 10*time.Second, "the outbox drained", func() bool {
		st, err := s.Stats(ctx)
		return err == nil && st.Pending == 0 && st.Processing == 0
	})
	if f.Unrouted() != 0 {
		t.Errorf("unrouted = %d, want 0 (the everything endpoint takes all)", f.Unrouted())
	}
}

// An event no endpoint wants is published (done) and counted; disabled
// endpoints get no deliveries, auto-disabled ones do.
func TestFanOutUnroutedAndDisabled(t *testing.T) {
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
	f := newFanOut(t, s, nil)
	fanOut(t, f, "order.created", "audit.x", "audit.y")
	if f.Unrouted() != 2 {
		t.Errorf("unrouted = %d, want 2", f.Unrouted())
	}
	if c := counts(t, s, off.ID); c.Pending != 0 {
		t.Errorf("disabled endpoint got %d deliveries", c.Pending)
	}
	if c := counts(t, s, auto.ID); c.Pending != 1 {
		t.Errorf("auto-disabled endpoint got %d deliveries, want 1 waiting", c.Pending)
	}
}

// A relay that crashed after the fan-out wrote the deliveries but before it
// settled the event publishes it again: no second delivery row, no second
// delivery, even once the first was delivered.
func TestFanOutAgainAfterCrashWritesNoDuplicate(t *testing.T) {
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
	f := newFanOut(t, s, nil)
	ids := fanOut(t, f, "order.created")
	d := startDispatcher(t, s, nil)
	rc.WaitAccepted(t, 1, 10*time.Second)
	waitFor(t, 5*time.Second, "the delivery done", func() bool { return counts(t, s, e.ID).Done == 1 })
	// The crashed relay's event comes back and is published again.
	for range 2 {
		if err := f.Publish(context.Background(), messageOf(t, s, ids["order.created"][0].String())); err != nil {
			t.Fatal(err)
		}
	}
	d.Wake()
	time.Sleep(300 * time.Millisecond) // a delivery, if one were written, would be made by now
	if c := counts(t, s, e.ID); c != (store.DeliveryCounts{Done: 1}) {
		t.Errorf("counts = %+v, want one delivery, done", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits[ids["order.created"][0].String()] != 1 {
		t.Errorf("the event was received %d times, want 1", hits[ids["order.created"][0].String()])
	}
}
