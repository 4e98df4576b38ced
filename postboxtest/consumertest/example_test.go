package consumertest_test

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	inboxnats "github.com/postbox-go/postbox/inbox/nats"
	"github.com/postbox-go/postbox/postboxtest/consumertest"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/sink"
	sinknats "github.com/postbox-go/postbox/sink/nats"
)

// A consumer's conformance test is one call of Run, with a harness that
// publishes through the matching sink, runs the consumer with the suite's
// settings, and counts what the broker would deliver again; this one
// would live in inbox/nats as TestConformance.
func ExampleRun() {
	testConformance := func(t *testing.T) {
		consumertest.Run(t, consumertest.Harness{New: func(t *testing.T) consumertest.Broker {
			_, js := natstest.Connect(t, natstest.URL())
			stream, prefix := natstest.Stream(t, js, nil)
			cons, err := stream.CreateConsumer(t.Context(), jetstream.ConsumerConfig{
				Durable: "inbox", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second,
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
			return consumertest.Broker{
				Publish: func(t *testing.T, m *sink.Message) {
					if err := sk.Publish(t.Context(), m); err != nil {
						t.Fatal(err)
					}
				},
				PublishRaw: func(t *testing.T, m consumertest.Raw) {
					msg := natsgo.NewMsg(prefix + ".raw")
					for name, value := range m.Headers {
						msg.Header.Set(name, value)
					}
					msg.Data = m.Body
					if _, err := js.PublishMsg(t.Context(), msg); err != nil {
						t.Fatal(err)
					}
				},
				Consume: func(ctx context.Context, c consumertest.Config) error {
					consumer, err := inboxnats.New(inboxnats.Config{
						Consumer: cons, Process: c.Process, Concurrency: c.Concurrency,
						RedeliveryMin: c.RedeliveryMin, RedeliveryMax: c.RedeliveryMax,
						ShutdownTimeout: c.ShutdownTimeout, Logger: c.Logger,
					})
					if err != nil {
						return err
					}
					return consumer.Run(ctx)
				},
				Unsettled: func(t *testing.T) int {
					info, err := cons.Info(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					return int(info.NumPending) + info.NumAckPending
				},
			}
		}})
	}
	_ = testConformance
}
