package inboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store"
)

// leaseLong outlasts any test; leaseShort expires at once.
const (
	leaseLong  = time.Minute
	leaseShort = time.Millisecond
)

func (h *harness[TTx]) claim(t *testing.T, ev *inbox.Event, lease time.Duration) *inbox.Claim {
	t.Helper()
	c, err := h.ib.Claim(h.ctx, ev, lease)
	if err != nil {
		t.Fatalf("claim %s: %v", ev.ID, err)
	}
	return c
}

func (h *harness[TTx]) complete(t *testing.T, c *inbox.Claim) {
	t.Helper()
	if err := h.ib.Complete(h.ctx, c, h.effect); err != nil {
		t.Fatalf("complete %s: %v", c.Event.ID, err)
	}
}

func testClaimComplete[TTx any](t *testing.T, h *harness[TTx]) {
	ev := event("1", 0)
	before := time.Now()
	c := h.claim(t, ev, leaseLong)
	if c.Attempt != 1 || c.Event.ID != ev.ID || c.ExpiresAt.Before(before.Add(leaseLong)) {
		t.Fatalf("claim %+v, want attempt 1 of %s expiring after %v", c, ev.ID, before.Add(leaseLong))
	}
	r := h.get(t, ev.ID)
	if r.Status != store.StatusPending || r.LeaseOwner == "" || r.LeaseExpiresAt.IsZero() || !r.ProcessedAt.IsZero() {
		t.Fatalf("claimed row %+v, want pending with a lease", r)
	}

	// While the lease lasts, every other delivery backs off.
	_, err := h.ib.Claim(h.ctx, ev, leaseLong)
	wantErr(t, err, inbox.ErrInProgress)
	_, err = h.ib.Process(h.ctx, ev, h.effect)
	wantErr(t, err, inbox.ErrInProgress)
	h.wantEffects(t, ev.ID, 0)

	h.complete(t, c)
	h.wantEffects(t, ev.ID, 1)
	if r := h.get(t, ev.ID); r.Status != store.StatusDone || r.LeaseOwner != "" || r.ProcessedAt.IsZero() {
		t.Fatalf("completed row %+v, want done", r)
	}
	_, err = h.ib.Claim(h.ctx, ev, leaseLong)
	wantErr(t, err, inbox.ErrDuplicate)
	wantOutcome(t, h.process(t, ev), inbox.Duplicate)
	wantErr(t, h.ib.Complete(h.ctx, c, nil), inbox.ErrLeaseLost)
	h.wantEffects(t, ev.ID, 1)
}

func testCompleteFailure[TTx any](t *testing.T, h *harness[TTx]) {
	ev := event("1", 0)
	c := h.claim(t, ev, leaseLong)
	boom := errors.New("could not record the receipt")
	err := h.ib.Complete(h.ctx, c, func(ctx context.Context, tx TTx, e *inbox.Event) error {
		if err := h.effect(ctx, tx, e); err != nil {
			return err
		}
		return boom
	})
	wantErr(t, err, boom)
	h.wantEffects(t, ev.ID, 0)
	if r := h.get(t, ev.ID); r.Status != store.StatusPending || r.LeaseOwner == "" {
		t.Fatalf("row after a failed Complete: %+v, want still claimed", r)
	}
	h.complete(t, c)
	h.wantEffects(t, ev.ID, 1)
}

func testClaimFail[TTx any](t *testing.T, h *harness[TTx]) {
	ev := event("1", 0)
	c := h.claim(t, ev, leaseLong)
	cause := errors.New("provider timed out")
	if err := h.ib.Fail(h.ctx, c, cause); err != nil {
		t.Fatal(err)
	}
	if r := h.get(t, ev.ID); r.Status != store.StatusFailed || r.LastError != cause.Error() || r.LeaseOwner != "" {
		t.Fatalf("failed row %+v, want failed with last error %q and no lease", r, cause)
	}
	wantErr(t, h.ib.Fail(h.ctx, c, cause), inbox.ErrLeaseLost)

	again := h.claim(t, ev, leaseLong)
	if again.Attempt != 2 {
		t.Fatalf("second claim: attempt %d, want 2", again.Attempt)
	}
	wantErr(t, h.ib.Complete(h.ctx, c, h.effect), inbox.ErrLeaseLost)
	h.complete(t, again)
	h.wantEffects(t, ev.ID, 1)
}

