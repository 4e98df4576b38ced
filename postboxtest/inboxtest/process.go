package inboxtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store"
)

func testProcessOnce[TTx any](t *testing.T, h *harness[TTx]) {
	ev := event("1", 0)
	wantOutcome(t, h.process(t, ev), inbox.Processed)
	wantOutcome(t, h.process(t, ev), inbox.Duplicate)
	again := *ev
	again.Payload = []byte(`{"changed": true}`)
	wantOutcome(t, h.process(t, &again), inbox.Duplicate)
	h.wantEffects(t, ev.ID, 1)
}

func testProcessStores[TTx any](t *testing.T, h *harness[TTx]) {
	ev := event("7", 1)
	ev.Signature = "v1,c2lnbmF0dXJl"
	var seen *inbox.Event
	_, err := h.ib.Process(h.ctx, ev, func(ctx context.Context, tx TTx, e *inbox.Event) error {
		seen = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != ev {
		t.Fatalf("handler saw %+v, want the event passed to Process", seen)
	}
	r := h.get(t, ev.ID)
	if r.ID != ev.ID || r.EventType != ev.EventType || r.AggregateType != ev.AggregateType ||
		r.AggregateID != ev.AggregateID || r.Seq != ev.Seq || r.Signature != ev.Signature {
		t.Fatalf("stored %+v, want the fields of %+v", r, ev)
	}
	sameJSON(t, r.Payload, ev.Payload)
	if r.Status != store.StatusDone || r.Attempts != 1 || r.LastError != "" || r.LeaseOwner != "" {
		t.Fatalf("stored status %q attempts %d last error %q lease owner %q, want done after 1 attempt",
			r.Status, r.Attempts, r.LastError, r.LeaseOwner)
	}
	if r.ReceivedAt.IsZero() || r.ProcessedAt.IsZero() || r.ProcessedAt.Before(r.ReceivedAt) {
		t.Fatalf("received at %v, processed at %v", r.ReceivedAt, r.ProcessedAt)
	}

	bare := &inbox.Event{ID: event("", 0).ID}
	wantOutcome(t, h.process(t, bare), inbox.Processed)
	if r := h.get(t, bare.ID); r.Payload != nil || r.Seq != 0 || r.Signature != "" {
		t.Fatalf("event without payload stored %+v", r)
	}
}

// testHandlerFailure is the article's lost event: the handler fails after
// the inbox insert, and the sender's retry must be processed, not answered
// "duplicate".
func testHandlerFailure[TTx any](t *testing.T, h *harness[TTx]) {
	ev := event("1", 0)
	boom := errors.New("payment service said no")
	_, err := h.ib.Process(h.ctx, ev, func(ctx context.Context, tx TTx, e *inbox.Event) error {
		if err := h.effect(ctx, tx, e); err != nil {
			return err
		}
		return boom
	})
	wantErr(t, err, boom)
	h.wantEffects(t, ev.ID, 0)
	r := h.get(t, ev.ID)
	if r.Status != store.StatusFailed || r.Attempts != 1 || !strings.Contains(r.LastError, boom.Error()) {
		t.Fatalf("after a failed handler: status %q attempts %d last error %q, want failed, 1, %q",
			r.Status, r.Attempts, r.LastError, boom)
	}

	wantOutcome(t, h.process(t, ev), inbox.Processed)
	wantOutcome(t, h.process(t, ev), inbox.Duplicate)
	h.wantEffects(t, ev.ID, 1)
	if r := h.get(t, ev.ID); r.Status != store.StatusDone || r.Attempts != 2 || r.LastError != "" {
		t.Fatalf("after the retry: status %q attempts %d last error %q, want done, 2, none", r.Status, r.Attempts, r.LastError)
	}
}

// deliverConcurrently processes n copies of ev at once.
func deliverConcurrently[TTx any](h *harness[TTx], ev *inbox.Event, n int, fn inbox.ProcessFunc[TTx]) (outcomes map[inbox.Outcome]int, errs []error) {
	var mu sync.Mutex
	outcomes = map[inbox.Outcome]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			copied := *ev
			out, err := h.ib.Process(h.ctx, &copied, fn)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			outcomes[out]++
		})
	}
	close(start)
	wg.Wait()
	return outcomes, errs
}

func testConcurrentOnce[TTx any](t *testing.T, h *harness[TTx]) {
	ev := event("1", 0)
	var runs atomic.Int32
	outcomes, errs := deliverConcurrently(h, ev, 20, func(ctx context.Context, tx TTx, e *inbox.Event) error {
		runs.Add(1)
		return h.effect(ctx, tx, e)
	})
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if outcomes[inbox.Processed] != 1 || outcomes[inbox.Duplicate] != 19 {
		t.Fatalf("outcomes %v, want 1 processed and 19 duplicates", outcomes)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
	h.wantEffects(t, ev.ID, 1)
}

func testConcurrentAfterFailure[TTx any](t *testing.T, h *harness[TTx]) {
	ev := event("1", 0)
	boom := errors.New("first run fails")
	var runs atomic.Int32
	outcomes, errs := deliverConcurrently(h, ev, 20, func(ctx context.Context, tx TTx, e *inbox.Event) error {
		if err := h.effect(ctx, tx, e); err != nil {
			return err
		}
		if runs.Add(1) == 1 {
			return boom
		}
		return nil
	})
	if len(errs) != 1 || !errors.Is(errs[0], boom) {
		t.Fatalf("errors %v, want only the first run's", errs)
	}
	if outcomes[inbox.Processed] != 1 || outcomes[inbox.Duplicate] != 18 {
		t.Fatalf("outcomes %v, want 1 processed and 18 duplicates", outcomes)
	}
	if runs.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2 (one failure, one success)", runs.Load())
	}
	h.wantEffects(t, ev.ID, 1)
}

func testInvalidEvent[TTx any](t *testing.T, h *harness[TTx]) {
	valid := func() *inbox.Event { return event("1", 0) }
	cases := map[string]*inbox.Event{
		"zero id":           {Payload: []byte(`{}`)},
		"payload not JSON":  {ID: valid().ID, Payload: []byte(`{"a":`)},
		"negative sequence": {ID: valid().ID, Seq: -1},
		"NUL in event type": {ID: valid().ID, EventType: "order\x00created"},
		"invalid UTF-8":     {ID: valid().ID, AggregateID: "\xff"},
	}
	for name, ev := range cases {
		ran := false
		_, err := h.ib.Process(h.ctx, ev, func(context.Context, TTx, *inbox.Event) error {
			ran = true
			return nil
		})
		if !errors.Is(err, inbox.ErrInvalidEvent) || ran {
			t.Fatalf("%s: got %v (handler ran: %v), want ErrInvalidEvent", name, err, ran)
		}
		if _, err := h.ib.Claim(h.ctx, ev, leaseLong); !errors.Is(err, inbox.ErrInvalidEvent) {
			t.Fatalf("%s: claim: got %v, want ErrInvalidEvent", name, err)
		}
		if ev.ID != uuid.Nil {
			h.wantNothingStored(t, ev.ID)
		}
	}
}

func testGetUnknown[TTx any](t *testing.T, h *harness[TTx]) {
	_, err := h.ib.Get(h.ctx, event("1", 0).ID)
	wantErr(t, err, store.ErrNotFound)
}
