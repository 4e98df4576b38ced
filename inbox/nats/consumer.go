// Package nats is the inbox's NATS JetStream consumer: it reads a
// JetStream consumer that the relay's NATS sink (package sink/nats) feeds,
// applies each event once through Config.Process (usually an Inbox's
// Processor, with the application's handler or a Router's Apply), and
// settles each message by the outcome (inbox.VerdictOf):
//
//	c, err := nats.New(nats.Config{Consumer: cons, Process: ib.Processor(routes.Apply)})
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx ends
//
// Packages inbox/amqp and inbox/kafka have the same shape, the same Config
// fields for the same things, and settle alike; postboxtest/consumertest
// is the suite all three pass.
//
// # Settling
//
//   - Processed, or a duplicate: acknowledged once Process has returned,
//     that is once the inbox transaction has committed. A message whose
//     acknowledgement is lost comes back, and the inbox answers it as a
//     duplicate.
//   - A temporary failure (the handler failed and rolled back, the event
//     came before its predecessor or is claimed elsewhere, the database is
//     down): delivered again after a delay that grows with the message's
//     delivery count (inbox.RedeliveryDelay, within Config.RedeliveryMin
//     and RedeliveryMax), for as long as it fails, without holding up the
//     other messages.
//   - Never processable (not a postbox event, a Postbox-* header no sender
//     writes, a payload that is not JSON, an event the handler rejects with
//     inbox.Reject, a sequence number another event took): discarded, with
//     a warning giving the event id and the reason; it is never delivered
//     again.
//
// A message fails alone: the others go on. Config.Concurrency messages are
// processed at once, so events of one aggregate may come out of order;
// the inbox applies ordered events (inbox.Event.Seq, the Postbox-Sequence
// header) in order all the same, delivering again those that came early.
// A broker message carries no signature (see "What it trusts").
//
// When Run's context ends, it takes no more messages; those in progress
// may finish and be settled for Config.ShutdownTimeout, then their
// processing is cancelled, rolls back, and they are delivered again
// later. Metrics of the processing come from the inbox's own observer
// (inbox.WithObserver).
//
// # What is particular to JetStream
//
//   - Acknowledgements are per message: an acknowledgement the server
//     confirms (DoubleAck), a negative one with the redelivery's delay
//     (NakWithDelay), and Term for a discarded message.
//   - The delivery count is the server's (the message's NumDelivered); a
//     MaxDeliver on the JetStream consumer stops redelivering after so
//     many deliveries, without terminating the message.
//   - A handler running past half the JetStream consumer's AckWait is kept
//     alive with "in progress" acknowledgements, so its message is not
//     delivered a second time meanwhile.
//   - Messages fetched but not started when Run stops are left
//     unacknowledged: the server delivers them again after AckWait.
//   - The JetStream consumer must acknowledge explicitly
//     (jetstream.AckExplicitPolicy, the default of a pull consumer), which
//     New checks; Run ends with an error when the consumer is deleted or
//     the connection closed.
//
// # What it trusts
//
// A message is trusted because of who could publish it: JetStream messages
// carry no signature, so the consumer relies on the broker's own
// authentication and authorization of publishers, for the payload as for
// the Postbox-* headers it routes and orders on (event type, aggregate,
// Postbox-Sequence) and the event id. Whoever may publish where the
// consumer reads can send any event, with any type or sequence number. So
// let only the relay publish there (NATS accounts or users with publish
// permission on the stream's subjects for the relay alone), and connect
// with TLS.
//
// A Postbox-Metadata-Signature header, if a message carries one, is not
// checked: the relay's broker sinks do not sign, and a signature of the
// headers alone would prove nothing while the body beside it is unsigned.
// Should a broker sink sign messages end to end one day, with the same
// signature.Signer as webhooks, the consumer should verify both the body
// (signature.Verifier.Verify) and the metadata (VerifyMetadata) and refuse
// messages without them, as the webhook handler does.
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/inbox/internal/consume"
)

// Defaults of the Config fields left zero.
const (
	ConcurrencyDefault     = consume.ConcurrencyDefault
	ShutdownTimeoutDefault = consume.ShutdownTimeoutDefault
)

// errStopping is the outcome of a message received as Run stops, before
// it was processed: it is delivered again.
var errStopping = fmt.Errorf("not processed: the consumer is stopping: %w", context.Canceled)

// settleTimeout bounds one acknowledgement that waits for the server's
// confirmation.
const settleTimeout = 10 * time.Second

