package inbox

import (
	"errors"
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

// Handling is one call of Process, as Observer.Handled receives it. It is
// passed by value and holds no reference to the event.
type Handling struct {
	// EventType is the event's type, such as "order.created".
	EventType string
	// Outcome is what Process did.
	Outcome Outcome
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

// outcomeOf is the Outcome an Observer sees of a call of Process that
// returned outcome and err.
func outcomeOf(outcome Outcome, err error) Outcome {
	switch {
	case err == nil && outcome == Duplicate:
		return Duplicate
	case err == nil:
		return Processed
	case errors.Is(err, ErrInvalidEvent), errors.Is(err, ErrSequenceApplied):
		return Rejected
	}
	return Failed
}
