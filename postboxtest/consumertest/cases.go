package consumertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/sink"
)

// The log lines the suite reads: a warning per discarded message, and a
// line per failure, with the delivery count (see package
// inbox/internal/consume, which the consumers share).
const (
	discardLine = "discarding a message that can never be processed"
	failureLine = "processing failed"
)

// Events published through the sink before the consumer starts are each
// applied once, and reach Process as the relay sent them; then the broker
// holds nothing more.
func testEveryEventAppliedOnce(t *testing.T, b Broker, _ Features) {
	a := newApp(t, b)
	var ms []*sink.Message
	for i := range 40 {
		ms = append(ms, event(fmt.Sprint("a", i%5), fmt.Sprintf(`{"n": %d}`, i)))
	}
	ids := publishAll(t, b, ms...)
	c := a.start(a.config())
	a.waitFor(c, "every event applied", a.allProcessed(ids))
	c.stopped(t)
	a.checkAppliedOnce(ids)
	for _, m := range ms {
		calls := a.callsOf(m.ID)
		got := calls[0].ev
		if got.EventType != m.EventType || got.AggregateType != m.AggregateType || got.AggregateID != m.AggregateID ||
			string(got.Payload) != string(m.Payload) || got.Seq != 0 {
			t.Errorf("Process got event %s as type %q, aggregate %q/%q, seq %d, payload %s; the sink sent %q, %q/%q, no seq, %s",
				m.ID, got.EventType, got.AggregateType, got.AggregateID, got.Seq, got.Payload, m.EventType, m.AggregateType, m.AggregateID, m.Payload)
		}
		if n := len(calls); n != 1 {
			t.Errorf("event %s reached Process %d times, want once (it was published once, and acknowledged)", m.ID, n)
		}
	}
	a.checkSettled()
}

// An event delivered three times (the broker's de-duplication bypassed,
// as by a relay's retry after it): once before it is processed, and once
// after it was applied and acknowledged. It is applied once; the other
// deliveries are duplicates, acknowledged, and the next event is applied.
func testDuplicateAbsorbed(t *testing.T, b Broker, _ Features) {
	a := newApp(t, b)
	m := event("dup", `{"n": 1}`)
	b.Publish(t, m)
	b.PublishRaw(t, raw(m))
	next := event("next", `{"n": 2}`)
	b.Publish(t, next)
	c := a.start(a.config())
	a.waitFor(c, "the event delivered twice, and the next one applied", func() bool {
		return len(a.callsOf(m.ID)) >= 2 && a.processed(next.ID)
	})
	b.PublishRaw(t, raw(m))
	a.waitFor(c, "the event delivered a third time", func() bool { return len(a.callsOf(m.ID)) >= 3 })
	c.stopped(t)
	var processed, duplicates int
	for _, call := range a.callsOf(m.ID) {
		switch {
		case call.err != nil:
			t.Errorf("a delivery of the event failed: %v", call.err)
		case call.outcome == inbox.Processed:
			processed++
		case call.outcome == inbox.Duplicate:
			duplicates++
		}
	}
	if processed != 1 || duplicates != 2 {
		t.Errorf("the event delivered three times was processed %d times and a duplicate %d times, want 1 and 2", processed, duplicates)
	}
	a.checkAppliedOnce([]uuid.UUID{m.ID, next.ID})
	a.checkSettled()
}

