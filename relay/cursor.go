package relay

import (
	"time"

	"github.com/postbox-go/postbox/store"
)

// fromHeadEvery is how often a relay draining a backlog claims from the
// head of the queue all the same: the events behind its cursor (released,
// reclaimed after an expired lease, committed late by a long transaction)
// wait at most this long for it.
const fromHeadEvery = 250 * time.Millisecond

// claimCursor is where the relay's next claim starts (store.ClaimParams.After).
// While claims come back full, a backlog is being drained: the next one
// starts after the last event claimed, instead of reading again past every
// event the relay still holds and every index entry of those it deleted.
// Otherwise, and every fromHeadEvery, the claim starts from the head.
type claimCursor struct {
	after    store.ClaimPosition
	fromHead time.Time // when the last claim from the head ran
}

// next is where a claim starting at now begins.
func (c *claimCursor) next(now time.Time) store.ClaimPosition {
	if c.after.IsZero() || now.Sub(c.fromHead) >= fromHeadEvery {
		c.after = store.ClaimPosition{}
		c.fromHead = now
	}
	return c.after
}

// claimed records a claim that returned batch: full (all it asked for, in
// events or in bytes), the next claim starts after its last event in claim
// order; otherwise from the head. So does a batch from a store that does
// not say when its events fell due.
func (c *claimCursor) claimed(batch []store.ClaimedEvent, full bool) {
	if !full || len(batch) == 0 {
		c.after = store.ClaimPosition{}
		return
	}
	for _, d := range batch {
		if d.AvailableAt.IsZero() {
			c.after = store.ClaimPosition{}
			return
		}
		if p := store.PositionOf(d); c.after.Less(p) {
			c.after = p
		}
	}
}

// reset makes the next claim start from the head.
func (c *claimCursor) reset() { c.after = store.ClaimPosition{} }
