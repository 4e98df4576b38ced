// Package sink defines how the relay publishes events: the Sink interface,
// the Message it publishes and the errors that tell the relay whether to
// retry. Implementations live in sub-packages: webhook (signed HTTP POSTs,
// also the endpoint dispatcher's), nats (JetStream), amqp (RabbitMQ) and
// kafka; all pass the shared suite in postboxtest/sinktest.
//
// One event never costs another anything: what the destination cannot
// accept in one message (its size, a header's name, value or size, an
// encoding the protocol refuses) is Permanent for that message alone. A
// sink checks it before sending where the limit is known (its Config, or
// the server's, such as NATS's max_payload or the connection's AMQP
// frame_max), so that the message never breaks a connection or a batch
// that others share, and maps the destination's own per-message refusal
// where it is not. The error names the limit and the message's size, or
// the header.
package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/postbox-go/postbox"
)

// Message is one event as a sink publishes it.
type Message struct {
	// Event is the event to publish: its ID is the stable event id, which
	// sinks send as the webhook id or the broker message id; its Payload is
	// sent exactly as stored, never re-encoded; its Headers are the event's
	// own (trace context and the like).
	postbox.Event
	// Attempt is the number of this attempt, starting at 1.
	Attempt int
	// ContentType is the media type of Payload, as the sink sends it (a
	// webhook's Content-Type header, a broker's content-type property or
	// header). Empty means postbox.ContentTypeJSON, what an outbox event's
	// payload is; an envelope (package sink/envelope) sets another, such as
	// CloudEvents' structured "application/cloudevents+json".
	ContentType string
}

// Sink publishes messages. Publish returns nil only once the destination has
// accepted the message (a 2xx answer, a broker acknowledgement). It must
// honour ctx and be safe for concurrent use.
type Sink interface {
	Publish(ctx context.Context, m *Message) error
	// String names the destination for logs (its kind and address, and
	// the settings that matter), never credentials, secrets or a URL's
	// path or query.
	String() string
	// Destination names the destination for traces.
	Destination() Destination
}

// BatchSink is a Sink that publishes a batch of messages at once for less
// than publishing them one by one concurrently costs: a broker client that
// sends them in a row and then collects their acknowledgements, without a
// goroutine waiting for each. A relay publishes in batches only when told
// to (relay.Config.PublishBatch), so that a wrapper that is not itself a
// BatchSink cannot turn batches off without a word: the relay refuses to
// start instead.
type BatchSink interface {
	Sink
	// PublishBatch publishes msgs and sets errs[i] (len(errs) ==
	// len(msgs)) to what Publish would have returned for msgs[i]. It
	// returns once every message has its outcome, or ctx ended (the
	// messages not acknowledged by then fail with ctx's cause).
	PublishBatch(ctx context.Context, msgs []*Message, errs []error)
}

// Destination is where a sink publishes, as traces name it.
type Destination struct {
	// System is the kind of destination, a span's messaging.system:
	// "webhook", "kafka", "nats", "rabbitmq".
	System string
	// Name names the destination, a span's messaging.destination.name:
	// an endpoint's scheme and host, a topic or subject. It must stay of
	// low cardinality and never hold credentials, a URL's path or query.
	Name string
}

// Kind says what the relay should do after a failed publish.
type Kind int

const (
	// Retryable failures are retried with backoff until the attempts run out.
	Retryable Kind = iota
	// Rejected failures (the destination refused this message, such as an
	// HTTP 4xx) are retried a small, bounded number of times, then failed.
	Rejected
	// Permanent failures are not retried: the event fails at once. They
	// say that the destination can never accept this message as it is
	// (too large, a header it refuses), whatever it accepts of others.
	Permanent
	// Unavailable failures say the destination itself cannot be reached
	// (connection refused, a DNS failure, a broker connection that is
	// down), not that it refused this message: the message is not at
	// fault, and other messages would fail alike. The relay takes one for
	// an outage: it stops claiming, probes the destination with one
	// message at a time until one gets through, and such failures count
	// no attempt, so no message is dead-lettered for an outage. Return it
	// only when nothing reached the destination; a timeout after the
	// message was sent is Retryable (the relay takes a run of timeouts
	// for an outage too). An Unavailable Error with a StatusCode is a
	// gateway's answer that the destination behind it cannot be reached
	// (the webhook sink's 502 and 504): the relay takes a run of them,
	// not one, for an outage, since the destination may fail on this
	// one message.
	Unavailable
)

func (k Kind) String() string {
	switch k {
	case Rejected:
		return "rejected"
	case Permanent:
		return "permanent"
	case Unavailable:
		return "unavailable"
	default:
		return "retryable"
	}
}

// Error is a classified publish failure.
type Error struct {
	Kind Kind
	// StatusCode is the HTTP status of a webhook answer, or 0.
	StatusCode int
	// RetryAfter is the destination's own wish (HTTP Retry-After), or 0.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s: status %d: %v", e.Kind, e.StatusCode, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Classify returns how err should be handled: errors that are not an *Error
// (timeouts, connection failures) are Retryable.
func Classify(err error) (kind Kind, retryAfter time.Duration, statusCode int) {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind, e.RetryAfter, e.StatusCode
	}
	return Retryable, 0, 0
}
