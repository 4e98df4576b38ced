package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	inboxamqp "github.com/postbox-go/postbox/inbox/amqp"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/sink"
	sinkamqp "github.com/postbox-go/postbox/sink/amqp"
)

// consuming runs Consume until the test ends and returns its result
// channel.
func consuming(t *testing.T, queue string, cfg inboxamqp.Config) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inboxamqp.Consume(ctx, amqptest.URL(), queue, cfg) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = errors.New("Consume did not return within 30s of its context's end")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
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

func newSink(t *testing.T, exchange string) *sinkamqp.Sink {
	t.Helper()
	k, err := sinkamqp.New(t.Context(), sinkamqp.Config{URL: amqptest.URL(), Exchange: exchange})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// Every event applied exactly once through a quorum queue, with a handler
// that fails 30% of the time and the consumer's connection cut by the
// server midway.
func TestConsumeAppliesEachEventOnce(t *testing.T) {
	b := amqptest.NewApplied(t)
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "#", nil)
	k := newSink(t, exchange)
	const n = 300
	ids := publishAll(t, k, n/2)

	logger, logs := amqptest.NewLogs()
	var calls, failures atomic.Int64
	name := amqptest.Name("pbtest_consumer")
	processor := b.Inbox.Processor(func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
		calls.Add(1)
		if err := b.Apply(ctx, tx, ev); err != nil {
			return err
		}
		if rand.Float64() < 0.3 {
			failures.Add(1)
			return errors.New("the handler failed (30% of the time)")
		}
		return nil
	})
	stop := consuming(t, queue, inboxamqp.Config{
		Process: processor, ConnectionName: name, Logger: logger,
		RedeliveryMin: 5 * time.Millisecond, RedeliveryMax: 50 * time.Millisecond, ReconnectMin: 50 * time.Millisecond,
	})
	waitUntil(t, "a third of the events applied", func() bool { return len(b.Counts(t)) >= n/6 })
	if got := amqptest.CloseConnections(t, name, "test cut"); got != 1 {
		t.Fatalf("closed %d connections named %s, want 1", got, name)
	}
	ids = append(ids, publishAll(t, k, n/2)...)
	waitUntil(t, "every event applied", func() bool { return len(b.Counts(t)) == n })
	waitUntil(t, "the queue empty", func() bool { return srv.Count(queue) == 0 })
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	counts := b.Counts(t)
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("event %s applied %d times, want once", id, counts[id])
		}
	}
	if failures.Load() == 0 || !strings.Contains(logs.String(), "test cut") || !strings.Contains(logs.String(), "reconnected") {
		t.Errorf("the faults did not happen: %d handler failures of %d calls; log:\n%.3000s", failures.Load(), calls.Load(), logs.String())
	}
}

// A message that is not a postbox event is rejected into the queue's
// dead-letter exchange, with a logged reason, and the next one is applied.
func TestConsumeDiscardsToDeadLetter(t *testing.T) {
	b := amqptest.NewApplied(t)
	srv := amqptest.Connect(t)
	exchange, deadLetters := srv.Exchange(), srv.Exchange()
	dlq := srv.Queue(deadLetters, "#", nil)
	queue := srv.Queue(exchange, "#", amqp091.Table{"x-dead-letter-exchange": deadLetters})
	srv.Do("publish a foreign message", func(ch *amqp091.Channel) error {
		return ch.PublishWithContext(t.Context(), exchange, "foreign", false, false, amqp091.Publishing{Body: []byte(`{"hello": 1}`)})
	})
	ids := publishAll(t, newSink(t, exchange), 1)
	logger, logs := amqptest.NewLogs()
	consuming(t, queue, inboxamqp.Config{Process: b.Inbox.Processor(b.Apply), Logger: logger})
	waitUntil(t, "the event applied", func() bool { return b.Counts(t)[ids[0]] == 1 })
	waitUntil(t, "the foreign message dead-lettered", func() bool { return srv.Count(dlq) == 1 })
	if !strings.Contains(logs.String(), "discarding") || !strings.Contains(logs.String(), "no event id") {
		t.Errorf("the discard is not logged with its reason:\n%s", logs.String())
	}
}

// A failed message comes back with its delivery count (a quorum queue's
// x-delivery-count), which paces its delay.
func TestConsumeCountsDeliveries(t *testing.T) {
	b := amqptest.NewApplied(t)
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "#", nil)
	ids := publishAll(t, newSink(t, exchange), 1)
	logger, logs := amqptest.NewLogs()
	var calls atomic.Int32
	consuming(t, queue, inboxamqp.Config{
		Process: b.Inbox.Processor(func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
			if calls.Add(1) <= 2 {
				return errors.New("not yet")
			}
			return b.Apply(ctx, tx, ev)
		}),
		RedeliveryMin: time.Millisecond, Logger: logger,
	})
	waitUntil(t, "the event applied", func() bool { return b.Counts(t)[ids[0]] == 1 })
	for _, want := range []string{"delivery=1", "delivery=2"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logs.String())
		}
	}
}

// Stopping the consumer lets the message in flight finish: it is applied
// and acknowledged, not requeued.
func TestConsumeFinishesInFlightOnStop(t *testing.T) {
	b := amqptest.NewApplied(t)
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "#", nil)
	ids := publishAll(t, newSink(t, exchange), 1)
	started, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- inboxamqp.Consume(ctx, amqptest.URL(), queue, inboxamqp.Config{
			Process: b.Inbox.Processor(func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
				close(started)
				<-release
				return b.Apply(ctx, tx, ev)
			}),
		})
	}()
	<-started
	cancel()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if n := b.Counts(t)[ids[0]]; n != 1 {
		t.Fatalf("the event in flight at the stop was applied %d times, want once", n)
	}
	if n := srv.Count(queue); n != 0 {
		t.Fatalf("the queue holds %d messages after the stop, want 0 (the message in flight acknowledged)", n)
	}
}

func TestConsumeMissingQueue(t *testing.T) {
	amqptest.Connect(t)
	name := amqptest.Name("pbtest_missing")
	err := inboxamqp.Consume(t.Context(), amqptest.URL(), name, inboxamqp.Config{
		Process: func(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil },
	})
	if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Consume of a missing queue: %v, want an error naming it", err)
	}
	if strings.Contains(err.Error(), "guest:guest") {
		t.Errorf("the error shows the password: %v", err)
	}
}

func TestConsumeConfig(t *testing.T) {
	for name, cfg := range map[string]inboxamqp.Config{
		"no Process": {},
		"negative":   {Process: func(context.Context, *inbox.Event) (inbox.Outcome, error) { return 0, nil }, Concurrency: -1},
		"prefetch":   {Process: func(context.Context, *inbox.Event) (inbox.Outcome, error) { return 0, nil }, Concurrency: 10, Prefetch: 5},
	} {
		if err := inboxamqp.Consume(t.Context(), "amqp://127.0.0.1:1/", "q", cfg); err == nil || !strings.Contains(err.Error(), "Config.") {
			t.Errorf("%s: %v, want an error naming the field", name, err)
		}
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
