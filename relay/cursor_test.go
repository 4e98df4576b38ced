package relay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
)

// pacedSink accepts every message after pace, and records the order it
// accepted them in.
type pacedSink struct {
	pace     time.Duration
	mu       sync.Mutex
	accepted []uuid.UUID
}

func (s *pacedSink) Publish(ctx context.Context, m *sink.Message) error {
	time.Sleep(s.pace)
	s.mu.Lock()
	s.accepted = append(s.accepted, m.ID)
	s.mu.Unlock()
	return nil
}

func (s *pacedSink) String() string { return "paced sink" }

func (s *pacedSink) Destination() sink.Destination {
	return sink.Destination{System: "test", Name: "paced"}
}

// placeOf is where id was accepted (-1: not yet), and how many were.
func (s *pacedSink) placeOf(id uuid.UUID) (place, accepted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, a := range s.accepted {
		if a == id {
			return i, len(s.accepted)
		}
	}
	return -1, len(s.accepted)
}

// While a relay drains a backlog, each claim starts after the last one
// (store.ClaimParams.After). An event committed late, behind that position
// (a long transaction: its place in claim order is its start), is still
// taken while the backlog drains, by the claim from the head that the
// relay runs regularly: not only once the backlog is gone. The open
// transaction keeps the deleted rows' index entries, so claims from the
// head may grow costly and be spaced out, but never further apart than
// 10 s (relay/cursor.go, fromHeadEveryMax): the backlog here lasts longer.
func TestLateCommitBehindTheCursorIsDelivered(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	late := ev("late", 0)
	if err := s.EnqueueTx(ctx, tx, late); err != nil {
		t.Fatal(err)
	}
	// The sink takes at most 2 events per 5 ms: 8,000 events last at least
	// 20 s.
	const n = 8000
	backlog := make([]postbox.Event, n)
	for i := range backlog {
		backlog[i] = ev(fmt.Sprint(i%100), i)
	}
	if err := s.Enqueue(ctx, backlog...); err != nil {
		t.Fatal(err)
	}
	ps := &pacedSink{pace: 5 * time.Millisecond}
	r := newRelay(t, relay.Config{Store: s, Sink: ps, Concurrency: 2, BatchSize: 100,
		PollInterval: time.Second, Lease: time.Minute})
	relaytest.Run(t, r)
	waitFor(t, "the backlog's first events delivered", 20*time.Second, func() bool {
		_, accepted := ps.placeOf(late.ID)
		return accepted >= n/16
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committedAt := time.Now()
	waitFor(t, "the late event delivered", 40*time.Second, func() bool {
		place, _ := ps.placeOf(late.ID)
		return place >= 0
	})
	place, accepted := ps.placeOf(late.ID)
	t.Logf("late event delivered %s after its commit, %d-th; %d accepted then", time.Since(committedAt).Round(time.Millisecond), place, accepted)
	// Committed after a sixteenth of the backlog, it is due within 10 s
	// (at most 4,000 events at the sink's pace) and the events claimed
	// before it: well before the last quarter.
	if place >= 3*n/4 {
		t.Fatalf("the late event was the %d-th of %d delivered: it waited for the backlog to drain", place, n+1)
	}
	waitFor(t, "every event delivered", 60*time.Second, func() bool { return r.Stats().Delivered == n+1 })
	seen := map[uuid.UUID]int{}
	ps.mu.Lock()
	for _, id := range ps.accepted {
		seen[id]++
	}
	ps.mu.Unlock()
	for _, e := range append(backlog, late) {
		if seen[e.ID] != 1 {
			t.Fatalf("event %s delivered %d times, want once", e.ID, seen[e.ID])
		}
	}
	noLeaseLeft(t, s)
}
