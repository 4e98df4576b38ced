// Package amqp is the inbox's RabbitMQ consumer: it reads an AMQP queue
// that the relay's RabbitMQ sink (package sink/amqp) feeds, applies each
// event once through Config.Process (usually an Inbox's Processor, with
// the application's handler or a Router's Apply), and settles each
// message by the outcome (inbox.VerdictOf):
//
//	c, err := amqp.New(amqp.Config{URL: "amqps://shipping:…@mq/", Queue: "shipping", Process: ib.Processor(routes.Apply)})
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx ends
//
// Packages inbox/nats and inbox/kafka have the same shape, the same Config
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
// # What is particular to RabbitMQ
//
//   - Acknowledgements are per delivery tag, on the channel that received
//     the message: basic.ack, basic.nack with requeue once the redelivery's
//     delay has passed (the message waits in this process meanwhile,
//     counted in Config.Prefetch), and basic.reject without requeue for a
//     discarded message, which goes to the queue's dead-letter exchange if
//     it has one.
//   - The delivery count is a quorum queue's x-delivery-count header (other
//     queues only say whether a message is redelivered); an x-delivery-limit
//     on the queue dead-letters a message after so many deliveries.
//   - Messages received but not started when Run stops, and those waiting
//     for their redelivery, are requeued at once.
//   - Run connects itself, from Config.URL: it returns an error at once
//     when the first connection fails or the queue does not exist, and
//     later reconnects after a lost connection, with backoff, for as long
//     as its context lasts.
//
// A quorum queue (x-queue-type quorum) is the queue to use: it is
// replicated, and it counts deliveries.
//
// # What it trusts
//
// A message is trusted because of who could publish it: RabbitMQ messages
// carry no signature, so the consumer relies on the broker's own
// authentication and authorization of publishers, for the payload as for
// the Postbox-* headers it routes and orders on (event type, aggregate,
// Postbox-Sequence) and the event id. Whoever may publish where the
// consumer reads can send any event, with any type or sequence number. So
// let only the relay publish there (a RabbitMQ user for the relay with
// write permission on the exchange, and none for others), and connect with
// TLS.
//
// A Postbox-Metadata-Signature header, if a message carries one, is not
// checked: the relay's broker sinks do not sign, and a signature of the
// headers alone would prove nothing while the body beside it is unsigned.
// Should a broker sink sign messages end to end one day, with the same
// signature.Signer as webhooks, the consumer should verify both the body
// (signature.Verifier.Verify) and the metadata (VerifyMetadata) and refuse
// messages without them, as the webhook handler does.
package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/inbox/internal/consume"
	"github.com/postbox-go/postbox/internal/amqpconn"
)

// Defaults of the Config fields left zero.
const (
	ConcurrencyDefault     = consume.ConcurrencyDefault
	ShutdownTimeoutDefault = consume.ShutdownTimeoutDefault
	PrefetchDefault        = 64
	DialTimeoutDefault     = 10 * time.Second
	HeartbeatDefault       = 10 * time.Second
	ReconnectMinDefault    = 100 * time.Millisecond
	ReconnectMaxDefault    = 10 * time.Second
)

// Config configures a Consumer. URL, Queue and Process are required; a
// zero field takes its default and a negative one is refused.
type Config struct {
	// URL is the server: amqp://USER:PASS@HOST:PORT/VHOST or amqps://...
	// (TLS). An empty VHOST is the default vhost "/". Required.
	URL string
	// Queue is the queue to read; it must exist. Required.
	Queue string

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
	// the event id and the reason, acknowledgements that failed, and the
	// connection's losses; never credentials or payloads. Default
	// slog.Default().
	Logger *slog.Logger

	// Prefetch is the most messages the server sends ahead of their
	// acknowledgement (basic.qos): those being processed, those waiting
	// for their redelivery delay, and those waiting for a free worker. It
	// is at least Concurrency. Default PrefetchDefault (64), or
	// Concurrency when it is more.
	Prefetch int
	// DialTimeout bounds connecting, TLS and the AMQP handshake; Heartbeat
	// is the AMQP heartbeat interval. Defaults DialTimeoutDefault,
	// HeartbeatDefault.
	DialTimeout, Heartbeat time.Duration
	// ReconnectMin and ReconnectMax bound the delay between attempts to
	// reconnect after the connection was lost. Defaults
	// ReconnectMinDefault, ReconnectMaxDefault.
	ReconnectMin, ReconnectMax time.Duration
	// ConnectionName is the connection's name on the server (the
	// connection_name client property). Default "postbox inbox on HOST pid
	// PID", this process.
	ConnectionName string
}

// Consumer applies the messages of a RabbitMQ queue through an inbox; see
// the package documentation.
type Consumer struct {
	cfg Config
	s   consume.Settings
}

