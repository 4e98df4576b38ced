package inbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
)

// Broker consumers (packages inbox/nats, inbox/amqp, inbox/kafka) read the
// relay's broker wire format (see package postbox) into an Event with
// EventFromBroker, hand it to the application's Process function, and
// settle the message by the Verdict of its outcome: acknowledge only once
// the inbox transaction has committed, so the exactly-once effect holds
// through a broker as it does through webhooks.

// EventFromBroker decodes a broker message of the wire format into an
// Event. header returns a header's value ("" when absent); messageID is the
// broker's own message id (Nats-Msg-Id, AMQP message_id; "" when the broker
// has none), used when the message lacks postbox.HeaderEventID. The body is
// the payload, unchanged. A message without a valid event id, or with
// headers no sender of the format writes, reports ErrInvalidEvent: it can
// never be processed (Verdict Discard).
func EventFromBroker(header func(name string) string, messageID string, body []byte) (*Event, error) {
	rawID := header(postbox.HeaderEventID)
	if rawID == "" {
		rawID = messageID
	}
	if rawID == "" {
		return nil, fmt.Errorf("%w: the message has no event id (%s header or message id)", ErrInvalidEvent, postbox.HeaderEventID)
	}
	id, err := uuid.Parse(rawID)
	if err != nil {
		return nil, fmt.Errorf("%w: event id %.64q is not a UUID", ErrInvalidEvent, rawID)
	}
	ev := &Event{
		ID:            id,
		Payload:       body,
		EventType:     header(postbox.HeaderEventType),
		AggregateType: header(postbox.HeaderAggregateType),
		AggregateID:   header(postbox.HeaderAggregateID),
	}
	if len(ev.EventType) > metadataMaxLen || len(ev.AggregateType) > metadataMaxLen || len(ev.AggregateID) > metadataMaxLen {
		return nil, fmt.Errorf("%w: event %s: a Postbox-* header is longer than %d bytes", ErrInvalidEvent, id, metadataMaxLen)
	}
	if s := header(HeaderSequence); s != "" {
		seq, err := strconv.ParseInt(s, 10, 64)
		if err != nil || seq < 1 {
			return nil, fmt.Errorf("%w: event %s: %s is not a positive integer", ErrInvalidEvent, id, HeaderSequence)
		}
		ev.Seq = seq
	}
	if err := validate(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// Verdict is how a broker consumer settles a message after processing it.
type Verdict int

const (
	// Ack: the event was processed, now or before (a duplicate).
	// Acknowledge the message; the broker forgets it.
	Ack Verdict = iota + 1
	// Redeliver: a temporary failure (the handler failed and was rolled
	// back, the event is out of order or claimed elsewhere, the database
	// is unreachable). Negative-acknowledge it with a delay
	// (RedeliveryDelay), so the broker delivers it again.
	Redeliver
	// Discard: the message can never be processed (not a postbox event, a
	// payload that is not JSON, a sequence number another event applied).
	// Log it and terminate it, into the broker's dead-letter destination
	// where it has one; redelivering it would only loop.
	Discard
)

// String returns "ack", "redeliver" or "discard".
func (v Verdict) String() string {
	switch v {
	case Ack:
		return "ack"
	case Redeliver:
		return "redeliver"
	case Discard:
		return "discard"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// VerdictOf returns how to settle a message whose processing returned err
// (from EventFromBroker or Process). A cancelled context redelivers: the
// consumer is stopping, and the event was not at fault.
func VerdictOf(err error) Verdict {
	switch {
	case err == nil, errors.Is(err, ErrDuplicate):
		return Ack
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Redeliver
	case errors.Is(err, ErrInvalidEvent), errors.Is(err, ErrSequenceApplied):
		return Discard
	}
	return Redeliver
}

// Defaults of the redelivery delay of broker consumers.
const (
	RedeliveryMinDefault = time.Second
	RedeliveryMaxDefault = 5 * time.Minute
)

// RedeliveryDelay returns how long to wait before a message that failed
// is delivered again, growing with delivered, the number of times the
// broker has delivered it (1 for the first delivery): lo doubled each time,
// at most hi, less up to a fifth at random so that messages which failed
// together do not come back together, and never under lo. A zero lo or hi
// means its default (RedeliveryMinDefault, RedeliveryMaxDefault).
func RedeliveryDelay(delivered int, lo, hi time.Duration) time.Duration {
	if lo <= 0 {
		lo = RedeliveryMinDefault
	}
	if hi <= 0 {
		hi = RedeliveryMaxDefault
	}
	d := lo
	for i := 1; i < delivered && d < hi; i++ {
		d *= 2
	}
	d = time.Duration(float64(min(d, hi)) * (1 - rand.Float64()/5))
	return max(d, lo)
}
