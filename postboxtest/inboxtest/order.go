package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/postbox-go/postbox/inbox"
)

// wantOrderError checks that err is an *OrderError matching want with the
// given last applied sequence number.
func wantOrderError(t *testing.T, err, want error, lastApplied int64) {
	t.Helper()
	var oe *inbox.OrderError
	if !errors.Is(err, want) || !errors.As(err, &oe) {
		t.Fatalf("got error %v, want an *OrderError matching %v", err, want)
	}
	if oe.LastApplied != lastApplied {
		t.Fatalf("%v: last applied %d, want %d", err, oe.LastApplied, lastApplied)
	}
}

func testOutOfOrder[TTx any](t *testing.T, h *harness[TTx]) {
	first, second := event("1", 1), event("1", 2)
	_, err := h.ib.Process(h.ctx, second, h.effect)
	wantOrderError(t, err, inbox.ErrOutOfOrder, 0)
	h.wantNothingStored(t, second.ID)

	wantOutcome(t, h.process(t, first), inbox.Processed)
	third := event("1", 3)
	_, err = h.ib.Process(h.ctx, third, h.effect)
	wantOrderError(t, err, inbox.ErrOutOfOrder, 1)
	h.wantNothingStored(t, third.ID)

	wantOutcome(t, h.process(t, second), inbox.Processed)
	wantOutcome(t, h.process(t, third), inbox.Processed)
	// Another aggregate has its own sequence.
	wantOutcome(t, h.process(t, event("2", 1)), inbox.Processed)
}

// testSequencePastInt32 sends a sequence number beyond 32 bits: refused as
// out of order (nothing applied before it), not as a store error.
func testSequencePastInt32[TTx any](t *testing.T, h *harness[TTx]) {
	far := event("1", 1<<31)
	_, err := h.ib.Process(h.ctx, far, h.effect)
	wantOrderError(t, err, inbox.ErrOutOfOrder, 0)
	h.wantNothingStored(t, far.ID)
}

func testSequenceApplied[TTx any](t *testing.T, h *harness[TTx]) {
	first := event("1", 1)
	wantOutcome(t, h.process(t, first), inbox.Processed)
	impostor := event("1", 1)
	_, err := h.ib.Process(h.ctx, impostor, h.effect)
	wantOrderError(t, err, inbox.ErrSequenceApplied, 1)
	h.wantNothingStored(t, impostor.ID)
	// A duplicate of the applied event is a duplicate, not a conflict.
	wantOutcome(t, h.process(t, first), inbox.Duplicate)
	h.wantEffects(t, first.ID, 1)
}

func testFailureKeepsSequence[TTx any](t *testing.T, h *harness[TTx]) {
	first, second := event("1", 1), event("1", 2)
	boom := errors.New("boom")
	_, err := h.ib.Process(h.ctx, first, func(context.Context, TTx, *inbox.Event) error { return boom })
	wantErr(t, err, boom)
	_, err = h.ib.Process(h.ctx, second, h.effect)
	wantOrderError(t, err, inbox.ErrOutOfOrder, 0)
	wantOutcome(t, h.process(t, first), inbox.Processed)
	wantOutcome(t, h.process(t, second), inbox.Processed)
}

// testShuffledOrder delivers the events of several aggregates in random
// order, several at once, as an at-least-once sender would: refused and
// duplicated deliveries are sent again, until every event is applied. The
// handler must have seen each aggregate's events in sequence order.
func testShuffledOrder[TTx any](t *testing.T, h *harness[TTx]) {
	const aggregates, perAggregate = 4, 8
	var all []*inbox.Event
	for a := range aggregates {
		for seq := int64(1); seq <= perAggregate; seq++ {
			all = append(all, event(fmt.Sprint(a), seq))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))

	var mu sync.Mutex
	applied := map[string][]int64{} // aggregate -> sequence numbers, in commit order
	apply := func(ctx context.Context, tx TTx, ev *inbox.Event) error {
		if err := h.effect(ctx, tx, ev); err != nil {
			return err
		}
		// The handler holds the aggregate's sequence until it commits,
		// so the order in which handlers run is the commit order.
		mu.Lock()
		applied[ev.AggregateID] = append(applied[ev.AggregateID], ev.Seq)
		mu.Unlock()
		return nil
	}

	pending := slices.Clone(all)
	for round := 0; len(pending) > 0; round++ {
		if round == 10*len(all) {
			t.Fatalf("%d events still refused after %d rounds", len(pending), round)
		}
		rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
		// Every delivery goes out twice: at-least-once means duplicates.
		batch := append(slices.Clone(pending), pending[:len(pending)/2]...)
		var retry []*inbox.Event
		var wg sync.WaitGroup
		for _, ev := range batch {
			wg.Go(func() {
				_, err := h.ib.Process(h.ctx, ev, apply)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, inbox.ErrOutOfOrder) || errors.Is(err, inbox.ErrInProgress):
					if !slices.Contains(retry, ev) {
						retry = append(retry, ev)
					}
				case err != nil:
					t.Errorf("process %s (%s #%d): %v", ev.ID, ev.AggregateID, ev.Seq, err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		pending = retry
	}

	want := make([]int64, perAggregate)
	for i := range want {
		want[i] = int64(i + 1)
	}
	for a := range aggregates {
		if got := applied[fmt.Sprint(a)]; !slices.Equal(got, want) {
			t.Fatalf("aggregate %d applied in order %v, want %v", a, got, want)
		}
	}
	for _, ev := range all {
		h.wantEffects(t, ev.ID, 1)
	}
}