// New checks cfg and returns its Consumer; Run connects.
func New(cfg Config) (*Consumer, error) {
	switch {
	case cfg.URL == "":
		return nil, errors.New("inbox/amqp: Config.URL is empty")
	case cfg.Queue == "":
		return nil, errors.New("inbox/amqp: Config.Queue is empty")
	}
	if cfg.Concurrency == 0 && cfg.Prefetch > 0 {
		// A Prefetch set alone bounds the default Concurrency: messages
		// beyond the prefetch would never arrive to be processed.
		cfg.Concurrency = min(ConcurrencyDefault, cfg.Prefetch)
	}
	s, err := consume.Settings{
		Process: cfg.Process, Concurrency: cfg.Concurrency,
		RedeliveryMin: cfg.RedeliveryMin, RedeliveryMax: cfg.RedeliveryMax,
		ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger,
	}.Check("inbox/amqp")
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]int64{
		"Prefetch":    int64(cfg.Prefetch),
		"DialTimeout": int64(cfg.DialTimeout), "Heartbeat": int64(cfg.Heartbeat),
		"ReconnectMin": int64(cfg.ReconnectMin), "ReconnectMax": int64(cfg.ReconnectMax),
	} {
		if v < 0 {
			return nil, fmt.Errorf("inbox/amqp: Config.%s is negative", name)
		}
	}
	orDefault(&cfg.Prefetch, max(PrefetchDefault, s.Concurrency))
	orDefault(&cfg.DialTimeout, DialTimeoutDefault)
	orDefault(&cfg.Heartbeat, HeartbeatDefault)
	orDefault(&cfg.ReconnectMin, ReconnectMinDefault)
	orDefault(&cfg.ReconnectMax, ReconnectMaxDefault)
	if cfg.Prefetch < s.Concurrency {
		return nil, fmt.Errorf("inbox/amqp: Config.Prefetch %d is under Concurrency %d", cfg.Prefetch, s.Concurrency)
	}
	if cfg.ConnectionName == "" {
		cfg.ConnectionName = amqpconn.ProcessName("postbox inbox")
	}
	return &Consumer{cfg: cfg, s: s}, nil
}

func orDefault[T int | time.Duration](field *T, def T) {
	if *field == 0 {
		*field = def
	}
}

// Run connects to Config.URL and processes the messages of Config.Queue
// until ctx ends, then lets those in progress finish and settles them (for
// at most Config.ShutdownTimeout), requeues those waiting for their
// redelivery, and returns nil.
//
// It returns an error at once when the first connection fails or the
// queue does not exist, so that a misconfiguration shows at start. Later,
// a lost connection or channel is logged and reopened, with backoff, for
// as long as ctx lasts.
func (c *Consumer) Run(ctx context.Context) error {
	processing, cancel := c.s.Processing(ctx)
	defer cancel()
	conn, ch, deliveries, err := c.open(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for {
		reason := c.serve(ctx, processing, ch, deliveries)
		amqpconn.Close(conn)
		if ctx.Err() != nil {
			return nil
		}
		c.s.Logger.Warn("inbox/amqp: the connection is lost; reconnecting", "queue", c.cfg.Queue, "error", reason)
		for attempt := 1; ; attempt++ {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(inbox.RedeliveryDelay(attempt, c.cfg.ReconnectMin, c.cfg.ReconnectMax)):
			}
			if conn, ch, deliveries, err = c.open(ctx); err == nil {
				break
			}
			c.s.Logger.Warn("inbox/amqp: reconnecting failed", "queue", c.cfg.Queue, "attempt", attempt, "error", err)
		}
		c.s.Logger.Info("inbox/amqp: reconnected", "queue", c.cfg.Queue)
	}
}

// open connects and starts consuming the queue.
func (c *Consumer) open(ctx context.Context) (*amqp091.Connection, *amqp091.Channel, <-chan amqp091.Delivery, error) {
	conn, err := amqpconn.Dial(ctx, c.cfg.URL, amqpconn.Options{Timeout: c.cfg.DialTimeout, Heartbeat: c.cfg.Heartbeat, Name: c.cfg.ConnectionName})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("inbox/amqp: connect to %s: %w", amqpconn.Redact(c.cfg.URL), err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Qos(c.cfg.Prefetch, 0, false)
	}
	var deliveries <-chan amqp091.Delivery
	if err == nil {
		deliveries, err = ch.Consume(c.cfg.Queue, "", false, false, false, false, nil)
	}
	if err != nil {
		amqpconn.Close(conn)
		var e *amqp091.Error
		if errors.As(err, &e) && e.Code == amqp091.NotFound {
			return nil, nil, nil, fmt.Errorf("inbox/amqp: queue %q does not exist on %s: declare it first", c.cfg.Queue, amqpconn.Redact(c.cfg.URL))
		}
		return nil, nil, nil, fmt.Errorf("inbox/amqp: consume queue %q on %s: %w", c.cfg.Queue, amqpconn.Redact(c.cfg.URL), err)
	}
	return conn, ch, deliveries, nil
}