// Messages no sink writes (no event id, an id that is not a UUID, a body
// that is not JSON, a sequence number that is not one) never reach
// Process, and an event the handler rejects reaches it once: each is
// discarded alone, with a warning, while the events between them are
// applied; none is delivered again.
func testMalformedDiscardedAlone(t *testing.T, b Broker, _ Features) {
	a := newApp(t, b)
	malformed := []Raw{
		{Key: "m0", Headers: map[string]string{"Content-Type": "application/json"}, Body: []byte(`{"n": 0}`)},
		{Key: "m1", Headers: map[string]string{postbox.HeaderEventID: "not-a-uuid"}, Body: []byte(`{}`)},
		{Key: "m2", Headers: map[string]string{postbox.HeaderEventID: uuid.NewString()}, Body: []byte(`not json`)},
		{Key: "m3", Headers: map[string]string{postbox.HeaderEventID: uuid.NewString(), postbox.HeaderAggregateType: "order",
			postbox.HeaderAggregateID: "m3", inbox.HeaderSequence: "first"}, Body: []byte(`{}`)},
	}
	rejected := event("rejected", `{"reject": true}`)
	var valid []uuid.UUID
	for i, m := range malformed {
		valid = append(valid, publishAll(t, b, event(fmt.Sprint("v", i), `{}`))...)
		b.PublishRaw(t, m)
	}
	b.Publish(t, rejected)
	valid = append(valid, publishAll(t, b, event("last", `{}`))...)

	c := a.start(a.config())
	want := len(malformed) + 1
	a.waitFor(c, "the valid events applied and the others discarded", func() bool {
		return a.allProcessed(valid)() && len(a.logs.find(slog.LevelWarn, discardLine)) >= want
	})
	c.stopped(t)

	for id := range a.called() {
		if id != rejected.ID && !slices.Contains(valid, id) {
			t.Errorf("a malformed message reached Process as event %s", id)
		}
	}
	calls := a.callsOf(rejected.ID)
	if len(calls) != 1 || !errors.Is(calls[0].err, inbox.ErrRejected) {
		t.Errorf("the rejected event reached Process %d times (%v), want once, rejected", len(calls), calls)
	}
	discards := a.logs.find(slog.LevelWarn, discardLine)
	if len(discards) != want {
		t.Errorf("%d discards logged, want %d", len(discards), want)
	}
	if !slices.ContainsFunc(discards, func(r record) bool {
		return r.attrs["event_id"].String() == rejected.ID.String() && r.attrs["error"].String() != ""
	}) {
		t.Errorf("no discard logged with the rejected event's id and its reason")
	}
	a.checkAppliedOnce(valid)
	a.checkSettled()
}

// A handler that fails its first two runs of some events, after writing,
// rolls back each time: the events come again, with the broker's
// delivery count, and are applied once.
func testFailureRetriedThenApplied(t *testing.T, b Broker, _ Features) {
	a := newApp(t, b)
	var ms []*sink.Message
	failing := map[uuid.UUID]bool{}
	for i := range 12 {
		m := event(fmt.Sprint("f", i%4), fmt.Sprintf(`{"n": %d}`, i))
		if i%3 == 0 {
			failing[m.ID] = true
		}
		ms = append(ms, m)
	}
	var mu sync.Mutex
	failures := map[uuid.UUID]int{}
	a.setBetween(func(_ context.Context, ev *inbox.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if failing[ev.ID] && failures[ev.ID] < 2 {
			failures[ev.ID]++
			return errors.New("the handler failed after its first part, on purpose")
		}
		return nil
	})
	ids := publishAll(t, b, ms...)
	c := a.start(a.config())
	a.waitFor(c, "every event applied", a.allProcessed(ids))
	c.stopped(t)

	for id := range failing {
		calls := a.callsOf(id)
		if len(calls) < 3 || calls[0].err == nil || calls[1].err == nil || !a.processed(id) {
			t.Errorf("event %s failing twice: Process calls %v, want two failures then processed", id, calls)
		}
		var deliveries []int64
		for _, r := range a.logs.find(slog.LevelInfo, failureLine) {
			if r.attrs["event_id"].String() == id.String() {
				deliveries = append(deliveries, r.int("delivery"))
			}
		}
		if !slices.Contains(deliveries, 1) || !slices.Contains(deliveries, 2) {
			t.Errorf("event %s failing twice: its failures were logged with the deliveries %v, want 1 and 2", id, deliveries)
		}
	}
	a.checkAppliedOnce(ids)
	a.checkSettled()
}

// Ordered events (Postbox-Sequence) of three aggregates, published in
// their order while Concurrency runs several at once, and (unless the
// consumer retries in place) an event published before its predecessor,
// are applied in each aggregate's order.
func testOrderedEventsInOrder(t *testing.T, b Broker, f Features) {
	a := newApp(t, b)
	var ms []*sink.Message
	for seq := 1; seq <= 8; seq++ {
		for _, agg := range []string{"oa", "ob", "oc"} {
			ms = append(ms, ordered(agg, seq))
		}
	}
	if !f.RetriesInPlace {
		ms = append(ms, ordered("early", 2), ordered("early", 1))
	}
	ids := publishAll(t, b, ms...)
	c := a.start(a.config())
	a.waitFor(c, "every event applied", a.allProcessed(ids))
	c.stopped(t)
	a.checkAppliedOnce(ids)
	rows, err := a.store.Pool().Query(t.Context(), "select aggregate_id, seq from "+a.table+" where part = 1 order by n")
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string][]int64{}
	for rows.Next() {
		var agg string
		var seq int64
		if err := rows.Scan(&agg, &seq); err != nil {
			t.Fatal(err)
		}
		applied[agg] = append(applied[agg], seq)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for agg, seqs := range applied {
		if !slices.IsSorted(seqs) {
			t.Errorf("aggregate %s: sequence numbers applied in the order %v", agg, seqs)
		}
	}
	a.checkSettled()
}

