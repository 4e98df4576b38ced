// Package consumertest is the conformance suite every broker consumer of
// the inbox passes: inbox/nats, inbox/amqp and inbox/kafka. A consumer's
// test calls Run with a Harness that says how to publish to a fresh
// destination (a stream, a queue, a topic) as the matching sink does, how
// to run the consumer on it, and what the broker still holds; each case
// then runs in parallel, with an inbox in a PostgreSQL schema of its own
// (postboxtest/pgtest), and checks what the application applied, what
// Process was given, and what the broker would deliver again.
//
// The cases: every event applied once; a duplicate delivery absorbed;
// malformed messages and an event the handler rejects discarded alone,
// with a warning, while the others are applied; a failed handler's event
// delivered again, with the broker's delivery count, then applied; ordered
// events (Postbox-Sequence) applied in their order; a stop that lets the
// events in progress finish, cancels those past Config.ShutdownTimeout,
// and leaves nothing half applied for the next consumer; and a Config
// refused field by field.
//
// The suite reads the consumer's log (Config.Logger) as the consumers of
// this module write it (package inbox/internal/consume): a warning per
// discarded message whose text holds "discarding a message that can never
// be processed", with the event's id as event_id when it decoded and the
// reason as error, and a line per failure whose text holds "processing
// failed", with event_id and the delivery count as delivery (1 for the
// first delivery).
package consumertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/sink"
)

// Config is what the suite sets of a consumer's Config: the fields every
// broker consumer has, under these names. The harness copies them into
// its consumer's Config.
type Config struct {
	Process                      func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error)
	Concurrency                  int
	RedeliveryMin, RedeliveryMax time.Duration
	ShutdownTimeout              time.Duration
	Logger                       *slog.Logger
}

// Raw is a message published as it is, not through the sink: a malformed
// one, or a copy of an event that the broker's own de-duplication must not
// drop.
type Raw struct {
	// Key places the message where the broker places by key: the Kafka
	// record's key. Other brokers may ignore it.
	Key string
	// Headers are the message's only headers.
	Headers map[string]string
	// Body is the message's body.
	Body []byte
}

// Broker is a fresh destination that nobody else publishes to or reads:
// how to publish to it, how to run its consumer, and what it still holds.
type Broker struct {
	// Publish publishes m through the matching sink, as the relay does,
	// and returns once the broker has acknowledged it.
	Publish func(t *testing.T, m *sink.Message)
	// PublishRaw publishes m as it is, with no broker message id (such as
	// Nats-Msg-Id) besides what its Headers say, and returns once the
	// broker has acknowledged it.
	PublishRaw func(t *testing.T, m Raw)
	// Consume makes the destination's consumer with cfg (the consumer's
	// New) and runs it until ctx ends (its Run), and returns the first
	// error. The suite calls it again after it returned, for the next
	// consumer of the same destination (the same durable consumer, queue
	// or group).
	Consume func(ctx context.Context, cfg Config) error
	// Unsettled returns how many messages the broker would deliver to the
	// destination's next consumer: published and neither acknowledged,
	// terminated nor committed past. The suite calls it once Consume has
	// returned.
	Unsettled func(t *testing.T) int
}

// Features declares how a consumer differs; the suite checks exactly what
// it promises.
type Features struct {
	// RetriesInPlace is true when a message whose processing failed is
	// processed again before the ones behind it in its partition, which
	// wait (Kafka). An ordered event published before its predecessor
	// would hold its partition forever, so the suite publishes ordered
	// events in their order only; without it, it also publishes an event
	// before its predecessor, which must be delivered again after it.
	RetriesInPlace bool
}

// Harness connects a broker consumer to the suite.
type Harness struct {
	// New returns a fresh destination, and releases what it made with
	// t.Cleanup. It is called once per case, from parallel tests.
	New func(t *testing.T) Broker
	// Features are how the consumer differs.
	Features Features
}

// Run runs every case of the suite against h, each as a parallel subtest.
func Run(t *testing.T, h Harness) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, Broker, Features)
	}{
		{"EveryEventAppliedOnce", testEveryEventAppliedOnce},
		{"DuplicateAbsorbed", testDuplicateAbsorbed},
		{"MalformedDiscardedAlone", testMalformedDiscardedAlone},
		{"FailureRetriedThenApplied", testFailureRetriedThenApplied},
		{"OrderedEventsInOrder", testOrderedEventsInOrder},
		{"StopLeavesNothingHalfApplied", testStopLeavesNothingHalfApplied},
		{"RefusesBadConfig", testRefusesBadConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, h.New(t), h.Features)
		})
	}
}
