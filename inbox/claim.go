package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// Claim is an event leased to this consumer for work outside the database,
// from Inbox.Claim until Complete or Fail.
type Claim struct {
	// Event is the claimed event.
	Event Event
	// Attempt counts the claims of the event, including this one.
	Attempt int
	// ExpiresAt is when the lease ends, by this process's clock (measured
	// before the claim, so slightly early). Finish the work before it, for
	// instance under context.WithDeadline: after it, another delivery may
	// take the event over and do the work again.
	ExpiresAt time.Time
	owner     string
}

// Claim takes ev for work that cannot run in the database transaction, such
// as a call to a payment provider: it writes the event's inbox row as
// pending, leased to this claim until lease has passed, and commits. Do the
// work, then call Complete (or Fail if it failed).
//
// While the lease lasts, other deliveries of the event are refused with
// ErrInProgress (answer them "retry later"). An event processed before is
// refused with ErrDuplicate (answer it as a success). A claim whose lease
// expired, or that failed, is taken over by the next delivery.
//
// The external effect is therefore at least once, not exactly once: a
// consumer that crashes, or overruns its lease, after the work but before
// Complete leaves the event to be claimed and worked again. Make the work
// idempotent at its destination, keyed by the event id (most payment and
// messaging APIs take an idempotency key), and keep the lease well above
// the work's timeout.
//
// Ordered events (Seq > 0) are claimed only after their predecessor is
// applied (ErrOutOfOrder otherwise); Complete applies them.
func (ib *Inbox[TTx]) Claim(ctx context.Context, ev *Event, lease time.Duration) (*Claim, error) {
	if err := validate(ev); err != nil {
		return nil, err
	}
	if lease <= 0 {
		return nil, fmt.Errorf("inbox: claim event %s: lease %v must be positive", ev.ID, lease)
	}
	c := &Claim{Event: *ev, ExpiresAt: time.Now().Add(lease), owner: uuid.NewString()}
	res, err := ib.store.InboxClaim(ctx, &store.InboxClaimParams{Event: *ev, Owner: c.owner, Lease: lease})
	if err != nil {
		return nil, fmt.Errorf("inbox: claim event %s: %w", ev.ID, err)
	}
	if res.Status == store.InboxDuplicate {
		return nil, fmt.Errorf("%w: event %s", ErrDuplicate, ev.ID)
	}
	if err := refusal(ev, res); err != nil {
		return nil, err
	}
	c.Attempt = res.Attempt
	return c, nil
}

// Complete marks a claimed event done, after its external work succeeded,
// and runs fn (which may be nil) in the same transaction, for instance to
// record the result of the work. If fn fails, nothing changes and the claim
// still holds: call Complete again or Fail. When the lease was taken over by
// another claim, Complete reports ErrLeaseLost and changes nothing.
func (ib *Inbox[TTx]) Complete(ctx context.Context, c *Claim, fn ProcessFunc[TTx]) error {
	var run func(ctx context.Context, tx TTx) error
	if fn != nil {
		run = func(ctx context.Context, tx TTx) error { return fn(ctx, tx, &c.Event) }
	}
	res, err := ib.store.InboxComplete(ctx, &store.InboxCompleteParams{
		ID:            c.Event.ID,
		Owner:         c.owner,
		AggregateType: c.Event.AggregateType,
		AggregateID:   c.Event.AggregateID,
		Seq:           c.Event.Seq,
	}, run)
	if err != nil {
		return fmt.Errorf("inbox: complete event %s: %w", c.Event.ID, err)
	}
	return refusal(&c.Event, res)
}

// Fail gives a claimed event up after its external work failed: its row
// becomes failed, with cause as its last error, and the next delivery claims
// it again at once. When the lease was taken over by another claim, Fail
// reports ErrLeaseLost and changes nothing.
func (ib *Inbox[TTx]) Fail(ctx context.Context, c *Claim, cause error) error {
	if cause == nil {
		cause = errors.New("failed")
	}
	res, err := ib.store.InboxFail(ctx, &store.InboxFailParams{ID: c.Event.ID, Owner: c.owner, Error: cause.Error()})
	if err != nil {
		return fmt.Errorf("inbox: fail event %s: %w", c.Event.ID, err)
	}
	return refusal(&c.Event, res)
}
