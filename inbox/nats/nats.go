// Package nats consumes a NATS JetStream consumer into an inbox: each
// message the relay's NATS sink published is decoded into an inbox.Event
// (inbox.EventFromBroker), applied by the application's Process function
// (usually Inbox.Process with its handler, in one database transaction),
// and settled by the outcome (inbox.VerdictOf):
//
//   - processed, or a duplicate: acknowledged, and only then, with a
//     double ack the server confirms. A message whose ack is lost comes
//     back, and the inbox answers it as a duplicate;
//   - a temporary failure (the handler failed and rolled back, the event
//     is out of order, the database is down): negatively acknowledged with
//     a delay (inbox.RedeliveryDelay of the delivery count), so JetStream
//     delivers it again later;
//   - a message that can never be processed (not a postbox event, a
//     rejected payload): terminated, with the reason logged; JetStream never
//     delivers it again.
//
// A handler running past half the consumer's AckWait is kept alive with
// "in progress" acknowledgements, so a slow transaction is not delivered a
// second time meanwhile.
//
// The consumer must acknowledge explicitly (jetstream.AckExplicitPolicy,
// the default of a pull consumer). Consume runs Concurrency handlers at
// once; events of one aggregate may then be applied out of order unless
// the inbox's sequence check (inbox.Event.Seq) orders them, or Concurrency
// is 1.
//
// # What it trusts
//
// A message is trusted because of who could publish it: JetStream messages
// carry no signature, so the consumer relies on the broker's own
// authentication and authorization of publishers, for the payload as for
// the Postbox-* headers it routes and orders on (event type, aggregate,
// Postbox-Sequence) and the event id. Whoever may publish where the
// consumer reads can send any event, with any type or sequence number. So
// let only the relay publish there (NATS accounts or users with publish permission on the stream's subjects for the relay alone), and connect with TLS.
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
)

// Defaults of the Config fields left zero.
const (
	ConcurrencyDefault     = 16
	ShutdownTimeoutDefault = 10 * time.Second
	// settleTimeout bounds one acknowledgement (ack, nak, term).
	settleTimeout = 10 * time.Second
)

// Config configures Consume. Process is required; a zero field takes its
// default and a negative one is refused.
type Config struct {
	// Process applies one event, usually by calling Inbox.Process (or
	// Inbox.Processor) with the application's handler; its outcome and
	// error decide how the message is settled (inbox.VerdictOf). It may
	// adjust ev first, for instance set ev.Seq from the payload. Required.
	Process func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error)
	// Concurrency is the most messages processed at once. Default
	// ConcurrencyDefault (16).
	Concurrency int
	// RedeliveryMin and RedeliveryMax bound the delay before a message
	// that failed is delivered again (see inbox.RedeliveryDelay). Default
	// inbox.RedeliveryMinDefault (1s) and inbox.RedeliveryMaxDefault (5m).
	RedeliveryMin, RedeliveryMax time.Duration
	// ShutdownTimeout is how long the handlers running when ctx ends may
	// take to finish before their context is cancelled (which rolls them
	// back; the messages come back later). Default ShutdownTimeoutDefault
	// (10s).
	ShutdownTimeout time.Duration
	// Logger receives a line per redelivered or terminated message, with
	// the event id and the reason, never the payload. Default
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Process == nil:
		return c, errors.New("nats: Config.Process is nil")
	case c.Concurrency < 0:
		return c, fmt.Errorf("nats: Config.Concurrency %d is negative", c.Concurrency)
	case c.RedeliveryMin < 0 || c.RedeliveryMax < 0:
		return c, errors.New("nats: Config.RedeliveryMin and RedeliveryMax may not be negative")
	case c.ShutdownTimeout < 0:
		return c, fmt.Errorf("nats: Config.ShutdownTimeout %v is negative", c.ShutdownTimeout)
	}
	if c.Concurrency == 0 {
		c.Concurrency = ConcurrencyDefault
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = ShutdownTimeoutDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Consume processes the messages of cons until ctx ends, then waits for
// the messages in progress to be processed and settled (at most
// ShutdownTimeout for their handlers) and returns nil. Messages fetched but
// not yet started are left unacknowledged: JetStream delivers them again
// after the consumer's AckWait. It returns an error at once when cfg is
// invalid or cons does not acknowledge explicitly, and when the consumer
// is deleted or the connection closed.
func Consume(ctx context.Context, cons jetstream.Consumer, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	info := cons.CachedInfo()
	if info == nil {
		return errors.New("nats: the consumer has no info")
	}
	if p := info.Config.AckPolicy; p != jetstream.AckExplicitPolicy {
		return fmt.Errorf("nats: consumer %s acknowledges %s; the inbox needs explicit acknowledgements (jetstream.AckExplicitPolicy)", info.Name, p)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(cfg.Concurrency), jetstream.WithMessagesErrOnMissingHeartbeat(false))
	if err != nil {
		return fmt.Errorf("nats: consume %s: %w", info.Name, err)
	}

	// Handlers run on after ctx ends, for ShutdownTimeout.
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(cfg.ShutdownTimeout, cancelHandlers) })
	defer stopGrace()

	w := worker{cfg: cfg, ackWait: info.Config.AckWait, consumer: info.Name}
	slots := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	defer func() {
		it.Stop() // fetch no more, then let the handlers finish
		wg.Wait()
	}()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			if msg != nil {
				w.settle(msg, nil, inbox.Redeliver, "the consumer is stopping")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("nats: consume %s: %w", info.Name, err)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			w.settle(msg, nil, inbox.Redeliver, "the consumer is stopping")
			return nil
		}
		wg.Go(func() {
			defer func() { <-slots }()
			w.handle(handlerCtx, msg)
		})
	}
}

