// Package amqp is the inbox's RabbitMQ consumer: Consume reads an AMQP
// queue that the relay's RabbitMQ sink (package sink/amqp) feeds, applies
// each event once through the application's Process function (usually an
// inbox.Inbox's Processor), and settles each message by the outcome:
//
//   - acknowledged only once Process has returned, that is once the inbox
//     transaction has committed (or the event is a duplicate);
//   - requeued after a delay that grows with the message's delivery count
//     (inbox.RedeliveryDelay) when processing failed, without holding up
//     the other messages;
//   - rejected without requeue, into the queue's dead-letter exchange if it
//     has one, with a logged reason, when the message can never be
//     processed (not a postbox event, a payload Process rejects).
//
// So the exactly-once effect holds through RabbitMQ as it does through
// webhooks. Consume survives a lost connection: it reconnects and resumes,
// and messages that were not acknowledged come back from the server, where
// the inbox absorbs those already applied.
//
// A quorum queue (x-queue-type quorum) is the queue to use: it is
// replicated, and its x-delivery-count header paces redeliveries. A message
// whose processing keeps failing is redelivered for as long as it fails,
// the delay capped at Config.RedeliveryMax; give the queue an
// x-delivery-limit and a dead-letter exchange to set it aside after so
// many deliveries instead.
//
// # What it trusts
//
// A message is trusted because of who could publish it: RabbitMQ messages
// carry no signature, so the consumer relies on the broker's own
// authentication and authorization of publishers, for the payload as for
// the Postbox-* headers it routes and orders on (event type, aggregate,
// Postbox-Sequence) and the event id. Whoever may publish where the
// consumer reads can send any event, with any type or sequence number. So
// let only the relay publish there (a RabbitMQ user for the relay with write permission on the exchange, and none for others), and connect with TLS.
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
	"github.com/postbox-go/postbox/internal/amqpconn"
)

// Defaults of the Config fields left zero.
const (
	ConcurrencyDefault  = 8
	PrefetchDefault     = 64
	DialTimeoutDefault  = 10 * time.Second
	HeartbeatDefault    = 10 * time.Second
	ReconnectMinDefault = 100 * time.Millisecond
	ReconnectMaxDefault = 10 * time.Second
	// ShutdownTimeoutDefault matches the relay's own.
	ShutdownTimeoutDefault = 10 * time.Second
)

