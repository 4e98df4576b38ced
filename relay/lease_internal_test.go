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
	d := store.Delivery{Event: postbox.Event{ID: postbox.NewID()}}
	first := time.Now()
	f.add([]store.Delivery{d}, first, time.Minute)
	second := first.Add(time.Millisecond)
	f.add([]store.Delivery{d}, second, time.Minute) // claimed again
	f.remove([]heldLease{{id: d.ID, claimed: first}})
	if f.count() != 1 || f.claimedAt(d.ID) != second {
		t.Fatalf("the lease claimed again was removed with the first one's outcome")
	}
	if claimed, ok := f.start(d.ID, time.Now(), func(error) {}); !ok || !claimed.Equal(second) {
		t.Fatal("the delivery of the event claimed again cannot start")
	}
	f.remove([]heldLease{{id: d.ID, claimed: second}})
	if f.count() != 0 {
		t.Fatal("the second lease stayed after its own outcome")
	}
}
