package nats_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	inboxnats "github.com/postbox-go/postbox/inbox/nats"
	"github.com/postbox-go/postbox/postboxtest/consumertest"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/sink"
	sinknats "github.com/postbox-go/postbox/sink/nats"
)

func TestConformance(t *testing.T) {
	consumertest.Run(t, consumertest.Harness{New: func(t *testing.T) consumertest.Broker {
		d := newDestination(t, 5*time.Second)
		return consumertest.Broker{
			Publish:    d.publish,
			PublishRaw: d.publishRaw,
			Consume: func(ctx context.Context, cfg consumertest.Config) error {
				c, err := inboxnats.New(inboxnats.Config{
					Consumer: d.cons, Process: cfg.Process, Concurrency: cfg.Concurrency,
					RedeliveryMin: cfg.RedeliveryMin, RedeliveryMax: cfg.RedeliveryMax,
					ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger,
				})
				if err != nil {
					return err
				}
				return c.Run(ctx)
			},
			Unsettled: func(t *testing.T) int {
				info, err := d.cons.Info(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return int(info.NumPending) + info.NumAckPending
			},
		}
	}})
}

// destination is a stream of the test's own, a durable consumer of it,
// and the NATS sink publishing to it.
type destination struct {
	js     jetstream.JetStream
	prefix string
	cons   jetstream.Consumer
	sink   *sinknats.Sink
}

func newDestination(t *testing.T, ackWait time.Duration) *destination {
	t.Helper()
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	cons, err := st.CreateConsumer(t.Context(), jetstream.ConsumerConfig{
		Durable: "inbox", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sinknats.ParseURL(natstest.URL() + "?subject=" + prefix + ".{event_type}")
	if err != nil {
		t.Fatal(err)
	}
	sk, err := sinknats.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sk.Close() })
	return &destination{js: js, prefix: prefix, cons: cons, sink: sk}
}

func (d *destination) publish(t *testing.T, m *sink.Message) {
	t.Helper()
	if err := d.sink.Publish(t.Context(), m); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// publishRaw publishes m with its headers only: no Nats-Msg-Id unless
// they have one, so the stream's de-duplication does not apply.
func (d *destination) publishRaw(t *testing.T, m consumertest.Raw) {
	t.Helper()
	msg := natsgo.NewMsg(d.prefix + ".raw")
	for name, value := range m.Headers {
		msg.Header.Set(name, value)
	}
	msg.Data = m.Body
	if _, err := d.js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// A handler that runs longer than the JetStream consumer's AckWait is kept
// alive: its message is not delivered a second time meanwhile.
func TestLongHandlerIsKeptAlive(t *testing.T) {
	d := newDestination(t, time.Second)
	d.publish(t, &sink.Message{Event: postbox.Event{ID: postbox.NewID(), EventType: "order.paid", Payload: []byte(`{}`)}, Attempt: 1})
	var calls atomic.Int32
	c, err := inboxnats.New(inboxnats.Config{Consumer: d.cons, Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
		calls.Add(1)
		time.Sleep(2500 * time.Millisecond)
		return inbox.Processed, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := d.cons.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.AckFloor.Consumer == 1 {
			if calls.Load() != 1 || info.Delivered.Consumer != 1 {
				t.Fatalf("Process called %d times, %d deliveries; want 1 and 1", calls.Load(), info.Delivered.Consumer)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the message was not acknowledged within 30s: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// New refuses a JetStream consumer that does not acknowledge explicitly,
// and none at all.
func TestNewRefusesConsumerWithoutExplicitAcks(t *testing.T) {
	d := newDestination(t, 5*time.Second)
	process := func(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil }
	if _, err := inboxnats.New(inboxnats.Config{Process: process}); err == nil || !strings.Contains(err.Error(), "Config.Consumer") {
		t.Errorf("New without a Consumer: %v", err)
	}
	st, err := d.js.Stream(t.Context(), d.cons.CachedInfo().Stream)
	if err != nil {
		t.Fatal(err)
	}
	none, err := st.CreateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: "noack", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	_, err = inboxnats.New(inboxnats.Config{Consumer: none, Process: process})
	if err == nil || !strings.Contains(err.Error(), "explicit") {
		t.Errorf("New with an AckNone consumer: %v, want refused", err)
	}
}
