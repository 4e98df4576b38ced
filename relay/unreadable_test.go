package relay_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// unreadableText is what a store says of a row it could not read.
const unreadableText = "created_at: infinity is not a time"

// hostileUnreadable is a store's reason that quotes a hostile value.
var hostileUnreadable = "aggregate_id: \x1b[2J" + strings.Repeat("x", 5000) + " is not valid UTF-8"

// checkUnreadableFailedAlone checks that the events of bad, rows the
// store could not read, ended failed with the store's reason, were never
// sent, and were logged once each, capped and escaped; and that the events
// of good were delivered with no attempt counted against them.
func checkUnreadableFailedAlone(t *testing.T, s store.Outbox, logs *capture, sent func(uuid.UUID) int, bad map[uuid.UUID]string, good []postbox.Event) {
	t.Helper()
	for id, why := range bad {
		rec := record(t, s, id)
		if rec.Status != store.StatusFailed {
			t.Errorf("unreadable row %s: status %s, want failed", id, rec.Status)
		}
		want := store.ErrorText("postbox: unreadable row: "+why, 1024)
		if rec.LastError != want {
			t.Errorf("unreadable row %s: last_error %q, want %q", id, rec.LastError[:min(len(rec.LastError), 100)], want[:min(len(want), 100)])
		}
		if n := sent(id); n != 0 {
			t.Errorf("unreadable row %s sent %d times", id, n)
		}
		var logged []captured
		for _, r := range logs.matching("unreadable row") {
			if r.attrs["event_id"] == id.String() {
				logged = append(logged, r)
			}
		}
		if len(logged) != 1 {
			t.Errorf("unreadable row %s logged %d times, want once", id, len(logged))
			continue
		}
		if got := logged[0].attrs["invalid"]; len(got) > logLineMax || strings.IndexFunc(got, unicode.IsControl) >= 0 {
			t.Errorf("unreadable row %s logged with invalid=%q (%d bytes)", id, got[:min(len(got), 100)], len(got))
		}
	}
	for _, e := range good {
		rec := record(t, s, e.ID)
		if rec.Status != store.StatusDone || rec.Retries != 0 {
			t.Errorf("event %s beside the unreadable rows: status %s, retries %d; want done, 0", e.ID, rec.Status, rec.Retries)
		}
		if n := sent(e.ID); n != 1 {
			t.Errorf("event %s beside the unreadable rows sent %d times", e.ID, n)
		}
	}
}

// A row the store could not read (ClaimedEvent.Invalid) fails at once with
// the store's reason, is never sent, is logged once, and costs the other
// events of its claim nothing: one event at a time and in batches.
func TestUnreadableRowFailsAlone(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{0, 8} {
		t.Run(map[int]string{0: "one at a time", 8: "batches"}[batch], func(t *testing.T) {
			s := newRowStore(pgtest.Store(t).Driver())
			bs := newBatchSink()
			logs := newCapture()
			var events []postbox.Event
			for i := range 10 {
				events = append(events, ev("agg", i))
			}
			bad := map[uuid.UUID]string{events[3].ID: unreadableText, events[7].ID: hostileUnreadable}
			for id, why := range bad {
				s.markUnreadable(id, why)
			}
			if err := s.Enqueue(context.Background(), events...); err != nil {
				t.Fatal(err)
			}
			stop := start(t, relay.Config{Store: s, Sink: bs, PublishBatch: batch, Logger: logs.logger(),
				PollInterval: 20 * time.Millisecond})
			waitFor(t, "8 delivered, 2 failed", 10*time.Second, func() bool {
				st := stats(t, s)
				return st.Done == 8 && st.Failed == 2
			})
			stop()
			var good []postbox.Event
			for _, e := range events {
				if _, ok := bad[e.ID]; !ok {
					good = append(good, e)
				}
			}
			checkUnreadableFailedAlone(t, s, logs, bs.sent, bad, good)
		})
	}
}

// sentOrder is the ids the sink accepted, in the order it did.
func (s *batchSink) sentOrder() []uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// sent is how many times the sink accepted id.
func (s *batchSink) sent(id uuid.UUID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted[id]
}

