package relay

import (
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// The settler waits for more outcomes only while more can come: events in
// flight beyond those of its batch. Once the batch holds every outcome in
// flight, or in an ordered relay, it writes at once.
func TestSettlerLingersOnlyWhileMoreCanCome(t *testing.T) {
	r := &Relay{inflight: newInflight()}
	a := store.ClaimedEvent{Event: postbox.Event{ID: postbox.NewID()}}
	b := store.ClaimedEvent{Event: postbox.Event{ID: postbox.NewID()}}
	r.inflight.add([]store.ClaimedEvent{a, b}, time.Now(), time.Minute)
	one := []outcome{{delivery: a}}
	if !r.linger(one) {
		t.Error("one outcome of two in flight: the settler does not wait for the other")
	}
	if r.linger(append(one, outcome{delivery: b})) {
		t.Error("every outcome in flight is in the batch: the settler waits all the same")
	}
	r.cfg.Ordered = true
	if r.linger(one) {
		t.Error("an ordered relay's settler waits")
	}
}
