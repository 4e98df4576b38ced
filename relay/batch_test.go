package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// batchSink publishes batches: it records each batch's size and every
// message accepted, in order, and fails the first attempt of the events
// failOnce names, retryably.
type batchSink struct {
	mu       sync.Mutex
	batches  []int
	accepted map[uuid.UUID]int
	order    []uuid.UUID
	failOnce map[uuid.UUID]bool
	singles  int
}

func newBatchSink() *batchSink {
	return &batchSink{accepted: map[uuid.UUID]int{}, failOnce: map[uuid.UUID]bool{}}
}

func (s *batchSink) Publish(ctx context.Context, m *sink.Message) error {
	errs := make([]error, 1)
	s.PublishBatch(ctx, []*sink.Message{m}, errs)
	s.mu.Lock()
	s.singles++
	s.mu.Unlock()
	return errs[0]
}

func (s *batchSink) PublishBatch(_ context.Context, msgs []*sink.Message, errs []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, len(msgs))
	for i, m := range msgs {
		if s.failOnce[m.ID] {
			delete(s.failOnce, m.ID)
			errs[i] = errors.New("refused once")
			continue
		}
		s.accepted[m.ID]++
		s.order = append(s.order, m.ID)
	}
}

func (s *batchSink) String() string { return "batch sink" }

func (s *batchSink) Destination() sink.Destination {
	return sink.Destination{System: "test", Name: "batches"}
}

// A relay told to publish batches publishes the claimed events together,
// through PublishBatch, and records each one's own outcome: every event is
// accepted once, the failures of single events in a batch are retried.
func TestBatchesDeliverEveryEventOnce(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	bs := newBatchSink()
	const n = 600
	events := make([]postbox.Event, n)
	for i := range events {
		events[i] = ev(fmt.Sprint(i%50), i)
		if i%7 == 0 {
			bs.failOnce[events[i].ID] = true
		}
	}
	if err := s.Enqueue(context.Background(), events...); err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, relay.Config{Store: s, Sink: bs, PublishBatch: 32, Concurrency: 64, BatchSize: 200,
		BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	relaytest.Run(t, r)
	waitFor(t, "every event delivered", 20*time.Second, func() bool { return r.Stats().Delivered == n })

	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, e := range events {
		if got := bs.accepted[e.ID]; got != 1 {
			t.Fatalf("event %s accepted %d times, want once", e.ID, got)
		}
	}
	if len(bs.failOnce) != 0 {
		t.Fatalf("%d events that fail once were never sent", len(bs.failOnce))
	}
	if bs.singles != 0 {
		t.Fatalf("%d events published alone, want every one in a batch", bs.singles)
	}
	largest := 0
	for _, size := range bs.batches {
		if size > 32 {
			t.Fatalf("a batch of %d events, more than PublishBatch (32)", size)
		}
		largest = max(largest, size)
	}
	if largest < 2 {
		t.Fatalf("batches of at most %d events: the relay did not publish batches", largest)
	}
	if st := r.Stats(); st.Retried != int64((n+6)/7) {
		t.Fatalf("stats: %+v; want %d retries", st, (n+6)/7)
	}
	noLeaseLeft(t, s)
}

// noLeaseLeft fails unless every claim's lease is gone once its events are
// settled: the relay ends each claim with the settle of its last event.
func noLeaseLeft(t *testing.T, s store.Outbox) {
	t.Helper()
	relays, err := s.Relays(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(relays) != 0 {
		t.Fatalf("leases left once every event is settled: %+v", relays)
	}
}

// PublishBatch needs a sink that publishes batches: a wrapper that hides
// the capability must not turn batches off without a word.
func TestPublishBatchRefusesASinkWithoutBatches(t *testing.T) {
	t.Parallel()
	_, err := relay.New(relay.Config{Store: pgtest.Store(t).Driver(), Sink: &noopSink{}, PublishBatch: 8})
	if err == nil || !strings.Contains(err.Error(), "does not publish batches") {
		t.Fatalf("New with PublishBatch and a sink without PublishBatch: %v, want an error saying so", err)
	}
	if _, err := relay.New(relay.Config{Store: pgtest.Store(t).Driver(), Sink: &noopSink{}, PublishBatch: 1}); err != nil {
		t.Fatalf("PublishBatch 1 (one event per publish) with any sink: %v", err)
	}
}

// blockingBatchSink holds every batch until its context ends, and reports
// each message failed with the context's cause.
type blockingBatchSink struct {
	*batchSink
	started chan struct{}
}

func (s *blockingBatchSink) PublishBatch(ctx context.Context, msgs []*sink.Message, errs []error) {
	select {
	case s.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	for i := range errs {
		errs[i] = context.Cause(ctx)
	}
}

// A batch under way is cut short when a renewal finds one of its leases
// taken over: none of its events counts as delivered, and they are
// released, not retried (the attempt did not count).
func TestBatchCutShortWhenALeaseIsLost(t *testing.T) {
	// Not parallel: its 300 ms leases must be renewed in time, which the
	// load of tests run beside it may delay.
	s := &faultyStore{Driver: pgtest.Store(t).Driver()}
	bs := &blockingBatchSink{batchSink: newBatchSink(), started: make(chan struct{}, 1)}
	for i := range 3 {
		if err := s.Enqueue(context.Background(), ev(fmt.Sprint(i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	r := newRelay(t, relay.Config{Store: s, Sink: bs, PublishBatch: 4, Concurrency: 4,
		Lease: 300 * time.Millisecond, PollInterval: time.Hour, ShutdownTimeout: 100 * time.Millisecond})
	relaytest.Run(t, r)
	select {
	case <-bs.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no batch started")
	}
	s.takeOver.Store(true)
	waitFor(t, "the batch to be cut short and released", 10*time.Second, func() bool { return r.Stats().Released > 0 })
	if st := r.Stats(); st.Delivered != 0 || st.Retried != 0 || st.Failed != 0 {
		t.Fatalf("stats: %+v; want nothing delivered, retried or failed", st)
	}
}