// An unreadable row at the head of an aggregate does not hold its
// aggregate back in ordered mode: it fails, as a head that failed
// otherwise, and the aggregate's next events go, in order.
func TestUnreadableHeadDoesNotBlockItsAggregate(t *testing.T) {
	t.Parallel()
	s := newRowStore(pgtest.OrderedStore(t).Driver())
	bs := newBatchSink()
	logs := newCapture()
	events := []postbox.Event{ev("A", 1), ev("A", 2), ev("A", 3), ev("B", 1)}
	s.markUnreadable(events[0].ID, unreadableText)
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	stop := start(t, relay.Config{Store: s, Sink: &orderSink{batchSink: bs}, Ordered: true, Logger: logs.logger(),
		PollInterval: 20 * time.Millisecond})
	waitFor(t, "3 delivered, 1 failed", 10*time.Second, func() bool {
		st := stats(t, s)
		return st.Done == 3 && st.Failed == 1
	})
	stop()
	checkUnreadableFailedAlone(t, s, logs, bs.sent, map[uuid.UUID]string{events[0].ID: unreadableText}, events[1:])
}

// orderSink is a batchSink that publishes one event at a time.
type orderSink struct{ *batchSink }

func (s *orderSink) Publish(ctx context.Context, m *sink.Message) error {
	return s.batchSink.Publish(ctx, m)
}

// testStream is a relay.Stream that brings the ids it is given, claimed
// through a rowStore, as the WAL would bring new commits.
type testStream struct {
	rows *rowStore
	ids  chan []uuid.UUID
	// behind is what Behind reports.
	behind atomic.Bool
	mu     sync.Mutex
	err    error
}

func (s *testStream) String() string              { return "test stream" }
func (s *testStream) Check(context.Context) error { return nil }

func (s *testStream) Behind(context.Context) (bool, error) { return s.behind.Load(), nil }

func (s *testStream) Follow(ctx context.Context, start func(context.Context, []uuid.UUID, relay.StreamClaim) func() error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ids := <-s.ids:
			if ids == nil {
				continue // the test waits for the batches before to be handled
			}
			if err := start(ctx, ids, s.rows.claimStreamed)(); err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
			}
		}
	}
}