// Config configures a Consumer. Consumer and Process are required; a zero
// field takes its default and a negative one is refused.
type Config struct {
	// Consumer is the JetStream consumer to read: a durable pull consumer
	// that acknowledges explicitly. Required.
	Consumer jetstream.Consumer

	// Process applies one event, usually an Inbox's Processor (Inbox.Process
	// with the application's handler or a Router's Apply); its outcome and
	// error decide how the message is settled (inbox.VerdictOf). It may
	// adjust ev first, for instance set ev.Seq from the payload. It runs
	// for several messages at once, and must return soon after its context
	// is cancelled. Required.
	Process func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error)
	// Concurrency is the most messages processed at once. Default
	// ConcurrencyDefault (16).
	Concurrency int
	// RedeliveryMin and RedeliveryMax bound the delay before a message
	// whose processing failed is delivered again (see
	// inbox.RedeliveryDelay). Defaults inbox.RedeliveryMinDefault (1s) and
	// inbox.RedeliveryMaxDefault (5m, or RedeliveryMin when it is more);
	// RedeliveryMin above RedeliveryMax is refused.
	RedeliveryMin, RedeliveryMax time.Duration
	// ShutdownTimeout is how long the messages in progress when Run's
	// context ends may still take to be processed; then their processing
	// is cancelled (it rolls back, and they are delivered again later).
	// Default ShutdownTimeoutDefault (10s).
	ShutdownTimeout time.Duration
	// Logger receives a line per discarded message and per failure, with
	// the event id and the reason, and acknowledgements that failed; never
	// payloads. Default slog.Default().
	Logger *slog.Logger
}

// Consumer applies the messages of a JetStream consumer through an inbox;
// see the package documentation.
type Consumer struct {
	cons jetstream.Consumer
	name string
	// ackWait is the JetStream consumer's, which keepAlive paces.
	ackWait time.Duration
	s       consume.Settings
}

// New checks cfg, and that cfg.Consumer acknowledges explicitly (from its
// cached information, without a request), and returns its Consumer.
func New(cfg Config) (*Consumer, error) {
	if cfg.Consumer == nil {
		return nil, errors.New("inbox/nats: Config.Consumer is nil")
	}
	s, err := consume.Settings{
		Process: cfg.Process, Concurrency: cfg.Concurrency,
		RedeliveryMin: cfg.RedeliveryMin, RedeliveryMax: cfg.RedeliveryMax,
		ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger,
	}.Check("inbox/nats")
	if err != nil {
		return nil, err
	}
	info := cfg.Consumer.CachedInfo()
	if info == nil {
		return nil, errors.New("inbox/nats: Config.Consumer has no information")
	}
	if p := info.Config.AckPolicy; p != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("inbox/nats: consumer %s acknowledges %s; the inbox needs explicit acknowledgements (jetstream.AckExplicitPolicy)", info.Name, p)
	}
	return &Consumer{cons: cfg.Consumer, name: info.Name, ackWait: info.Config.AckWait, s: s}, nil
}

// Run processes the consumer's messages until ctx ends, then lets those in
// progress finish and settles them (for at most Config.ShutdownTimeout),
// and returns nil. It returns an error when the messages cannot be read:
// the JetStream consumer is deleted, the connection closed.
func (c *Consumer) Run(ctx context.Context) error {
	it, err := c.cons.Messages(jetstream.PullMaxMessages(c.s.Concurrency), jetstream.WithMessagesErrOnMissingHeartbeat(false))
	if err != nil {
		return fmt.Errorf("inbox/nats: consume %s: %w", c.name, err)
	}
	processing, cancel := c.s.Processing(ctx)
	defer cancel()
	slots := make(chan struct{}, c.s.Concurrency)
	var inFlight sync.WaitGroup
	defer func() {
		it.Stop() // fetch no more, then let the messages in progress finish
		inFlight.Wait()
	}()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			if msg != nil {
				c.settle(msg, nil, errStopping)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("inbox/nats: consume %s: %w", c.name, err)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			c.settle(msg, nil, errStopping)
			return nil
		}
		inFlight.Go(func() {
			defer func() { <-slots }()
			c.handle(processing, msg)
		})
	}
}

// handle processes one message and settles it.
func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg) {
	h := msg.Headers()
	ev, err := inbox.EventFromBroker(h.Get, h.Get(jetstream.MsgIDHeader), msg.Data())
	if err == nil {
		stop := c.keepAlive(msg)
		_, err = c.s.Process(ctx, ev)
		stop()
	}
	c.settle(msg, ev, err)
}

// keepAlive tells the server that msg is in progress every half AckWait
// until stop is called, so that a long handler's message is not delivered
// again meanwhile.
func (c *Consumer) keepAlive(msg jetstream.Msg) (stop func()) {
	if c.ackWait <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(c.ackWait / 2)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// settle acknowledges msg by the outcome of its processing, err; ev is its
// event when it decoded.
func (c *Consumer) settle(msg jetstream.Msg, ev *inbox.Event, err error) {
	delivery := 1
	if meta, err := msg.Metadata(); err == nil {
		delivery = int(meta.NumDelivered)
	}
	where := []slog.Attr{slog.String("consumer", c.name), slog.String("subject", msg.Subject())}
	if ev == nil {
		where = append(where, slog.String("message_id", msg.Headers().Get(jetstream.MsgIDHeader)))
	}
	verdict, delay := c.s.Verdict(ev, err, delivery, where...)
	what := "ack"
	switch verdict {
	case inbox.Ack:
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		err = msg.DoubleAck(ctx)
		cancel()
	case inbox.Discard:
		what, err = "term", msg.Term()
	default:
		what, err = "nak", msg.NakWithDelay(delay)
	}
	if err != nil {
		c.s.Unsent(what, err, where...)
	}
}
