package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	sinknats "github.com/postbox-go/postbox/sink/nats"
)

// natsRatioGoal is the goal of the nats scenario: the drain through the
// NATS sink, at least half the lower of its two limits.
const natsRatioGoal = 0.5

// natsTimeout bounds each JetStream API call of the scenario.
const natsTimeout = 10 * time.Second

// runNATS drains a backlog of Config.BrokerEvents through `postbox relay
// --sink nats://...` (a child process with its defaults) into a JetStream
// stream of its own, and measures its two limits in the same run: nats.go
// publishing the same messages (same subject, headers, payload size and
// Nats-Msg-Id) with asynchronous publishes and the sink's window, waiting
// for every PubAck; and the relay library draining an identical backlog to
// a no-op sink. The streams are file-backed with one replica, and deleted
// at the end.
func runNATS(ctx context.Context, e *env, p *progress) error {
	n := e.cfg.BrokerEvents
	nc, err := natsgo.Connect(e.cfg.NATSURL, natsgo.Timeout(natsTimeout), natsgo.Name("postbox bench"))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s (is nats-server -js running? see --nats-url): %w", redactURL(e.cfg.NATSURL), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(sinknats.MaxPendingDefault))
	if err != nil {
		return err
	}

	clientRate, err := natsClientPublish(ctx, p, js, e.rep.Run+"_client", n)
	if err != nil {
		return err
	}
	p.printf("nats.go published %d messages, each PubAck awaited: %.0f messages/s", n, clientRate)

	sc, err := e.filled(ctx, p, "nats_noop", n)
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
	noopRate := rate(n, d)
	p.printf("the relay library drained %d events to a no-op sink: %.0f events/s", n, noopRate)

	relayRate, err := e.natsRelayDrain(ctx, p, js, e.rep.Run+"_relay", n)
	if err != nil {
		return err
	}
	p.printf("`postbox relay --sink nats://...` drained %d events: %.0f events/s", n, relayRate)

	r := e.rep
	r.record(Measure{Key: "nats.relay", Scenario: ScenarioNATS, Relay: RelayProcess,
		Name: "postbox relay --sink nats://, defaults, PubAck awaited", Value: relayRate, Unit: UnitEventsPerSec})
	r.record(Measure{Key: "nats.client", Scenario: ScenarioNATS,
		Name: "nats.go async publish, every PubAck awaited", Value: clientRate, Unit: UnitEventsPerSec})
	r.record(Measure{Key: "nats.noop", Scenario: ScenarioNATS, Relay: RelayInProcess,
		Name: "relay library, no-op sink, defaults", Value: noopRate, Unit: UnitEventsPerSec})
	r.record(Measure{Key: "nats.ratio", Scenario: ScenarioNATS, Relay: RelayProcess,
		Name: "relay to NATS / min(nats.go, no-op drain)", Value: relayRate / min(clientRate, noopRate), Unit: UnitRatio,
		Goal: atLeast(natsRatioGoal)})
	return nil
}

// natsStream creates a file-backed stream named after name, capturing
// "name.>", that cleanup deletes.
func natsStream(ctx context.Context, js jetstream.JetStream, name string) (st jetstream.Stream, cleanup func(), err error) {
	cctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	st, err = js.CreateStream(cctx, jetstream.StreamConfig{
		Name: strings.ToUpper(name), Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create stream %s: %w", strings.ToUpper(name), err)
	}
	return st, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), natsTimeout)
		defer cancel()
		_ = js.DeleteStream(dctx, strings.ToUpper(name))
	}, nil
}

// natsClientPublish publishes n messages as the NATS sink would publish a
// backlog of the bench (see pgFill) with nats.go alone, and returns the
// rate from the first publish to the last PubAck.
func natsClientPublish(ctx context.Context, p *progress, js jetstream.JetStream, name string, n int) (float64, error) {
	_, cleanup, err := natsStream(ctx, js, name)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	msgs := make([]*natsgo.Msg, n)
	for i := range msgs {
		m := &sink.Message{Event: postbox.Event{
			ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: fmt.Sprintf("order-%d", i+1), EventType: "order.created",
			Payload: fmt.Appendf(nil, `{"items": %d, "amount": %d, "channel": "web", "currency": "EUR", "order_id": %d, "customer_id": "customer-%d"}`,
				1+i%5, (i*7919)%100000, i+1, i%9973),
		}, Attempt: 1}
		msg := natsgo.NewMsg(name + "." + m.EventType)
		msg.Data = m.Payload
		sink.BrokerHeaders(m, msg.Header.Set)
		msg.Header.Set(jetstream.MsgIDHeader, m.ID.String())
		msgs[i] = msg
	}
	p.printf("nats.go: publishing %d messages", n)
	start := time.Now()
	futures := make([]jetstream.PubAckFuture, n)
	for i, msg := range msgs {
		if futures[i], err = js.PublishMsgAsync(msg); err != nil {
			return 0, fmt.Errorf("nats.go publish: %w", err)
		}
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return 0, fmt.Errorf("nats.go publish: %w", err)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return rate(n, time.Since(start)), nil
}

// natsRelayDrain drains a fresh backlog of n events with a `postbox relay
// --sink nats://...` child process into a stream named after name, and
// returns the rate until the outbox has nothing left.
func (e *env) natsRelayDrain(ctx context.Context, p *progress, js jetstream.JetStream, name string, n int) (_ float64, err error) {
	st, cleanup, err := natsStream(ctx, js, name)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	sc, err := e.filled(ctx, p, "nats_relay", n)
	if err != nil {
		return 0, err
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() { err = relayExit(parent, ctx, err) }()
	start := time.Now()
	args := append(sc.relayFlags(), "--sink", e.cfg.NATSURL+"?subject="+name+".{event_type}", "--log-level", "warn")
	rp, err := e.startRelayProcess(ctx, p, args, cancel)
	if err != nil {
		return 0, err
	}
	defer func() { _, _ = rp.stop() }()
	d, err := waitDrained(ctx, p, "`postbox relay --sink nats://...`", sc.outbox(), streamCount(ctx, st), n, start)
	if err != nil {
		return 0, err
	}
	if _, err := rp.stop(); err != nil {
		return 0, err
	}
	return rate(n, d.elapsed), e.release(ctx, sc)
}

// streamCount returns the number of messages st holds, asked of the server
// at most every 20 ms: the events published (the stream stores an id once).
func streamCount(ctx context.Context, st jetstream.Stream) func() int64 {
	var (
		mu    sync.Mutex
		asked time.Time
		count int64
	)
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(asked) < 20*time.Millisecond {
			return count
		}
		asked = time.Now()
		ictx, cancel := context.WithTimeout(ctx, natsTimeout)
		defer cancel()
		if info, err := st.Info(ictx); err == nil {
			count = int64(info.State.Msgs)
		}
		return count
	}
}

// redactURL hides a password in a NATS URL.
func redactURL(raw string) string {
	if i := strings.LastIndexByte(raw, '@'); i >= 0 {
		return "nats://…@" + raw[i+1:]
	}
	return raw
}