// serve processes deliveries, each in processing, until ctx ends or the
// channel closes, then waits for the messages in flight and requeues
// those awaiting redelivery. It returns why the channel closed.
func (c *Consumer) serve(ctx, processing context.Context, ch *amqp091.Channel, deliveries <-chan amqp091.Delivery) error {
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	workers := make(chan struct{}, c.s.Concurrency)
	var inFlight sync.WaitGroup
	waiting := &redeliveries{held: map[uint64]heldMessage{}}
	defer func() {
		inFlight.Wait()
		waiting.stop()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d, ok := <-deliveries:
			if !ok {
				// The connection or channel closed (its reason is sent
				// before the deliveries end), or the server cancelled the
				// consumer, such as when the queue was deleted.
				select {
				case e := <-closed:
					if e != nil {
						return e
					}
				default:
				}
				return errors.New("the deliveries ended: the channel closed, or the server cancelled the consumer")
			}
			select {
			case workers <- struct{}{}:
			case <-ctx.Done():
				// Not started: the server requeues it with the channel.
				return ctx.Err()
			}
			inFlight.Go(func() {
				defer func() { <-workers }()
				c.handle(processing, d, waiting)
			})
		}
	}
}

// handle processes one message and settles it.
func (c *Consumer) handle(ctx context.Context, d amqp091.Delivery, waiting *redeliveries) {
	ev, err := inbox.EventFromBroker(headerOf(d.Headers), d.MessageId, d.Body)
	if err == nil {
		_, err = c.s.Process(ctx, ev)
	}
	where := []slog.Attr{slog.String("queue", c.cfg.Queue)}
	if ev == nil {
		where = append(where, slog.String("message_id", d.MessageId))
	}
	verdict, delay := c.s.Verdict(ev, err, deliveryCount(d), where...)
	switch verdict {
	case inbox.Ack:
		c.sent("ack", d.Ack(false), where)
	case inbox.Discard:
		c.sent("reject", d.Reject(false), where)
	default:
		waiting.after(delay, d, func(err error) { c.sent("requeue", err, where) })
	}
}

// sent logs a settlement that did not reach the server: the channel
// closed, and the server delivers the message again.
func (c *Consumer) sent(what string, err error, where []slog.Attr) {
	if err != nil {
		c.s.Unsent(what, err, where...)
	}
}

// redeliveries are the messages of a channel held for their redelivery
// delay, which are requeued (basic.nack with requeue) when it ends. They
// take no worker meanwhile.
type redeliveries struct {
	mu   sync.Mutex
	held map[uint64]heldMessage // by delivery tag; nil once stopped
}

type heldMessage struct {
	timer  *time.Timer
	d      amqp091.Delivery
	result func(error)
}

// after requeues d after delay, and reports how to result.
func (r *redeliveries) after(delay time.Duration, d amqp091.Delivery, result func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		result(d.Nack(false, true))
		return
	}
	r.held[d.DeliveryTag] = heldMessage{d: d, result: result, timer: time.AfterFunc(delay, func() {
		r.mu.Lock()
		_, ok := r.held[d.DeliveryTag]
		delete(r.held, d.DeliveryTag)
		r.mu.Unlock()
		if ok {
			result(d.Nack(false, true))
		}
	})}
}

// stop requeues every message still held, at once: the consumer is
// stopping, or its channel is gone (then the server has requeued them,
// and the nack only fails).
func (r *redeliveries) stop() {
	r.mu.Lock()
	held := r.held
	r.held = nil
	r.mu.Unlock()
	for _, h := range held {
		if h.timer.Stop() {
			h.result(h.d.Nack(false, true))
		}
	}
}

// deliveryCount is how many times the server has delivered d, from 1: a
// quorum queue counts the earlier deliveries in x-delivery-count; other
// queues only say whether it is a redelivery.
func deliveryCount(d amqp091.Delivery) int {
	switch n := d.Headers["x-delivery-count"].(type) {
	case int64:
		return int(n) + 1
	case int32:
		return int(n) + 1
	case int:
		return n + 1
	}
	if d.Redelivered {
		return 2
	}
	return 1
}

// headerOf returns the lookup of a message's headers table that
// inbox.EventFromBroker takes: a name as the sink writes it, else in any
// case; a value that is not a string is read as text.
func headerOf(t amqp091.Table) func(name string) string {
	return func(name string) string {
		v, ok := t[name]
		if !ok {
			for k, kv := range t {
				if strings.EqualFold(k, name) {
					v, ok = kv, true
					break
				}
			}
		}
		switch s := v.(type) {
		case nil:
			return ""
		case string:
			return s
		case []byte:
			return string(s)
		default:
			return fmt.Sprint(s)
		}
	}
}