// The consumer stops while events are in progress: those that finish
// within ShutdownTimeout are applied; the one that does not is cancelled
// and rolled back; nothing is applied by half. The next consumer applies
// the rest, each once, and the broker holds nothing more.
//
// Whether the events applied at the stop come again is not checked: a
// broker may deliver a settled message again (nats-server 2.9 does, when
// a redelivery falls due while no pull request waits), and the inbox
// answers it as a duplicate.
func testStopLeavesNothingHalfApplied(t *testing.T, b Broker, _ Features) {
	a := newApp(t, b)
	var ms []*sink.Message
	for i := range 8 {
		ms = append(ms, event(fmt.Sprint("s", i), fmt.Sprintf(`{"n": %d}`, i)))
	}
	var inProgress atomic.Int32
	var stuck atomic.Value // the id of the event that does not finish
	release := make(chan struct{})
	a.setBetween(func(ctx context.Context, ev *inbox.Event) error {
		inProgress.Add(1)
		if stuck.CompareAndSwap(nil, ev.ID) {
			<-ctx.Done() // past ShutdownTimeout
			return ctx.Err()
		}
		<-release // until the stop has begun
		return nil
	})
	ids := publishAll(t, b, ms...)
	cfg := a.config()
	c := a.start(cfg)
	a.waitFor(c, "two events in progress", func() bool { return inProgress.Load() >= 2 })
	c.cancel()
	close(release)
	c.stopped(t)

	stuckID := stuck.Load().(uuid.UUID)
	var finished []uuid.UUID
	for _, id := range ids {
		if a.processed(id) {
			finished = append(finished, id)
		}
	}
	if calls := a.callsOf(stuckID); len(calls) != 1 || !errors.Is(calls[0].err, context.Canceled) {
		t.Errorf("the event that did not finish: Process calls %v, want one, cancelled", calls)
	}
	if len(finished) == 0 {
		t.Errorf("no event in progress at the stop finished, within a ShutdownTimeout of %v", cfg.ShutdownTimeout)
	}
	for id, r := range a.rows() {
		if r[0] != r[1] || r[0] > 1 || id == stuckID && r[0] != 0 {
			t.Errorf("after the stop, event %s has %d first parts and %d second parts applied", id, r[0], r[1])
		}
	}

	a.setBetween(nil)
	next := a.start(a.config())
	a.waitFor(next, "every event applied by the next consumer", a.allProcessed(ids))
	next.stopped(t)
	a.checkAppliedOnce(ids)
	a.checkSettled()
}

// New refuses a Config with a field that is wrong, naming it, before it
// reads anything.
func testRefusesBadConfig(t *testing.T, b Broker, _ Features) {
	process := func(context.Context, *inbox.Event) (inbox.Outcome, error) {
		t.Error("Process ran, under a Config that is wrong")
		return inbox.Processed, nil
	}
	for _, c := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Process", func(c *Config) { c.Process = nil }},
		{"Concurrency", func(c *Config) { c.Concurrency = -1 }},
		{"RedeliveryMin", func(c *Config) { c.RedeliveryMin = -1 }},
		{"RedeliveryMax", func(c *Config) { c.RedeliveryMax = -1 }},
		{"RedeliveryMin", func(c *Config) { c.RedeliveryMin, c.RedeliveryMax = 2*time.Second, time.Second }}, // above the max
		{"ShutdownTimeout", func(c *Config) { c.ShutdownTimeout = -1 }},
	} {
		cfg := Config{Process: process, Logger: slog.New(newLogs())}
		c.edit(&cfg)
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		err := b.Consume(ctx, cfg)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "Config."+c.field) {
			t.Errorf("a Config with a wrong %s: %v, want an error naming Config.%s", c.field, err, c.field)
		}
	}
}
