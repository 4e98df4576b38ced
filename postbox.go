package postbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Event is one message written to the outbox in the producer's transaction.
//
// Only EventType and Payload are required. The zero ID is replaced by a
// time-ordered UUIDv7 when the event is enqueued; that id then travels end to
// end: it is the outbox row id, the webhook id or broker message id, and the
// consumer's inbox key.
type Event struct {
	// ID is the stable event id. Zero means "generate a UUIDv7".
	ID uuid.UUID
	// AggregateType and AggregateID name the entity the event is about
	// ("order", "42"). Events of one aggregate keep their order when the
	// relay runs in ordered mode, and the aggregate id is the partition key
	// of broker sinks.
	AggregateType string
	AggregateID   string
	// EventType is the event's name, such as "order.created".
	EventType string
	// Payload is the JSON body delivered to consumers.
	Payload []byte
	// DedupKey, when set, is unique among the events in the outbox and,
	// for the relay's dedup window after its event is delivered (24 h by
	// default, relay.Config.DedupWindow, postbox relay --dedup-window),
	// stays refused whether the delivered row was deleted or kept:
	// enqueueing another event with that key reports ErrDuplicate, and a
	// plain-SQL insert gets the unique index's error. Once the window has
	// passed (or with a window of 0, once the row is gone) the key is free
	// again.
	DedupKey string
	// Headers travel with the event (as HTTP headers or broker headers), for
	// example the W3C "traceparent" of the transaction that produced it.
	Headers map[string]string
	// AvailableAt delays the first delivery. Zero means "as soon as committed".
	AvailableAt time.Time
}

// ErrDuplicate is reported (wrapped in a *DuplicateError) when an event's
// DedupKey or ID is already in the outbox.
var ErrDuplicate = errors.New("postbox: duplicate event")

// DuplicateError lists the dedup keys or ids that were already in the outbox.
// It matches ErrDuplicate with errors.Is.
type DuplicateError struct {
	// Keys are the dedup keys that collided; for a repeated event id, the id
	// where the store can tell it, otherwise the word "id".
	Keys []string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("postbox: duplicate event: %s", strings.Join(e.Keys, ", "))
}

// Is reports whether target is ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

// NewID returns a new time-ordered (version 7) event id.
func NewID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}

// Validate checks what every store needs of an event before it is written.
func (e *Event) Validate() error {
	if e.EventType == "" {
		return errors.New("postbox: event type is empty")
	}
	if len(e.Payload) == 0 {
		return errors.New("postbox: payload is empty")
	}
	if !json.Valid(e.Payload) {
		return fmt.Errorf("postbox: payload of %s event is not valid JSON", e.EventType)
	}
	// The stores bound times to years 1 to 9999 (what every client reads):
	// a time outside is refused here, naming the event, rather than by the
	// database, which would abort the producer's whole transaction.
	if y := e.AvailableAt.UTC().Year(); !e.AvailableAt.IsZero() && (y < 1 || y > 9999) {
		return fmt.Errorf("postbox: AvailableAt of %s event is %v: want a time from year 1 to 9999", e.EventType, e.AvailableAt)
	}
	return nil
}
