package relay

import (
	"context"
	"errors"
	"testing"
)

// A publisher's deliveries share one context until a cut: a cut reaches
// the delivery it names while it is under way, never the next one, and the
// delivery after a cut begins under a fresh context.
func TestCutReachesOnlyItsDelivery(t *testing.T) {
	c := newCutter(context.Background())
	defer c.stop()
	_, first := c.begin()
	ctx, second := c.begin() // the first delivery has ended
	c.cut(first, errLeaseLost)
	if ctx.Err() != nil {
		t.Fatal("a cut meant for an ended delivery cancelled the next one")
	}
	c.cut(second, errLeaseExpired)
	if !errors.Is(context.Cause(ctx), errLeaseExpired) {
		t.Fatalf("the delivery under way was not cut: cause %v", context.Cause(ctx))
	}
	next, _ := c.begin()
	if next.Err() != nil {
		t.Fatal("the delivery after a cut begins under a cancelled context")
	}
	// A cut arriving between deliveries cancels nothing in use.
	_, ended := c.begin()
	c.cut(ended, errLeaseLost)
	if after, _ := c.begin(); after.Err() != nil {
		t.Fatal("the delivery after a late cut begins under a cancelled context")
	}
}
