package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	inboxamqp "github.com/postbox-go/postbox/inbox/amqp"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/consumertest"
	"github.com/postbox-go/postbox/sink"
	sinkamqp "github.com/postbox-go/postbox/sink/amqp"
)

func TestConformance(t *testing.T) {
	consumertest.Run(t, consumertest.Harness{New: func(t *testing.T) consumertest.Broker {
		srv := amqptest.Connect(t)
		exchange := srv.Exchange()
		queue := srv.Queue(exchange, "#", nil)
		k := newSink(t, exchange)
		return consumertest.Broker{
			Publish: func(t *testing.T, m *sink.Message) {
				if err := k.Publish(t.Context(), m); err != nil {
					t.Fatalf("publish: %v", err)
				}
			},
			PublishRaw: func(t *testing.T, m consumertest.Raw) { publishRaw(t, srv, exchange, m) },
			Consume: func(ctx context.Context, cfg consumertest.Config) error {
				c, err := inboxamqp.New(inboxamqp.Config{
					URL: amqptest.URL(), Queue: queue,
					Process: cfg.Process, Concurrency: cfg.Concurrency,
					RedeliveryMin: cfg.RedeliveryMin, RedeliveryMax: cfg.RedeliveryMax,
					ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger,
				})
				if err != nil {
					return err
				}
				return c.Run(ctx)
			},
			// Once the consumer's connection is closed, the messages it
			// did not acknowledge are ready again.
			Unsettled: func(*testing.T) int { return srv.Count(queue) },
		}
	}})
}

// publishRaw publishes m to exchange with its headers only (no message
// id), and waits for the server's confirm.
func publishRaw(t *testing.T, srv *amqptest.Server, exchange string, m consumertest.Raw) {
	t.Helper()
	headers := amqp091.Table{}
	for name, value := range m.Headers {
		headers[name] = value
	}
	srv.Do("publish a raw message", func(ch *amqp091.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(t.Context(), exchange, "raw", true, false,
			amqp091.Publishing{Headers: headers, Body: m.Body, DeliveryMode: amqp091.Persistent})
		if err != nil {
			return err
		}
		if ok, err := dc.WaitContext(t.Context()); err != nil || !ok {
			return fmt.Errorf("not confirmed: %v", err)
		}
		return nil
	})
}