// An unreadable row brought by the stream (WAL mode) fails alone too, and
// the stream's wait for it ends.
func TestStreamedUnreadableRowFailsAlone(t *testing.T) {
	t.Parallel()
	s := newRowStore(pgtest.Store(t).Driver())
	s.streamOnly = true // the stream alone claims
	bs := newBatchSink()
	logs := newCapture()
	stream := &testStream{rows: s, ids: make(chan []uuid.UUID)}
	events := []postbox.Event{ev("A", 1), ev("A", 2), ev("B", 1), ev("", 1), ev("", 2)}
	events[3].AggregateType, events[4].AggregateType = "", ""
	bad := map[uuid.UUID]string{events[0].ID: unreadableText, events[3].ID: hostileUnreadable}
	for id, why := range bad {
		s.markUnreadable(id, why)
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	stop := start(t, relay.Config{Store: s, Sink: &orderSink{batchSink: bs}, Stream: stream, Logger: logs.logger(),
		PollInterval: time.Hour})
	var ids []uuid.UUID
	for _, e := range events {
		ids = append(ids, e.ID)
	}
	stream.ids <- ids
	stream.ids <- nil // returns once the batch was handled
	stop()
	if stream.err != nil {
		t.Fatalf("the stream's wait: %v", stream.err)
	}
	checkUnreadableFailedAlone(t, s, logs, bs.sent, bad, []postbox.Event{events[1], events[2], events[4]})
}

// An unreadable row's fields are zero: it is no event of the aggregate
// whose key is empty, and the stream does not send that aggregate's
// events after it. Its failure is not recorded until the event beside it
// was sent.
func TestStreamedUnreadableRowHoldsNoAggregate(t *testing.T) {
	t.Parallel()
	s := newRowStore(pgtest.Store(t).Driver())
	s.streamOnly = true
	bs := newBatchSink()
	stream := &testStream{rows: s, ids: make(chan []uuid.UUID)}
	bad, good := ev("", 1), ev("", 2)
	bad.AggregateType, good.AggregateType = "", ""
	s.markUnreadable(bad.ID, unreadableText)
	sentFirst := make(chan bool, 1)
	s.settleHook = func(p store.SettleParams) {
		if len(p.Failed) > 0 {
			deadline := time.Now().Add(5 * time.Second)
			for bs.sent(good.ID) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			sentFirst <- bs.sent(good.ID) > 0
		}
	}
	if err := s.Enqueue(context.Background(), bad, good); err != nil {
		t.Fatal(err)
	}
	stop := start(t, relay.Config{Store: s, Sink: &orderSink{batchSink: bs}, Stream: stream, PollInterval: time.Hour})
	stream.ids <- []uuid.UUID{bad.ID, good.ID}
	stream.ids <- nil
	stop()
	if !<-sentFirst {
		t.Fatal("the event after an unreadable row waited for the row's failure to be recorded")
	}
}

// A hot aggregate in WAL mode: the stream sends an aggregate's next event
// once the sink answered for the one before it, not once that outcome is
// recorded (the settler lingers to gather outcomes); the batch's wait, which
// the stream's confirmation follows, still ends only once both are
// recorded.
func TestStreamedAggregateSendsItsNextEventBeforeTheSettle(t *testing.T) {
	t.Parallel()
	s := newRowStore(pgtest.Store(t).Driver())
	s.streamOnly = true
	bs := newBatchSink()
	stream := &testStream{rows: s, ids: make(chan []uuid.UUID)}
	first, second := ev("A", 1), ev("A", 2)
	sentBefore := make(chan bool, 1)
	s.settleHook = func(p store.SettleParams) {
		if slices.Contains(p.Done, first.ID) {
			deadline := time.Now().Add(5 * time.Second)
			for bs.sent(second.ID) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			sentBefore <- bs.sent(second.ID) > 0
		}
	}
	if err := s.Enqueue(context.Background(), first, second); err != nil {
		t.Fatal(err)
	}
	stop := start(t, relay.Config{Store: s, Sink: &orderSink{batchSink: bs}, Stream: stream, PollInterval: time.Hour})
	stream.ids <- []uuid.UUID{first.ID, second.ID}
	stream.ids <- nil // returns once the batch was handled: both recorded
	if st := stats(t, s); st.Done != 2 {
		t.Errorf("once the stream's wait ended: %+v, want both events recorded delivered", st)
	}
	stop()
	if stream.err != nil {
		t.Fatalf("the stream's wait: %v", stream.err)
	}
	if !<-sentBefore {
		t.Fatal("the aggregate's second event waited for the first one's outcome to be recorded")
	}
	if got := bs.sentOrder(); !slices.Equal(got, []uuid.UUID{first.ID, second.ID}) {
		t.Fatalf("sent %v, want the aggregate's commit order %v", got, []uuid.UUID{first.ID, second.ID})
	}
}

// While the stream is behind (it still reads older writes), the relay
// looks for new events itself, within milliseconds, not at its next poll;
// once it has caught up, it waits for the stream again.
func TestStreamBehindClaimsNewEventsAtOnce(t *testing.T) {
	t.Parallel()
	s := newRowStore(pgtest.Store(t).Driver())
	bs := newBatchSink()
	stream := &testStream{rows: s, ids: make(chan []uuid.UUID)}
	stop := start(t, relay.Config{Store: s, Sink: bs, Stream: stream, PollInterval: time.Hour})
	defer stop()
	// The relay's first claim, at start, finds nothing.
	waitFor(t, "the first claim", 10*time.Second, func() bool { return len(s.claimsSeen()) > 0 })
	stream.behind.Store(true)
	claims := len(s.claimsSeen())
	waitFor(t, "the relay to see the stream behind", 10*time.Second, func() bool { return len(s.claimsSeen()) > claims })
	first := ev("A", 1)
	if err := s.Enqueue(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event the stream has not brought", 10*time.Second, func() bool { return bs.sent(first.ID) == 1 })

	stream.behind.Store(false)
	waitFor(t, "the relay to stop looking every few milliseconds", 10*time.Second, func() bool {
		n := len(s.claimsSeen())
		time.Sleep(100 * time.Millisecond)
		return len(s.claimsSeen()) == n
	})
	second := ev("B", 1)
	if err := s.Enqueue(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := bs.sent(second.ID); n != 0 {
		t.Fatalf("the relay claimed a new event itself (sent %d times) while the stream kept up: it must wait for the stream or its poll", n)
	}
}
