package inbox

import (
	"errors"
	"fmt"
	"time"
)

// Observer receives every event Inbox.Process is given, for metrics: give
// it to New with WithObserver; package observe has a Prometheus one. It is
// called from every goroutine that calls Process (implementations must be
// safe for concurrent use), after the inbox transaction ended: it must
// return quickly and never block on I/O.
type Observer interface {
	// Handled is called once per call of Process, as it returns.
	Handled(h Handling)
}

// Result is what Process did with an event, as an Observer sees it.
type Result uint8

const (
	// ResultProcessed: the handler ran and committed with the inbox row.
	ResultProcessed Result = iota
	// ResultDuplicate: the event had been processed before.
	ResultDuplicate
	// ResultFailed: nothing was applied and a later delivery may succeed:
	// the handler or the store failed, the event is out of order, or
	// another consumer holds it (Process returned an error the sender
	// retries).
	ResultFailed
	// ResultRejected: nothing was applied and no delivery ever will be:
	// an invalid event, a handler's Reject (a payload that does not
	// decode, a type without a route), a sequence number already taken.
	ResultRejected
)

// Results are every Result, in the order of their values.
var Results = [...]Result{ResultProcessed, ResultDuplicate, ResultFailed, ResultRejected}

// String returns "processed", "duplicate", "failed" or "rejected": the
// words of metrics labels.
func (r Result) String() string {
	switch r {
	case ResultProcessed:
		return "processed"
	case ResultDuplicate:
		return "duplicate"
	case ResultFailed:
		return "failed"
	case ResultRejected:
		return "rejected"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// Handling is one call of Process, as Observer.Handled receives it. It is
// passed by value and holds no reference to the event.
type Handling struct {
	// EventType is the event's type, such as "order.created".
	EventType string
	// Result is what Process did.
	Result Result
	// HandlerRan reports whether the handler (Process's fn) ran; it does
	// not for a duplicate or an event refused before it.
	HandlerRan bool
	// HandlerDuration is how long the handler ran, inside the inbox
	// transaction (the commit not included); zero when it did not run.
	HandlerDuration time.Duration
}

// Option configures an Inbox; see New.
type Option func(*options)

// options are what the Options of New set.
type options struct {
	observer Observer
}

// WithObserver has the inbox report every call of Process to o. A nil o
// observes nothing, at no cost.
func WithObserver(o Observer) Option {
	return func(opt *options) { opt.observer = o }
}

// resultOf is the Result of a call of Process that returned outcome and
// err.
func resultOf(outcome Outcome, err error) Result {
	switch {
	case err == nil && outcome == Duplicate:
		return ResultDuplicate
	case err == nil:
		return ResultProcessed
	case errors.Is(err, ErrInvalidEvent), errors.Is(err, ErrSequenceApplied):
		return ResultRejected
	}
	return ResultFailed
}
