package bench

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/amqpconn"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
)

// amqpRatioGoal is the goal of the amqp scenario: `postbox relay --sink
// amqp://...` drains at least this share of the lower of its two limits.
const amqpRatioGoal = 0.5

// amqpClientWindow is how many publishes the client baseline keeps
// awaiting their confirm, as a tuned publisher would.
const amqpClientWindow = 1024

// runAMQP measures, side by side, on one exchange and durable quorum queue
// of the RabbitMQ server at Config.AMQPURL:
//
//   - the sink: a backlog drained by a `postbox relay --sink amqp://...`
//     child process with its defaults, counted in the queue;
//   - its first limit: amqp091-go publishing the same messages (body,
//     headers, persistent, mandatory) directly, with publisher confirms;
//   - its second limit: the same backlog drained by the relay library to a
//     no-op sink.
//
// It reports the three rates and sink / min(client, no-op). The queue is
// purged between the runs, and it and the exchange are deleted at the end.
func runAMQP(ctx context.Context, e *env, p *progress) error {
	n := e.cfg.BrokerEvents
	b, err := openAMQPBench(ctx, e.cfg.AMQPURL, e.rep.Run)
	if err != nil {
		return err
	}
	defer b.close()
	p.printf("exchange %s and quorum queue %s on %s", b.exchange, b.queue, amqpconn.Redact(e.cfg.AMQPURL))

	sc, err := e.filled(ctx, p, "amqp_noop", n)
	if err != nil {
		return err
	}
	sk := &noopSink{}
	d, err := libraryDrain(ctx, p, "the relay library to a no-op sink", sc.outbox(), relay.Config{Sink: sk}, sk.n.Load, n)
	if err != nil {
		return err
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	noop := rate(n, d)
	p.printf("the relay library drained %d events to a no-op sink in %s: %.0f events/s", n, d.Round(time.Millisecond), noop)

	// The client runs right before the relay's drain, its backlog filled
	// already, so that the two see the server in the same state.
	if sc, err = e.filled(ctx, p, "amqp", n); err != nil {
		return err
	}
	client, err := b.clientPublish(ctx, p, n)
	if err != nil {
		return err
	}
	if err := b.purge(); err != nil {
		return err
	}
	drain, err := b.relayDrain(ctx, e, p, sc, n)
	if err != nil {
		return err
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	relayRate := rate(n, drain.elapsed)
	p.printf("`postbox relay --sink amqp://...` delivered %d events in %s: %.0f events/s (%.0f/s from 10%% to 90%% published)",
		n, drain.elapsed.Round(time.Millisecond), relayRate, drain.steady)

	r := e.rep
	r.addNoRelay(ScenarioAMQP, "amqp.client", "amqp091-go publishing directly, confirms, window "+fmt.Sprint(amqpClientWindow), client, UnitEventsPerSec, nil)
	r.record(Measure{Key: "amqp.noop", Scenario: ScenarioAMQP, Relay: RelayInProcess, Name: "relay library, no-op sink, defaults", Value: noop, Unit: UnitEventsPerSec})
	r.record(Measure{Key: "amqp.postbox", Scenario: ScenarioAMQP, Relay: RelayProcess, Name: "`postbox relay --sink amqp://` into a quorum queue, defaults", Value: relayRate, Unit: UnitEventsPerSec})
	r.record(Measure{Key: "amqp.ratio", Scenario: ScenarioAMQP, Relay: RelayProcess, Name: "postbox relay / min(client, no-op)", Value: relayRate / min(client, noop), Unit: UnitRatio, Goal: atLeast(amqpRatioGoal)})
	return nil
}

// amqpBench is the RabbitMQ side of the amqp scenario.
type amqpBench struct {
	url      string
	conn     *amqp091.Connection
	exchange string
	queue    string

	// countMu guards the queue depth, refreshed at most every
	// countEvery, so that polling it does not load the server.
	countMu sync.Mutex
	count   int64
	countAt time.Time
}

const countEvery = 20 * time.Millisecond

// openAMQPBench connects and declares the scenario's exchange (topic) and
// durable quorum queue, bound to every routing key.
func openAMQPBench(ctx context.Context, rawURL, run string) (*amqpBench, error) {
	conn, err := amqpconn.Dial(ctx, rawURL, amqpconn.Options{Timeout: 10 * time.Second, Heartbeat: 10 * time.Second, Name: "postbox bench " + run})
	if err != nil {
		return nil, fmt.Errorf("amqp: connect to %s: %w", amqpconn.Redact(rawURL), err)
	}
	b := &amqpBench{url: rawURL, conn: conn, exchange: run + "_amqp", queue: run + "_amqp"}
	err = b.do(func(ch *amqp091.Channel) error {
		if err := ch.ExchangeDeclare(b.exchange, amqp091.ExchangeTopic, true, false, false, false, nil); err != nil {
			return err
		}
		if _, err := ch.QueueDeclare(b.queue, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
			return err
		}
		return ch.QueueBind(b.queue, "#", b.exchange, false, nil)
	})
	if err != nil {
		b.close()
		return nil, fmt.Errorf("amqp: declare exchange and queue %s: %w", b.queue, err)
	}
	return b, nil
}

// do runs fn on a channel of its own.
func (b *amqpBench) do(fn func(ch *amqp091.Channel) error) error {
	ch, err := b.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	return fn(ch)
}

// close deletes the queue and the exchange and disconnects.
func (b *amqpBench) close() {
	_ = b.do(func(ch *amqp091.Channel) error {
		_, err := ch.QueueDelete(b.queue, false, false, false)
		return err
	})
	_ = b.do(func(ch *amqp091.Channel) error { return ch.ExchangeDelete(b.exchange, false, false) })
	_ = b.conn.Close()
}

func (b *amqpBench) purge() error {
	err := b.do(func(ch *amqp091.Channel) error {
		_, err := ch.QueuePurge(b.queue, false)
		return err
	})
	if err != nil {
		return fmt.Errorf("amqp: purge %s: %w", b.queue, err)
	}
	b.countMu.Lock()
	b.count, b.countAt = 0, time.Time{}
	b.countMu.Unlock()
	return nil
}

// depth is the number of messages in the queue, at most countEvery old.
func (b *amqpBench) depth() int64 {
	b.countMu.Lock()
	defer b.countMu.Unlock()
	if time.Since(b.countAt) < countEvery {
		return b.count
	}
	_ = b.do(func(ch *amqp091.Channel) error {
		q, err := ch.QueueDeclarePassive(b.queue, true, false, false, false, nil)
		if err == nil {
			b.count = int64(q.Messages)
		}
		return err
	})
	b.countAt = time.Now()
	return b.count
}

// clientPublish publishes n messages of the backlog's shape with amqp091-go
// on one channel in confirm mode, keeping amqpClientWindow awaiting their
// confirm, and returns the confirmed rate.
func (b *amqpBench) clientPublish(ctx context.Context, p *progress, n int) (float64, error) {
	ch, err := b.conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return 0, err
	}
	// Messages are built before the clock starts, as the relay's come
	// ready from the database.
	msgs := make([]amqp091.Publishing, n)
	for i := range msgs {
		m := &sink.Message{Event: orderEvent(int64(i + 1)), Attempt: 1}
		headers := amqp091.Table{}
		sink.BrokerHeaders(m, func(name, value string) { headers[name] = value })
		msgs[i] = amqp091.Publishing{
			Headers: headers, ContentType: postbox.ContentTypeJSON, DeliveryMode: amqp091.Persistent,
			MessageId: m.ID.String(), Type: m.EventType, Timestamp: time.Now(), Body: m.Payload,
		}
	}
	window := make([]*amqp091.DeferredConfirmation, 0, amqpClientWindow)
	wait := func(dc *amqp091.DeferredConfirmation) error {
		ok, err := dc.WaitContext(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("message %d nacked", dc.DeliveryTag)
		}
		return err
	}
	start := time.Now()
	var th throttle
	for i, msg := range msgs {
		if len(window) == amqpClientWindow {
			if err := wait(window[0]); err != nil {
				return 0, fmt.Errorf("amqp client: %w", err)
			}
			window = window[1:]
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, b.exchange, msg.Type, true, false, msg)
		if err != nil {
			return 0, fmt.Errorf("amqp client: publish: %w", err)
		}
		window = append(window, dc)
		if th.due() {
			p.printf("  amqp091-go: %d/%d published", i+1, n)
		}
	}
	for _, dc := range window {
		if err := wait(dc); err != nil {
			return 0, fmt.Errorf("amqp client: %w", err)
		}
	}
	d := time.Since(start)
	v := rate(n, d)
	p.printf("amqp091-go published %d messages with confirms in %s: %.0f/s", n, d.Round(time.Millisecond), v)
	return v, nil
}

// relayDrain drains sc's backlog of n events with a `postbox relay --sink
// amqp://...` child process with its defaults; the count of published
// events is the queue's depth.
func (b *amqpBench) relayDrain(ctx context.Context, e *env, p *progress, sc scratch, n int) (_ drained, err error) {
	sinkURL, err := url.Parse(b.url)
	if err != nil {
		return drained{}, err
	}
	sinkURL.RawQuery = url.Values{"exchange": {b.exchange}, "routing_key": {sink.PlaceholderEventType}}.Encode()
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() { err = relayExit(parent, ctx, err) }()
	start := time.Now()
	args := append(sc.relayFlags(), "--sink", sinkURL.String(), "--log-level", "warn")
	rp, err := e.startRelayProcess(ctx, p, args, cancel)
	if err != nil {
		return drained{}, err
	}
	defer func() { _, _ = rp.stop() }()
	d, err := waitDrained(ctx, p, "`postbox relay --sink amqp://...`", sc.outbox(), b.depth, n, start)
	if err != nil {
		return drained{}, err
	}
	if _, err := rp.stop(); err != nil {
		return drained{}, err
	}
	return d, nil
}
