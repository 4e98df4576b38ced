package inboxtest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store"
)

func testDeleteProcessed[TTx any](t *testing.T, h *harness[TTx]) {
	var done []uuid.UUID
	for range 5 {
		ev := event("1", 0)
		h.process(t, ev)
		done = append(done, ev.ID)
	}
	failed := event("2", 0)
	_, err := h.ib.Process(h.ctx, failed, func(context.Context, TTx, *inbox.Event) error { return errors.New("boom") })
	if err == nil {
		t.Fatal("failing handler reported no error")
	}
	claimed := event("3", 0)
	h.claim(t, claimed, leaseLong)

	// Nothing was processed a minute ago.
	if n, err := h.ib.DeleteProcessedBefore(h.ctx, time.Now().Add(-time.Minute), 10); err != nil || n != 0 {
		t.Fatalf("delete before a minute ago: %d, %v; want 0", n, err)
	}
	// Within the retention, a duplicate is caught.
	wantOutcome(t, h.process(t, &inbox.Event{ID: done[0]}), inbox.Duplicate)

	cutoff := time.Now().Add(time.Minute)
	var counts []int
	for {
		n, err := h.ib.DeleteProcessedBefore(h.ctx, cutoff, 2)
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, n)
		if n < 2 {
			break
		}
	}
	if want := []int{2, 2, 1}; !slices.Equal(counts, want) {
		t.Fatalf("deleted in batches %v, want %v", counts, want)
	}
	for _, id := range done {
		if _, err := h.ib.Get(h.ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("done event %s kept: %v", id, err)
		}
	}
	if r := h.get(t, failed.ID); r.Status != store.StatusFailed {
		t.Fatalf("failed row: status %q", r.Status)
	}
	if r := h.get(t, claimed.ID); r.Status != store.StatusPending {
		t.Fatalf("claimed row: status %q", r.Status)
	}
	if _, err := h.ib.DeleteProcessedBefore(h.ctx, cutoff, 0); err == nil {
		t.Fatal("limit 0 accepted")
	}
}