func newSink(t *testing.T, exchange string) *sinkamqp.Sink {
	t.Helper()
	k, err := sinkamqp.New(t.Context(), sinkamqp.Config{URL: amqptest.URL(), Exchange: exchange})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func publishAll(t *testing.T, k *sinkamqp.Sink, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	var wg sync.WaitGroup
	for i := range n {
		m := &sink.Message{Event: postbox.Event{
			ID: postbox.NewID(), EventType: "order.created", AggregateType: "order", AggregateID: fmt.Sprint(i),
			Payload: fmt.Appendf(nil, `{"n": %d}`, i),
		}, Attempt: 1}
		ids[i] = m.ID
		wg.Go(func() {
			if err := k.Publish(t.Context(), m); err != nil {
				t.Errorf("publish: %v", err)
			}
		})
	}
	wg.Wait()
	return ids
}

// running runs c until the test ends, and returns a function that stops it
// and returns Run's error.
func running(t *testing.T, c *inboxamqp.Consumer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = errors.New("Run did not return within 30s of its context's end")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// The server cuts the consumer's connection midway: it reconnects by
// itself, and every event is applied exactly once.
func TestReconnectsAfterTheConnectionIsCut(t *testing.T) {
	b := amqptest.NewApplied(t)
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "#", nil)
	k := newSink(t, exchange)
	const n = 200
	ids := publishAll(t, k, n/2)

	logger, logs := amqptest.NewLogs()
	name := amqptest.Name("pbtest_consumer")
	c, err := inboxamqp.New(inboxamqp.Config{
		URL: amqptest.URL(), Queue: queue, Process: b.Inbox.Processor(b.Apply),
		ConnectionName: name, Logger: logger, ReconnectMin: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, c)
	waitUntil(t, "a third of the events applied", func() bool { return len(b.Counts(t)) >= n/6 })
	if got := amqptest.CloseConnections(t, name, "test cut"); got != 1 {
		t.Fatalf("closed %d connections named %s, want 1", got, name)
	}
	ids = append(ids, publishAll(t, k, n/2)...)
	waitUntil(t, "every event applied", func() bool { return len(b.Counts(t)) == n })
	waitUntil(t, "the queue empty", func() bool { return srv.Count(queue) == 0 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	counts := b.Counts(t)
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("event %s applied %d times, want once", id, counts[id])
		}
	}
	if !strings.Contains(logs.String(), "test cut") || !strings.Contains(logs.String(), "reconnected") {
		t.Errorf("the cut is not logged, or the reconnection:\n%.3000s", logs.String())
	}
}

// A discarded message goes to the queue's dead-letter exchange, and the
// next one is applied.
func TestDiscardedMessageIsDeadLettered(t *testing.T) {
	b := amqptest.NewApplied(t)
	srv := amqptest.Connect(t)
	exchange, deadLetters := srv.Exchange(), srv.Exchange()
	dlq := srv.Queue(deadLetters, "#", nil)
	queue := srv.Queue(exchange, "#", amqp091.Table{"x-dead-letter-exchange": deadLetters})
	publishRaw(t, srv, exchange, consumertest.Raw{Body: []byte(`{"hello": 1}`)})
	ids := publishAll(t, newSink(t, exchange), 1)
	c, err := inboxamqp.New(inboxamqp.Config{URL: amqptest.URL(), Queue: queue, Process: b.Inbox.Processor(b.Apply)})
	if err != nil {
		t.Fatal(err)
	}
	running(t, c)
	waitUntil(t, "the event applied", func() bool { return b.Counts(t)[ids[0]] == 1 })
	waitUntil(t, "the foreign message dead-lettered", func() bool { return srv.Count(dlq) == 1 })
}

// Run fails at once, naming the queue and without the password, when the
// queue does not exist.
func TestRunFailsOnAMissingQueue(t *testing.T) {
	amqptest.Connect(t)
	name := amqptest.Name("pbtest_missing")
	c, err := inboxamqp.New(inboxamqp.Config{
		URL: amqptest.URL(), Queue: name,
		Process: func(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Run on a missing queue: %v, want an error naming it", err)
	}
	if strings.Contains(err.Error(), "guest:guest") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// New refuses the fields particular to RabbitMQ when they are wrong,
// naming them.
func TestNewRefusesBadConfig(t *testing.T) {
	process := func(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil }
	for _, c := range []struct {
		cfg  inboxamqp.Config
		want string
	}{
		{inboxamqp.Config{Queue: "q", Process: process}, "Config.URL"},
		{inboxamqp.Config{URL: "amqp://127.0.0.1:1/", Process: process}, "Config.Queue"},
		{inboxamqp.Config{URL: "amqp://127.0.0.1:1/", Queue: "q", Process: process, Heartbeat: -1}, "Config.Heartbeat"},
		{inboxamqp.Config{URL: "amqp://127.0.0.1:1/", Queue: "q", Process: process, Concurrency: 10, Prefetch: 5}, "Config.Prefetch"},
	} {
		if _, err := inboxamqp.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want an error naming %s", err, c.want)
		}
	}
}

// A Prefetch set alone, under the default Concurrency, is no error: the
// default Concurrency comes down to it.
func TestNewTakesAPrefetchUnderTheDefaultConcurrency(t *testing.T) {
	process := func(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil }
	if _, err := inboxamqp.New(inboxamqp.Config{URL: "amqp://127.0.0.1:1/", Queue: "q", Process: process, Prefetch: 8}); err != nil {
		t.Fatalf("New with Prefetch 8 and the default Concurrency: %v", err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 60s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
