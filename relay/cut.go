package relay

import (
	"context"
	"sync"
)

// cutter cuts short the delivery under way in one publisher when its lease
// is lost or expires (see inflight.start). The publisher delivers under one
// context that is made again only once cancelled, rather than a context of
// its own per delivery, which cost each delivery an allocation of the
// context, of its done channel and of a map of children in it. Deliveries
// are told apart by a generation, so that a cut meant for a delivery that
// has ended never reaches the next one.
type cutter struct {
	parent context.Context

	mu     sync.Mutex
	gen    uint64
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newCutter(parent context.Context) *cutter {
	c := &cutter{parent: parent}
	c.ctx, c.cancel = context.WithCancelCause(parent)
	return c
}

// begin starts the next delivery (or batch of them): it returns the
// context to deliver under and the delivery's generation, which names it
// to cut. The context is new when a cut (or the parent) cancelled the last
// one.
func (c *cutter) begin() (context.Context, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.ctx.Err() != nil {
		c.ctx, c.cancel = context.WithCancelCause(c.parent)
	}
	return c.ctx, c.gen
}

// cut cancels the delivery of generation gen with cause, unless a later
// one has begun since. Cutting after the delivery ended, before the next
// began, cancels a context that no delivery uses any more: begin makes a
// new one.
func (c *cutter) cut(gen uint64, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.cancel(cause)
	}
}

// stop releases the context's resources once the publisher is done.
func (c *cutter) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel(nil)
}

// cutOf names the delivery of an event to cut short: its publisher's
// cutter and the delivery's generation (a nil cutter: not under way).
type cutOf struct {
	c   *cutter
	gen uint64
}

func (d cutOf) cut(cause error) {
	if d.c != nil {
		d.c.cut(d.gen, cause)
	}
}