// testUnsafeErrorText: error texts (a handler's, a claim's) are stored as
// store.CleanErrorText makes them, whatever bytes they hold.
func testUnsafeErrorText[TTx any](t *testing.T, h *harness[TTx]) {
	text := "status 500: bad\x00body \xff\xfe end"
	claimed := event("1", 0)
	c := h.claim(t, claimed, leaseLong)
	if err := h.ib.Fail(h.ctx, c, errors.New(text)); err != nil {
		t.Fatal(err)
	}
	processed := event("2", 0)
	if _, err := h.ib.Process(h.ctx, processed, func(context.Context, TTx, *inbox.Event) error {
		return errors.New(text)
	}); err == nil {
		t.Fatal("a failing handler reported no error")
	}
	for _, id := range []uuid.UUID{claimed.ID, processed.ID} {
		if r := h.get(t, id); r.Status != store.StatusFailed || !strings.HasSuffix(r.LastError, store.CleanErrorText(text)) {
			t.Fatalf("row %s: status %q, last error %q; want failed, ending with %q", id, r.Status, r.LastError, store.CleanErrorText(text))
		}
	}
}

func testClaimTakeover[TTx any](t *testing.T, h *harness[TTx]) {
	ev := event("1", 0)
	crashed := h.claim(t, ev, leaseShort)
	time.Sleep(50 * time.Millisecond)

	taker := h.claim(t, ev, leaseLong)
	if taker.Attempt != 2 {
		t.Fatalf("takeover: attempt %d, want 2", taker.Attempt)
	}
	wantErr(t, h.ib.Complete(h.ctx, crashed, h.effect), inbox.ErrLeaseLost)
	wantErr(t, h.ib.Fail(h.ctx, crashed, errors.New("late")), inbox.ErrLeaseLost)
	h.complete(t, taker)
	h.wantEffects(t, ev.ID, 1)

	// An expired lease that nobody took over still completes.
	late := event("2", 0)
	slow := h.claim(t, late, leaseShort)
	time.Sleep(50 * time.Millisecond)
	h.complete(t, slow)
	h.wantEffects(t, late.ID, 1)

	// Process takes an expired claim over too.
	abandoned := event("3", 0)
	h.claim(t, abandoned, leaseShort)
	time.Sleep(50 * time.Millisecond)
	wantOutcome(t, h.process(t, abandoned), inbox.Processed)
	h.wantEffects(t, abandoned.ID, 1)
}

func testClaimOrdered[TTx any](t *testing.T, h *harness[TTx]) {
	first, second, third := event("1", 1), event("1", 2), event("1", 3)
	_, err := h.ib.Claim(h.ctx, second, leaseLong)
	wantOrderError(t, err, inbox.ErrOutOfOrder, 0)
	h.wantNothingStored(t, second.ID)

	wantOutcome(t, h.process(t, first), inbox.Processed)
	c := h.claim(t, second, leaseLong)
	// The claimed event is not applied until it completes.
	_, err = h.ib.Process(h.ctx, third, h.effect)
	wantOrderError(t, err, inbox.ErrOutOfOrder, 1)
	h.complete(t, c)
	wantOutcome(t, h.process(t, third), inbox.Processed)

	impostor := event("1", 3)
	_, err = h.ib.Claim(h.ctx, impostor, leaseLong)
	wantOrderError(t, err, inbox.ErrSequenceApplied, 3)
	h.wantNothingStored(t, impostor.ID)
}
