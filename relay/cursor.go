package relay

import (
	"time"

	"github.com/postbox-go/postbox/store"
)

// Claims from the head of the queue. A relay draining a backlog claims
// after its cursor, and from the head all the same every fromHeadEvery,
// so that the events behind its cursor (released, reclaimed after an
// expired lease, committed late by a long transaction) wait at most that
// long. A claim from the head reads past the index entries of every event
// deleted since the oldest snapshot still open (a report, a stuck session,
// a replication slot's catalog xmin keeps them from being removed): under
// such a transaction its cost grows with the drain, so the relay spaces
// them out to keep what they cost beyond a claim after the cursor below
// 1/headCostShare of its time, never further apart than fromHeadEveryMax.
// (The excess, not the whole cost: on a loaded server every claim is slow,
// and that is no reason to leave events behind the cursor longer.)
const (
	fromHeadEvery    = 250 * time.Millisecond
	fromHeadEveryMax = 10 * time.Second
	headCostShare    = 20
)

// claimCursor is where the relay's next claim starts (store.ClaimParams.After).
// While claims come back full, a backlog is being drained: the next one
// starts after the last event claimed, instead of reading again past every
// event the relay still holds and every index entry of those it deleted.
// Otherwise the claim starts from the head: after a claim that was not
// full, the relay may doze, and the doze protocol's promise (a claim after
// Doze sees every event committed without a notification) holds only for
// a claim from the head.
type claimCursor struct {
	after    store.ClaimPosition
	fromHead time.Time     // when the last claim from the head ran
	headCost time.Duration // how long it took
	// cursorCost is how long claims after the cursor take (a moving
	// average).
	cursorCost time.Duration
	headNow    bool // the claim under way starts from the head
}

// headExcess is what a claim from the head costs beyond one after the
// cursor.
func (c *claimCursor) headExcess() time.Duration { return max(c.headCost-c.cursorCost, 0) }

// headEvery is how long after a claim from the head the next one comes
// while a cursor is set.
func (c *claimCursor) headEvery() time.Duration {
	return min(max(fromHeadEvery, headCostShare*c.headExcess()), fromHeadEveryMax)
}

// next is where a claim starting at now begins.
func (c *claimCursor) next(now time.Time) store.ClaimPosition {
	c.headNow = c.after.IsZero() || now.Sub(c.fromHead) >= c.headEvery()
	if c.headNow {
		c.after = store.ClaimPosition{}
		c.fromHead = now
	}
	return c.after
}

// claimed records a claim that returned batch and took took: full (all it
// asked for, in events or in bytes), the next claim starts after its last
// event in claim order; otherwise from the head. So does a batch from a
// store that does not say when its events fell due.
func (c *claimCursor) claimed(batch []store.ClaimedEvent, full bool, took time.Duration) {
	switch {
	case c.headNow:
		c.headCost = took
		c.headNow = false
	case c.cursorCost == 0:
		c.cursorCost = took
	default:
		c.cursorCost = (3*c.cursorCost + took) / 4
	}
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