// Config configures Consume. Process is required; a zero field takes its
// default and a negative one is refused.
type Config struct {
	// Process applies one event, usually an inbox.Inbox's Processor. Its
	// outcome and error decide how the message is settled
	// (inbox.VerdictOf). It may run for several messages at once.
	// Required.
	Process func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error)
	// Concurrency is the most messages processed at once. Default
	// ConcurrencyDefault.
	Concurrency int
	// Prefetch is the most messages the server sends ahead of their
	// acknowledgement (basic.qos): those being processed, those waiting
	// for their redelivery delay, and those waiting for a free worker. It
	// is at least Concurrency. Default PrefetchDefault.
	Prefetch int
	// RedeliveryMin and RedeliveryMax bound the delay before a message
	// whose processing failed is requeued (see inbox.RedeliveryDelay).
	// Defaults inbox.RedeliveryMinDefault and inbox.RedeliveryMaxDefault.
	RedeliveryMin, RedeliveryMax time.Duration
	// DialTimeout bounds connecting, TLS and the AMQP handshake; Heartbeat
	// is the AMQP heartbeat interval. Defaults DialTimeoutDefault,
	// HeartbeatDefault.
	DialTimeout, Heartbeat time.Duration
	// ReconnectMin and ReconnectMax bound the delay between attempts to
	// reconnect after the connection was lost. Defaults
	// ReconnectMinDefault, ReconnectMaxDefault.
	ReconnectMin, ReconnectMax time.Duration
	// ShutdownTimeout is how long the messages in flight may still be
	// processed once Consume's context has ended; then their Process
	// context is cancelled too (and they are requeued). Default
	// ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration
	// ConnectionName is the connection's name on the server (the
	// connection_name client property). Default "postbox inbox on HOST pid
	// PID", this process.
	ConnectionName string
	// Logger receives a line per discarded message and per failure that
	// requeues a message, with the event id and the reason, and the
	// connection's losses; never credentials or payloads. Default
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with its defaults, or an error naming the field
// that is wrong.
func (c Config) withDefaults() (Config, error) {
	if c.Process == nil {
		return c, errors.New("inbox/amqp: Config.Process is nil")
	}
	for name, v := range map[string]int64{
		"Concurrency": int64(c.Concurrency), "Prefetch": int64(c.Prefetch),
		"RedeliveryMin": int64(c.RedeliveryMin), "RedeliveryMax": int64(c.RedeliveryMax),
		"DialTimeout": int64(c.DialTimeout), "Heartbeat": int64(c.Heartbeat),
		"ReconnectMin": int64(c.ReconnectMin), "ReconnectMax": int64(c.ReconnectMax),
		"ShutdownTimeout": int64(c.ShutdownTimeout),
	} {
		if v < 0 {
			return c, fmt.Errorf("inbox/amqp: Config.%s is negative", name)
		}
	}
	orDefault(&c.Concurrency, ConcurrencyDefault)
	orDefault(&c.Prefetch, max(PrefetchDefault, c.Concurrency))
	orDefault(&c.RedeliveryMin, inbox.RedeliveryMinDefault)
	orDefault(&c.RedeliveryMax, inbox.RedeliveryMaxDefault)
	orDefault(&c.DialTimeout, DialTimeoutDefault)
	orDefault(&c.Heartbeat, HeartbeatDefault)
	orDefault(&c.ReconnectMin, ReconnectMinDefault)
	orDefault(&c.ReconnectMax, ReconnectMaxDefault)
	orDefault(&c.ShutdownTimeout, ShutdownTimeoutDefault)
	if c.Prefetch < c.Concurrency {
		return c, fmt.Errorf("inbox/amqp: Config.Prefetch %d is under Concurrency %d", c.Prefetch, c.Concurrency)
	}
	if c.ConnectionName == "" {
		c.ConnectionName = amqpconn.ProcessName("postbox inbox")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

func orDefault[T int | time.Duration](field *T, def T) {
	if *field == 0 {
		*field = def
	}
}

// Consume reads queue on the server at url (amqp://USER:PASS@HOST:PORT/VHOST
// or amqps://...) and processes its messages, as the package says, until
// ctx ends; it then stops taking messages, lets those in flight finish and
// settles them (for up to Config.ShutdownTimeout), requeues those waiting
// for a redelivery, and returns nil.
//
// It returns an error at once when the first connection fails, or the
// queue does not exist, so that a misconfiguration shows at start. Later,
// a lost connection or channel is logged and reopened, with backoff, for
// as long as ctx lasts.
func Consume(ctx context.Context, url, queue string, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	// Messages are processed in work, which outlives ctx by
	// ShutdownTimeout, so that those in flight at the end finish.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(cfg.ShutdownTimeout, cancelWork) })()
	c := &consumer{cfg: cfg, url: url, queue: queue, work: work}
	conn, ch, deliveries, err := c.open(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for {
		reason := c.serve(ctx, ch, deliveries)
		amqpconn.Close(conn)
		if ctx.Err() != nil {
			return nil
		}
		cfg.Logger.Warn("rabbitmq consumer lost its connection; reconnecting", "queue", queue, "error", reason)
		for attempt := 1; ; attempt++ {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(inbox.RedeliveryDelay(attempt, cfg.ReconnectMin, cfg.ReconnectMax)):
			}
			if conn, ch, deliveries, err = c.open(ctx); err == nil {
				break
			}
			cfg.Logger.Warn("rabbitmq consumer: reconnecting failed", "queue", queue, "attempt", attempt, "error", err)
		}
		cfg.Logger.Info("rabbitmq consumer reconnected", "queue", queue)
	}
}

// consumer is one Consume call.
type consumer struct {
	cfg   Config
	url   string
	queue string
	// work is the context of Process (see Consume).
	work context.Context
}

// open connects and starts consuming the queue.
func (c *consumer) open(ctx context.Context) (*amqp091.Connection, *amqp091.Channel, <-chan amqp091.Delivery, error) {
	conn, err := amqpconn.Dial(ctx, c.url, amqpconn.Options{Timeout: c.cfg.DialTimeout, Heartbeat: c.cfg.Heartbeat, Name: c.cfg.ConnectionName})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("inbox/amqp: connect to %s: %w", amqpconn.Redact(c.url), err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Qos(c.cfg.Prefetch, 0, false)
	}
	var deliveries <-chan amqp091.Delivery
	if err == nil {
		deliveries, err = ch.Consume(c.queue, "", false, false, false, false, nil)
	}
	if err != nil {
		amqpconn.Close(conn)
		var e *amqp091.Error
		if errors.As(err, &e) && e.Code == amqp091.NotFound {
			return nil, nil, nil, fmt.Errorf("inbox/amqp: queue %q does not exist on %s: declare it first", c.queue, amqpconn.Redact(c.url))
		}
		return nil, nil, nil, fmt.Errorf("inbox/amqp: consume queue %q on %s: %w", c.queue, amqpconn.Redact(c.url), err)
	}
	return conn, ch, deliveries, nil
}

// serve processes deliveries until ctx ends or the channel closes, then
// waits for the messages in flight and settles those awaiting redelivery.
// It returns why the channel closed.
func (c *consumer) serve(ctx context.Context, ch *amqp091.Channel, deliveries <-chan amqp091.Delivery) error {
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	workers := make(chan struct{}, c.cfg.Concurrency)
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
				c.handle(c.work, d, waiting)
			})
		}
	}
}

// handle processes one message and settles it.
func (c *consumer) handle(ctx context.Context, d amqp091.Delivery, waiting *redeliveries) {
	ev, err := inbox.EventFromBroker(headerOf(d.Headers), d.MessageId, d.Body)
	if err == nil {
		_, err = c.cfg.Process(ctx, ev)
	}
	id := d.MessageId
	if ev != nil {
		id = ev.ID.String()
	}
	switch inbox.VerdictOf(err) {
	case inbox.Ack:
		c.settled("ack", id, d.Ack(false))
	case inbox.Discard:
		c.cfg.Logger.Warn("rabbitmq consumer: discarding a message that can never be processed (to the queue's dead-letter exchange, if any)",
			"queue", c.queue, "event_id", id, "error", err)
		c.settled("reject", id, d.Reject(false))
	default:
		count := deliveryCount(d)
		delay := inbox.RedeliveryDelay(count, c.cfg.RedeliveryMin, c.cfg.RedeliveryMax)
		c.cfg.Logger.Warn("rabbitmq consumer: processing failed; the message is requeued after a delay",
			"queue", c.queue, "event_id", id, "delivery", count, "delay", delay.Round(time.Millisecond), "error", err)
		waiting.after(delay, d, func(err error) { c.settled("requeue", id, err) })
	}
}

// settled logs an acknowledgement that did not reach the server: the
// channel closed, and the server delivers the message again.
func (c *consumer) settled(what, id string, err error) {
	if err != nil {
		c.cfg.Logger.Info("rabbitmq consumer: "+what+" not sent; the server redelivers the message", "queue", c.queue, "event_id", id, "error", err)
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
