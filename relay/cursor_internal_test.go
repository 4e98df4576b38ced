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
	c.claimed([]store.ClaimedEvent{delivery(t0.Add(-2*time.Second), 9), delivery(t0.Add(-time.Second), 3), delivery(t0.Add(-3*time.Second), 1)}, true, 0)
	want := store.ClaimPosition{AvailableAt: t0.Add(-time.Second), Seq: 3}
	if got := c.next(t0.Add(time.Millisecond)); got != want {
		t.Fatalf("claim after a full one starts after %+v, want %+v", got, want)
	}
	c.claimed([]store.ClaimedEvent{delivery(t0, 10), delivery(t0, 11)}, true, 0)
	want = store.ClaimPosition{AvailableAt: t0, Seq: 11}
	if got := c.next(t0.Add(2 * time.Millisecond)); got != want {
		t.Fatalf("claim after two full ones starts after %+v, want %+v", got, want)
	}
	// Every fromHeadEvery, from the head all the same.
	c.claimed([]store.ClaimedEvent{delivery(t0, 12)}, true, 0)
	if got := c.next(t0.Add(fromHeadEvery)); !got.IsZero() {
		t.Fatalf("claim %s after the last from the head starts after %+v, want from the head", fromHeadEvery, got)
	}
	// A claim that was not full: the backlog is drained.
	c.claimed([]store.ClaimedEvent{delivery(t0, 13), delivery(t0, 14)}, true, 0)
	c.claimed([]store.ClaimedEvent{delivery(t0, 15)}, false, 0)
	if got := c.next(t0.Add(fromHeadEvery + time.Millisecond)); !got.IsZero() {
		t.Fatalf("claim after one that was not full starts after %+v, want from the head", got)
	}
	// A store that does not say when its events fell due.
	c.claimed([]store.ClaimedEvent{{OutboxSeq: 16}}, true, 0)
	if got := c.next(t0.Add(fromHeadEvery + 2*time.Millisecond)); !got.IsZero() {
		t.Fatalf("claim after events without due times starts after %+v, want from the head", got)
	}
	c.claimed([]store.ClaimedEvent{delivery(t0, 17)}, true, 0)
	c.reset()
	if got := c.next(t0.Add(fromHeadEvery + 3*time.Millisecond)); !got.IsZero() {
		t.Fatalf("claim after a reset starts after %+v, want from the head", got)
	}
}

// Under an old snapshot a claim from the head reads past every index entry
// of the events deleted since: the relay keeps its cursor and reads the
// head less often, for at most 1/headCostShare of its time, and never less
// often than every fromHeadEveryMax.
func TestClaimCursorSpacesCostlyClaimsFromTheHead(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	var c claimCursor
	c.next(t0)
	c.claimed([]store.ClaimedEvent{delivery(t0, 1), delivery(t0, 2)}, true, 100*time.Millisecond)
	want := store.ClaimPosition{AvailableAt: t0, Seq: 2}
	if got := c.next(t0.Add(time.Second)); got != want {
		t.Fatalf("1 s after a claim from the head that took 100 ms, the claim starts after %+v, want %+v", got, want)
	}
	// Not full: the cursor stays, while the head is costly.
	c.claimed([]store.ClaimedEvent{delivery(t0, 3)}, false, time.Millisecond)
	want = store.ClaimPosition{AvailableAt: t0, Seq: 3}
	if got := c.next(t0.Add(1500 * time.Millisecond)); got != want {
		t.Fatalf("after a claim that was not full, with a costly head, the claim starts after %+v, want %+v", got, want)
	}
	c.claimed(nil, false, time.Millisecond)
	if got := c.next(t0.Add(1900 * time.Millisecond)); got != want {
		t.Fatalf("after an empty claim, with a costly head, the claim starts after %+v, want %+v", got, want)
	}
	// headCostShare times the head's cost after it: from the head.
	if got := c.next(t0.Add(headCostShare * 100 * time.Millisecond)); !got.IsZero() {
		t.Fatalf("%d times the head's cost after it, the claim starts after %+v, want from the head", headCostShare, got)
	}
	// A head that costs a second: read again after fromHeadEveryMax, not 20 s.
	c.claimed([]store.ClaimedEvent{delivery(t0, 4)}, true, time.Second)
	from := t0.Add(headCostShare * 100 * time.Millisecond)
	if got := c.next(from.Add(fromHeadEveryMax - time.Millisecond)); got.IsZero() {
		t.Fatalf("just before %s, the claim starts from the head", fromHeadEveryMax)
	}
	if got := c.next(from.Add(fromHeadEveryMax)); !got.IsZero() {
		t.Fatalf("%s after a head that took 1 s, the claim starts after %+v, want from the head", fromHeadEveryMax, got)
	}
	// The head cheap again: a claim that is not full sends the next to the head.
	c.claimed([]store.ClaimedEvent{delivery(t0, 5)}, false, time.Millisecond)
	if got := c.next(from.Add(fromHeadEveryMax + time.Millisecond)); !got.IsZero() {
		t.Fatalf("with a cheap head, after a claim that was not full, the claim starts after %+v, want from the head", got)
	}
}
