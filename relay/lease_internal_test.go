package relay

import (
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// Recording the outcome of an event's delivery ends that delivery's lease
// only: when the event was claimed again meanwhile (a retry due at once),
// the new lease stays, and its delivery starts.
func TestSettlingKeepsALeaseClaimedAgain(t *testing.T) {
	f := newInflight()
	d := store.ClaimedEvent{Event: postbox.Event{ID: postbox.NewID()}}
	first := time.Now()
	f.add([]store.ClaimedEvent{d}, first, time.Minute)
	second := first.Add(time.Millisecond)
	f.add([]store.ClaimedEvent{d}, second, time.Minute) // claimed again
	f.remove([]heldLease{{id: d.ID, claimed: first}})
	if f.count() != 1 || f.claimedAt(d.ID) != second {
		t.Fatalf("the lease claimed again was removed with the first one's outcome")
	}
	if claimed, ok := f.start(d.ID, time.Now(), cutOf{}); !ok || !claimed.Equal(second) {
		t.Fatal("the delivery of the event claimed again cannot start")
	}
	f.remove([]heldLease{{id: d.ID, claimed: second}})
	if f.count() != 0 {
		t.Fatal("the second lease stayed after its own outcome")
	}
}

// A claim ends with the outcome of its last event still open, counted by
// the claim each outcome names, whether or not its event was claimed again
// since (a retry due at once).
func TestClaimEndsWithItsLastOutcome(t *testing.T) {
	f := newInflight()
	now := time.Now()
	a := store.ClaimedEvent{Event: postbox.Event{ID: postbox.NewID()}, Lease: 7}
	b := store.ClaimedEvent{Event: postbox.Event{ID: postbox.NewID()}, Lease: 7}
	f.add([]store.ClaimedEvent{a, b}, now, time.Minute)
	first := []heldLease{{id: a.ID, claimed: now, claim: 7}}
	if got := f.ending(first); len(got) != 0 {
		t.Fatalf("claim ended by %d of its 2 outcomes: %v", len(first), got)
	}
	f.remove(first)
	// a is claimed again by claim 8 before b's outcome.
	again := a
	again.Lease = 8
	f.add([]store.ClaimedEvent{again}, now.Add(time.Millisecond), time.Minute)
	last := []heldLease{{id: b.ID, claimed: now, claim: 7}}
	if got := f.ending(last); len(got) != 1 || got[0] != 7 {
		t.Fatalf("claims ended by the last outcome of claim 7: %v, want [7]", got)
	}
	f.remove(last)
	if got := f.ending([]heldLease{{id: a.ID, claimed: now.Add(time.Millisecond), claim: 8}}); len(got) != 1 || got[0] != 8 {
		t.Fatalf("claims ended by the outcome of claim 8: %v, want [8]", got)
	}
	if got := f.ending([]heldLease{{id: a.ID, claim: 0}}); len(got) != 0 {
		t.Fatalf("an event of a store without claims ended %v", got)
	}
}
