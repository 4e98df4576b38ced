package inbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// Event is one incoming event: a webhook request or a broker message. It is
// the store's own type (store.InboxEvent): the inbox hands the stores the
// event it was given, with no copy in between.
type Event = store.InboxEvent

// validate checks what every store needs of an event before it is written.
func validate(e *Event) error {
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

// Outcome is what Process did with an event: Processed or Duplicate is what
// it returns with a nil error; an Observer sees the outcome of every call,
// Failed and Rejected too (see outcomeOf).
type Outcome int

const (
	// Processed: the handler ran and its transaction, with the event's
	// inbox row, committed.
	Processed Outcome = iota + 1
	// Duplicate: the event had been processed before; the handler did not
	// run. Answer it as a success (HTTP 2xx, broker ack).
	Duplicate
	// Failed: nothing was applied and a later delivery may succeed: the
	// handler or the store failed, the event is out of order, or another
	// consumer holds it (Process returned an error the sender retries).
	Failed
	// Rejected: nothing was applied and no delivery ever will be: an
	// invalid event, a handler's Reject (a payload that does not decode,
	// a type without a route), a sequence number already taken.
	Rejected
)

// Outcomes are every Outcome, in the order of their values.
var Outcomes = [...]Outcome{Processed, Duplicate, Failed, Rejected}

// String returns "processed", "duplicate", "failed" or "rejected": the
// words of metrics labels.
func (o Outcome) String() string {
	switch o {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	case Failed:
		return "failed"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}
