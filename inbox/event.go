package inbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// Event is one incoming event: a webhook request or a broker message.
type Event struct {
	// ID is the stable event id: the producer's outbox row id, sent as the
	// webhook id or the broker message id. It is the inbox primary key.
	// Required.
	ID uuid.UUID
	// EventType is the event's name, such as "order.created". Optional.
	EventType string
	// AggregateType and AggregateID name the entity the event is about
	// ("order", "42"). Optional; with Seq they name the sequence the event
	// belongs to.
	AggregateType string
	AggregateID   string
	// Seq is the event's position among the events of its aggregate,
	// starting at 1, for consumer-side ordering: an event is applied only
	// after the event numbered Seq-1 of the same aggregate (see
	// ErrOutOfOrder). Zero means the event is not ordered.
	Seq int64
	// Payload is the event's JSON body, stored in the inbox row for audit.
	// Empty stores nothing; anything else must be valid JSON.
	Payload []byte
	// Signature is the signature header the event came with, stored for
	// audit. Optional.
	Signature string
}

// validate checks what every store needs of an event before it is written.
func (e *Event) validate() error {
	if e.ID == uuid.Nil {
		return fmt.Errorf("%w: id is zero", ErrInvalidEvent)
	}
	if e.Seq < 0 {
		return fmt.Errorf("%w: event %s: negative sequence number %d", ErrInvalidEvent, e.ID, e.Seq)
	}
	if len(e.Payload) > 0 && !json.Valid(e.Payload) {
		return fmt.Errorf("%w: event %s: payload is not valid JSON", ErrInvalidEvent, e.ID)
	}
	for _, f := range [...]struct{ name, value string }{
		{"event type", e.EventType},
		{"aggregate type", e.AggregateType},
		{"aggregate id", e.AggregateID},
		{"signature", e.Signature},
	} {
		if !utf8.ValidString(f.value) || strings.IndexByte(f.value, 0) >= 0 {
			return fmt.Errorf("%w: event %s: %s is not valid UTF-8 text", ErrInvalidEvent, e.ID, f.name)
		}
	}
	return nil
}

// storeEvent returns the event as a store takes it.
func (e *Event) storeEvent() store.InboxEvent {
	return store.InboxEvent{
		ID:            e.ID,
		EventType:     e.EventType,
		AggregateType: e.AggregateType,
		AggregateID:   e.AggregateID,
		Seq:           e.Seq,
		Payload:       e.Payload,
		Signature:     e.Signature,
	}
}

// Outcome is what Process did with an event.
type Outcome int

const (
	// Processed: the handler ran and its transaction, with the event's
	// inbox row, committed.
	Processed Outcome = iota + 1
	// Duplicate: the event had been processed before; the handler did not
	// run. Answer it as a success (HTTP 2xx, broker ack).
	Duplicate
)

// String returns "processed" or "duplicate".
func (o Outcome) String() string {
	switch o {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}
