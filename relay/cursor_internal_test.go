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
	// Not full: from the head, however costly (a relay that dozes next
	// must see every event committed without a notification).
	c.claimed([]store.ClaimedEvent{delivery(t0, 3)}, false, time.Millisecond)
	if got := c.next(t0.Add(1500 * time.Millisecond)); !got.IsZero() {
		t.Fatalf("after a claim that was not full, with a costly head, the claim starts after %+v, want from the head", got)
	}
	c.claimed([]store.ClaimedEvent{delivery(t0, 4)}, true, 100*time.Millisecond)
	c.next(t0.Add(1600 * time.Millisecond))
	c.claimed([]store.ClaimedEvent{delivery(t0, 5)}, true, time.Millisecond)
	want = store.ClaimPosition{AvailableAt: t0, Seq: 5}
	if got := c.next(t0.Add(1700 * time.Millisecond)); got != want {
		t.Fatalf("draining with a costly head, the claim starts after %+v, want %+v", got, want)
	}
	// headCostShare times the head's excess cost after it: from the head.
	if got := c.next(t0.Add(1600*time.Millisecond + headCostShare*99*time.Millisecond)); !got.IsZero() {
		t.Fatalf("%d times the head's cost after it, the claim starts after %+v, want from the head", headCostShare, got)
	}
	// A slow server, whose claims after the cursor are as slow as from the
	// head: the head is not costly.
	var slow claimCursor
	slow.next(t0)
	slow.claimed([]store.ClaimedEvent{delivery(t0, 1)}, true, 100*time.Millisecond)
	slow.next(t0.Add(time.Millisecond))
	slow.claimed([]store.ClaimedEvent{delivery(t0, 2)}, true, 100*time.Millisecond)
	if got := slow.next(t0.Add(fromHeadEvery)); !got.IsZero() {
		t.Fatalf("with claims after the cursor as slow as from the head, %s after the head the claim starts after %+v, want from the head", fromHeadEvery, got)
	}
	// A head that costs a second: read again after fromHeadEveryMax, not 20 s.
	c.claimed([]store.ClaimedEvent{delivery(t0, 6)}, true, time.Second)
	from := t0.Add(1600*time.Millisecond + headCostShare*99*time.Millisecond)
	if got := c.next(from.Add(fromHeadEveryMax - time.Millisecond)); got.IsZero() {
		t.Fatalf("just before %s, the claim starts from the head", fromHeadEveryMax)
	}
	if got := c.next(from.Add(fromHeadEveryMax)); !got.IsZero() {
		t.Fatalf("%s after a head that took 1 s, the claim starts after %+v, want from the head", fromHeadEveryMax, got)
	}
}