// worker processes and settles messages.
type worker struct {
	cfg      Config
	ackWait  time.Duration
	consumer string
}

// handle processes one message and settles it.
func (w worker) handle(ctx context.Context, msg jetstream.Msg) {
	h := msg.Headers()
	ev, err := inbox.EventFromBroker(h.Get, h.Get(jetstream.MsgIDHeader), msg.Data())
	if err == nil {
		stop := w.keepAlive(msg)
		_, err = w.cfg.Process(ctx, ev)
		stop()
	}
	verdict := inbox.VerdictOf(err)
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	w.settle(msg, ev, verdict, reason)
}

// keepAlive tells the server that msg is in progress every half AckWait
// until stop is called, so that a long handler's message is not delivered
// again meanwhile.
func (w worker) keepAlive(msg jetstream.Msg) (stop func()) {
	if w.ackWait <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(w.ackWait / 2)
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

// settle acknowledges msg by verdict; ev is its event when it decoded.
func (w worker) settle(msg jetstream.Msg, ev *inbox.Event, verdict inbox.Verdict, reason string) {
	delivered := 1
	if meta, err := msg.Metadata(); err == nil {
		delivered = int(meta.NumDelivered)
	}
	log := w.cfg.Logger.With("consumer", w.consumer, "subject", msg.Subject(), "delivered", delivered)
	if ev != nil {
		log = log.With("event_id", ev.ID, "event_type", ev.EventType)
	}
	var err error
	switch verdict {
	case inbox.Ack:
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		err = msg.DoubleAck(ctx)
		cancel()
		if err != nil {
			log.Warn("nats: the acknowledgement failed; the message will come back and be answered as a duplicate", "error", err)
		}
		return
	case inbox.Discard:
		log.Error("nats: message terminated: it can never be processed", "reason", reason)
		err = msg.Term()
	default:
		delay := inbox.RedeliveryDelay(delivered, w.cfg.RedeliveryMin, w.cfg.RedeliveryMax)
		log.Warn("nats: message to be delivered again", "in", delay, "reason", reason)
		err = msg.NakWithDelay(delay)
	}
	if err != nil {
		log.Warn("nats: settling the message failed; it will come back after the consumer's AckWait", "error", err)
	}
}
