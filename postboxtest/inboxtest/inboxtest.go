// Package inboxtest is the conformance suite every inbox store passes.
// postboxtest/storetest's Exercise runs it with the rest of a store's
// suites, so a store's test calls Exercise; Run takes a function that
// returns a fresh, migrated store's driver (inbox tables empty) for each
// test, together with the means to write and count a business row in the
// store's transactions:
//
//	inboxtest.Run(t, func(t *testing.T) *inboxtest.Backend[pgx.Tx] {
//		s := pgtest.Store(t)
//		// create a business table in s's schema ...
//		return &inboxtest.Backend[pgx.Tx]{Store: s.Driver(), Effect: ..., Effects: ...}
//	})
package inboxtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store"
)

// Backend is one store under test and a business table beside its inbox.
type Backend[TTx any] struct {
	// Store is a fresh, migrated store's driver, its inbox tables empty.
	Store inbox.Store[TTx]
	// Effect writes one business row named key in tx: the effect whose
	// count tells whether an event was applied once.
	Effect func(ctx context.Context, tx TTx, key string) error
	// Effects counts the committed business rows named key.
	Effects func(ctx context.Context, key string) (int, error)
}

// NewBackend returns a fresh Backend for one test.
type NewBackend[TTx any] func(t *testing.T) *Backend[TTx]

// Run runs the whole suite, each test on a fresh backend.
func Run[TTx any](t *testing.T, newBackend NewBackend[TTx]) {
	tests := []struct {
		name string
		run  func(t *testing.T, h *harness[TTx])
	}{
		{"ProcessAppliesOnce", testProcessOnce[TTx]},
		{"ProcessStoresTheEvent", testProcessStores[TTx]},
		{"HandlerFailureIsRetriedNotDuplicate", testHandlerFailure[TTx]},
		{"ConcurrentDeliveriesCommitOnce", testConcurrentOnce[TTx]},
		{"ConcurrentDeliveriesAfterAFailure", testConcurrentAfterFailure[TTx]},
		{"InvalidEventIsRefused", testInvalidEvent[TTx]},
		{"GetUnknownIsNotFound", testGetUnknown[TTx]},
		{"OutOfOrderStoresNothing", testOutOfOrder[TTx]},
		{"SequenceAppliedByAnotherID", testSequenceApplied[TTx]},
		{"SequencePastInt32IsOutOfOrder", testSequencePastInt32[TTx]},
		{"FailedHandlerDoesNotAdvanceSequence", testFailureKeepsSequence[TTx]},
		{"ShuffledDeliveryAppliesInOrder", testShuffledOrder[TTx]},
		{"ClaimCompleteOnce", testClaimComplete[TTx]},
		{"ClaimCompleteHandlerFailureKeepsClaim", testCompleteFailure[TTx]},
		{"ClaimFailThenClaimAgain", testClaimFail[TTx]},
		{"ClaimExpiredLeaseIsTakenOver", testClaimTakeover[TTx]},
		{"ClaimOrderedEvent", testClaimOrdered[TTx]},
		{"UnsafeErrorTextIsCleaned", testUnsafeErrorText[TTx]},
		{"DeleteProcessedBefore", testDeleteProcessed[TTx]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			t.Cleanup(cancel)
			tc.run(t, &harness[TTx]{Backend: b, ib: inbox.New(b.Store), ctx: ctx})
		})
	}
}

// harness is what every test works with.
type harness[TTx any] struct {
	*Backend[TTx]
	ib  *inbox.Inbox[TTx]
	ctx context.Context
}

// event returns a valid event of aggregate agg numbered seq (0: unordered).
func event(agg string, seq int64) *inbox.Event {
	id := postbox.NewID()
	return &inbox.Event{
		ID:            id,
		EventType:     "order.updated",
		AggregateType: "order",
		AggregateID:   agg,
		Seq:           seq,
		Payload:       fmt.Appendf(nil, `{"event_id": %q, "order": %q, "seq": %d}`, id, agg, seq),
	}
}

// effect is a ProcessFunc that writes the business row named after the
// event id.
func (h *harness[TTx]) effect(ctx context.Context, tx TTx, ev *inbox.Event) error {
	return h.Effect(ctx, tx, ev.ID.String())
}

func (h *harness[TTx]) process(t *testing.T, ev *inbox.Event) inbox.Outcome {
	t.Helper()
	out, err := h.ib.Process(h.ctx, ev, h.effect)
	if err != nil {
		t.Fatalf("process %s: %v", ev.ID, err)
	}
	return out
}

func (h *harness[TTx]) effects(t *testing.T, id uuid.UUID) int {
	t.Helper()
	n, err := h.Effects(h.ctx, id.String())
	if err != nil {
		t.Fatalf("count effects: %v", err)
	}
	return n
}

func (h *harness[TTx]) wantEffects(t *testing.T, id uuid.UUID, want int) {
	t.Helper()
	if got := h.effects(t, id); got != want {
		t.Fatalf("event %s applied %d times, want %d", id, got, want)
	}
}

func (h *harness[TTx]) get(t *testing.T, id uuid.UUID) inbox.Record {
	t.Helper()
	r, err := h.ib.Get(h.ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return r
}

// wantNothingStored checks that event id left no inbox row and no effect.
func (h *harness[TTx]) wantNothingStored(t *testing.T, id uuid.UUID) {
	t.Helper()
	if r, err := h.ib.Get(h.ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("event %s: inbox row %+v (err %v), want none", id, r, err)
	}
	h.wantEffects(t, id, 0)
}

func wantOutcome(t *testing.T, got, want inbox.Outcome) {
	t.Helper()
	if got != want {
		t.Fatalf("outcome %v, want %v", got, want)
	}
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("stored payload is not JSON: %q", got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("payload: got %s, want %s", got, want)
	}
}
