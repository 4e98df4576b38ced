package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrNoRoute matches the error of a Router for an event whose type has no
// route, under the policies UnknownReject (where the error also matches
// ErrRejected) and UnknownRetry.
var ErrNoRoute = errors.New("inbox: no route for event type")

// UnknownPolicy is what a Router does with an event whose type has no route.
type UnknownPolicy int

const (
	// UnknownReject rejects the event for good, as Reject does: nothing is
	// applied, the inbox row is recorded failed ("no route for event type
	// ..."), the webhook answer is 400 and the sender dead-letters the
	// event after its few attempts for rejections. It is the default: an
	// event nobody wrote a route for is kept, visibly, at the sender, and
	// can be sent again once a route exists; the other policies lose it
	// (UnknownIgnore) or make the sender retry for hours (UnknownRetry).
	UnknownReject UnknownPolicy = iota
	// UnknownIgnore acknowledges the event without running anything: its
	// inbox row is recorded done, so the sender marks it delivered and
	// every later delivery is a duplicate. Choose it for a stream that
	// carries types this consumer does not care about. An event ignored
	// this way is not applied even if a route for its type is added later.
	UnknownIgnore
	// UnknownRetry fails the event temporarily, as a handler error does:
	// the inbox row is recorded failed, the webhook answer is 500 and the
	// sender retries it through its whole backoff schedule. Choose it
	// when producers may ship a new type before every consumer instance
	// has its route (a rolling deploy): the instance that has the route
	// applies it.
	UnknownRetry
)

// String returns "reject", "ignore" or "retry".
func (p UnknownPolicy) String() string {
	switch p {
	case UnknownReject:
		return "reject"
	case UnknownIgnore:
		return "ignore"
	case UnknownRetry:
		return "retry"
	}
	return fmt.Sprintf("UnknownPolicy(%d)", int(p))
}

// Router dispatches events by type to typed routes, added with Handle. Its
// Apply method is a ProcessFunc: give it to Inbox.Process, or to
// Inbox.Processor for the webhook handler and broker consumers:
//
//	r := inbox.NewRouter[pgx.Tx]()
//	inbox.Handle(r, "order.created", reserveStock) // func(ctx, pgx.Tx, *inbox.Event, OrderCreated) error
//	inbox.Handle(r, "order.cancelled", releaseStock)
//	h, err := inbox.NewHandler(inbox.HandlerConfig{Secrets: secrets, Process: ib.Processor(r.Apply)})
//
// Add every route before the router applies its first event: Handle and
// SetUnknown are not safe to call concurrently with Apply. Apply is safe
// for concurrent use.
type Router[TTx any] struct {
	routes  map[string]ProcessFunc[TTx]
	unknown UnknownPolicy
}

// NewRouter returns a router without routes, whose policy for event types
// without a route is UnknownReject.
func NewRouter[TTx any]() *Router[TTx] {
	return &Router[TTx]{routes: make(map[string]ProcessFunc[TTx])}
}

// Handle routes the events of type eventType to fn, with their payload
// decoded into a T:
//
//	type OrderCreated struct {
//		OrderID int64 `json:"order_id"`
//		Amount  int64 `json:"amount"`
//	}
//
//	inbox.Handle(r, "order.created", func(ctx context.Context, tx pgx.Tx, ev *inbox.Event, p OrderCreated) error {
//		_, err := tx.Exec(ctx, "insert into reservations (order_id, amount) values ($1, $2)", p.OrderID, p.Amount)
//		return err
//	})
//
// fn runs in the inbox transaction, as any ProcessFunc (see ProcessFunc and
// Inbox.Process): its error rolls everything back and the sender retries,
// unless the error is a Reject.
//
// The payload is decoded with encoding/json, as json.Unmarshal decodes:
// fields of the payload that T does not have are ignored, so producers can
// add fields without breaking consumers, and fields of T missing from the
// payload keep their zero value (check the ones you need, and Reject the
// event without them). A payload that does not decode into T (not the
// JSON shape of T, a string where T has a number) is rejected for good,
// with the decoding error as the reason, and fn does not run: no retry can
// change the payload. An empty payload decodes as JSON null, leaving T its
// zero value. ev.Payload still holds the bytes, for fields T leaves out.
//
// Handle is a function rather than a method because Go methods cannot have
// type parameters. It panics, as http.ServeMux.Handle does, when eventType
// is empty, fn is nil, or eventType already has a route: these are
// programming errors found at start.
func Handle[TTx, T any](r *Router[TTx], eventType string, fn func(ctx context.Context, tx TTx, ev *Event, payload T) error) {
	switch {
	case eventType == "":
		panic("inbox: Handle: empty event type")
	case fn == nil:
		panic(fmt.Sprintf("inbox: Handle %q: nil handler", eventType))
	}
	if _, dup := r.routes[eventType]; dup {
		panic(fmt.Sprintf("inbox: Handle %q: the event type already has a route", eventType))
	}
	r.routes[eventType] = func(ctx context.Context, tx TTx, ev *Event) error {
		var payload T
		if len(ev.Payload) > 0 {
			if err := json.Unmarshal(ev.Payload, &payload); err != nil {
				return Reject(fmt.Errorf("event type %q: payload does not decode into %T: %w", eventType, payload, err))
			}
		}
		return fn(ctx, tx, ev, payload)
	}
}

// SetUnknown sets what the router does with an event whose type has no
// route (default UnknownReject). It panics on a value that is not one of
// the UnknownPolicy constants.
func (r *Router[TTx]) SetUnknown(p UnknownPolicy) {
	switch p {
	case UnknownReject, UnknownIgnore, UnknownRetry:
		r.unknown = p
	default:
		panic(fmt.Sprintf("inbox: SetUnknown: %v is not a policy", p))
	}
}

// EventTypes returns the event types that have a route, sorted: for
// instance to log at start, or to subscribe a sender to exactly these.
func (r *Router[TTx]) EventTypes() []string {
	return slices.Sorted(maps.Keys(r.routes))
}

// Apply applies ev with the route of its type, or by the router's policy
// for types without one (see UnknownPolicy). It is a ProcessFunc.
func (r *Router[TTx]) Apply(ctx context.Context, tx TTx, ev *Event) error {
	if route, ok := r.routes[ev.EventType]; ok {
		return route(ctx, tx, ev)
	}
	switch r.unknown {
	case UnknownIgnore:
		return nil
	case UnknownRetry:
		return fmt.Errorf("%w %q", ErrNoRoute, ev.EventType)
	}
	return Reject(fmt.Errorf("%w %q", ErrNoRoute, ev.EventType))
}

// Processor returns a function that processes each event it is given with
// fn, as Process does: the form HandlerConfig.Process takes, and a broker
// consumer can call. With a Router:
//
//	h, err := inbox.NewHandler(inbox.HandlerConfig{Secrets: secrets, Process: ib.Processor(r.Apply)})
//
// Use a function of your own instead when something must happen before
// Process, such as setting ev.Seq from the payload.
//
// It panics when fn is nil.
func (ib *Inbox[TTx]) Processor(fn ProcessFunc[TTx]) func(ctx context.Context, ev *Event) (Outcome, error) {
	if fn == nil {
		panic("inbox: Processor: nil ProcessFunc")
	}
	return func(ctx context.Context, ev *Event) (Outcome, error) {
		return ib.Process(ctx, ev, fn)
	}
}
