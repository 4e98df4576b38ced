package relay

import (
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

func delivery(due time.Time, seq int64) store.ClaimedEvent {
	return store.ClaimedEvent{Event: postbox.Event{AvailableAt: due}, OutboxSeq: seq}
}

func TestClaimCursor(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var c claimCursor
	if got := c.next(t0); !got.IsZero() {
		t.Fatalf("first claim after %+v, want from the head", got)
	}
	// A full claim: the next starts after its last event in claim order,
	// which is not the last in sequence order.
	c.claimed([]store.ClaimedEvent{delivery(t0.Add(-2*time.Second), 9), delivery(t0.Add(-time.Second), 3), delivery(t0.Add(-3*time.Second), 1)}, true)
	want := store.ClaimPosition{AvailableAt: t0.Add(-time.Second), Seq: 3}
	if got := c.next(t0.Add(time.Millisecond)); got != want {
		t.Fatalf("claim after a full one starts after %+v, want %+v", got, want)
	}
	c.claimed([]store.ClaimedEvent{delivery(t0, 10), delivery(t0, 11)}, true)
	want = store.ClaimPosition{AvailableAt: t0, Seq: 11}
	if got := c.next(t0.Add(2 * time.Millisecond)); got != want {
		t.Fatalf("claim after two full ones starts after %+v, want %+v", got, want)
	}
	// Every fromHeadEvery, from the head all the same.
	c.claimed([]store.ClaimedEvent{delivery(t0, 12)}, true)
	if got := c.next(t0.Add(fromHeadEvery)); !got.IsZero() {
		t.Fatalf("claim %s after the last from the head starts after %+v, want from the head", fromHeadEvery, got)
	}
	// A claim that was not full: the backlog is drained.
	c.claimed([]store.ClaimedEvent{delivery(t0, 13), delivery(t0, 14)}, true)
	c.claimed([]store.ClaimedEvent{delivery(t0, 15)}, false)
	if got := c.next(t0.Add(fromHeadEvery + time.Millisecond)); !got.IsZero() {
		t.Fatalf("claim after one that was not full starts after %+v, want from the head", got)
	}
	// A store that does not say when its events fell due.
	c.claimed([]store.ClaimedEvent{{OutboxSeq: 16}}, true)
	if got := c.next(t0.Add(fromHeadEvery + 2*time.Millisecond)); !got.IsZero() {
		t.Fatalf("claim after events without due times starts after %+v, want from the head", got)
	}
	c.claimed([]store.ClaimedEvent{delivery(t0, 17)}, true)
	c.reset()
	if got := c.next(t0.Add(fromHeadEvery + 3*time.Millisecond)); !got.IsZero() {
		t.Fatalf("claim after a reset starts after %+v, want from the head", got)
	}
}
