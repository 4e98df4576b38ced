package sinktest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
)

// receiveTimeout bounds the wait for deliveries; only a failing case waits
// that long.
const receiveTimeout = 15 * time.Second

func testPublishDeliversExactly(t *testing.T, d Destination, f Features) {
	m := newMessage("agg-1", 1)
	if err := d.Sink.Publish(t.Context(), m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got := waitFor(t, d, "the message", func(ds []Delivery) bool { return len(ds) >= 1 })
	if len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	checkDelivery(t, got[0], m, f)
}

func testConcurrentPublishes(t *testing.T, d Destination, f Features) {
	const n = 100
	msgs := make(map[uuid.UUID]*sink.Message, n)
	for i := range n {
		m := newMessage(fmt.Sprintf("agg-%d", i%7), i)
		msgs[m.ID] = m
	}
	var wg sync.WaitGroup
	for _, m := range msgs {
		wg.Go(func() {
			if err := d.Sink.Publish(t.Context(), m); err != nil {
				t.Errorf("Publish %v: %v", m.ID, err)
			}
		})
	}
	wg.Wait()
	got := waitFor(t, d, fmt.Sprintf("all %d messages", n), func(ds []Delivery) bool {
		return len(byID(ds)) == n
	})
	for id, ds := range byID(got) {
		m, ok := msgs[id]
		if !ok {
			t.Fatalf("received %v, which was never published", id)
		}
		for _, delivery := range ds {
			checkDelivery(t, delivery, m, f)
		}
	}
}

func testCancelledContext(t *testing.T, d Destination, _ Features) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	err := d.Sink.Publish(ctx, newMessage("agg-1", 1))
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Publish with a cancelled context took %v", elapsed)
	}
	if err == nil {
		t.Fatal("Publish with a cancelled context returned nil")
	}
	if kind, _, _ := sink.Classify(err); kind != sink.Retryable {
		t.Fatalf("a cancelled publish is %v (%v), want retryable: the event is not at fault", kind, err)
	}
}

func testRepublish(t *testing.T, d Destination, f Features) {
	m := newMessage("agg-1", 1)
	if err := d.Sink.Publish(t.Context(), m); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	retry := *m
	retry.Attempt = 2
	if err := d.Sink.Publish(t.Context(), &retry); err != nil {
		t.Fatalf("Publish again: %v", err)
	}
	if !f.Deduplicates {
		got := waitFor(t, d, "the message twice", func(ds []Delivery) bool { return len(byID(ds)[m.ID]) >= 2 })
		for _, delivery := range got {
			checkDelivery(t, delivery, m, f)
		}
		return
	}
	marker := newMessage("agg-2", 2)
	if err := d.Sink.Publish(t.Context(), marker); err != nil {
		t.Fatalf("Publish marker: %v", err)
	}
	got := waitFor(t, d, "the marker", func(ds []Delivery) bool { return len(byID(ds)[marker.ID]) >= 1 })
	if n := len(byID(got)[m.ID]); n != 1 {
		t.Fatalf("a deduplicating sink delivered a republished id %d times", n)
	}
}

func testOrderPerAggregate(t *testing.T, d Destination, f Features) {
	if !f.OrderedPerAggregate {
		t.Skip("the sink does not keep per-aggregate order")
	}
	const perAggregate = 10
	sent := map[string][]uuid.UUID{}
	for i := range perAggregate {
		for _, agg := range []string{"agg-a", "agg-b"} {
			m := newMessage(agg, i)
			if err := d.Sink.Publish(t.Context(), m); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			sent[agg] = append(sent[agg], m.ID)
		}
	}
	got := waitFor(t, d, "all messages", func(ds []Delivery) bool { return len(ds) >= 2*perAggregate })
	received := map[string][]uuid.UUID{}
	for _, delivery := range got {
		received[delivery.AggregateID] = append(received[delivery.AggregateID], delivery.ID)
	}
	for agg, ids := range sent {
		if fmt.Sprint(received[agg]) != fmt.Sprint(ids) {
			t.Errorf("aggregate %s arrived in order\n%v\nwant\n%v", agg, received[agg], ids)
		}
	}
}

// newMessage returns a message with a fresh id. Its payload is valid JSON
// written the way no encoder would (spacing, escapes, raw UTF-8), so that a
// sink re-encoding it shows.
func newMessage(aggregateID string, n int) *sink.Message {
	id := uuid.New()
	return &sink.Message{
		Event: postbox.Event{
			ID:            id,
			EventType:     "sinktest.happened",
			AggregateType: "sinktest",
			AggregateID:   aggregateID,
			Payload:       fmt.Appendf(nil, `{ "n" : %d,"id":"%s",  "text":"caf\u00e9 – é", "nested": {"a": [1, 2.50, null]} }`, n, id),
			Headers: map[string]string{
				"traceparent": fmt.Sprintf("00-%032x-%016x-01", n+1, n+1),
				"tracestate":  "sinktest=1",
			},
		},
		Attempt: 1,
	}
}

// checkDelivery compares what arrived with the message that was published.
func checkDelivery(t *testing.T, got Delivery, m *sink.Message, f Features) {
	t.Helper()
	if got.ID != m.ID {
		t.Errorf("id %v, want %v", got.ID, m.ID)
	}
	if !bytes.Equal(got.Payload, m.Payload) {
		t.Errorf("payload of %v\n%q\nwant exactly\n%q", m.ID, got.Payload, m.Payload)
	}
	if got.EventType != m.EventType || got.AggregateID != m.AggregateID {
		t.Errorf("event type %q, aggregate id %q; want %q, %q", got.EventType, got.AggregateID, m.EventType, m.AggregateID)
	}
	if !f.CarriesHeaders {
		return
	}
	for name, want := range m.Headers {
		if value, ok := lookupFold(got.Headers, name); !ok || value != want {
			t.Errorf("header %s of %v: %q (present %v), want %q", name, m.ID, value, ok, want)
		}
	}
}

func lookupFold(h map[string]string, name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func byID(ds []Delivery) map[uuid.UUID][]Delivery {
	out := map[uuid.UUID][]Delivery{}
	for _, d := range ds {
		out[d.ID] = append(out[d.ID], d)
	}
	return out
}

// waitFor polls the destination until done holds, and returns what it
// received by then.
func waitFor(t *testing.T, d Destination, what string, done func([]Delivery) bool) []Delivery {
	t.Helper()
	deadline := time.Now().Add(receiveTimeout)
	for {
		got := d.Received()
		if done(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; received %d messages", receiveTimeout, what, len(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
