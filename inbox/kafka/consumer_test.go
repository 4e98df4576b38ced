package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/inbox/kafka"
	"github.com/postbox-go/postbox/postboxtest/consumertest"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/sink"
	sinkkafka "github.com/postbox-go/postbox/sink/kafka"
)

func TestConformance(t *testing.T) {
	consumertest.Run(t, consumertest.Harness{
		New: func(t *testing.T) consumertest.Broker {
			_, brokers := kafkatest.NewCluster(t)
			kafkatest.CreateTopic(t, brokers, "orders", 4)
			s, err := sinkkafka.New(t.Context(), sinkkafka.Config{Brokers: brokers, Topic: "orders"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("orders"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			return consumertest.Broker{
				Publish: func(t *testing.T, m *sink.Message) {
					if err := s.Publish(t.Context(), m); err != nil {
						t.Fatalf("publish: %v", err)
					}
				},
				PublishRaw: func(t *testing.T, m consumertest.Raw) {
					rec := &kgo.Record{Value: m.Body}
					if m.Key != "" {
						rec.Key = []byte(m.Key)
					}
					for name, value := range m.Headers {
						rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: name, Value: []byte(value)})
					}
					if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
						t.Fatalf("publish: %v", err)
					}
				},
				Consume: func(ctx context.Context, cfg consumertest.Config) error {
					c, err := kafka.New(kafka.Config{
						Brokers: brokers, Group: "inbox", Topics: []string{"orders"},
						Process: cfg.Process, Concurrency: cfg.Concurrency,
						RedeliveryMin: cfg.RedeliveryMin, RedeliveryMax: cfg.RedeliveryMax,
						ShutdownTimeout: cfg.ShutdownTimeout, Logger: cfg.Logger,
					})
					if err != nil {
						return err
					}
					return c.Run(ctx)
				},
				Unsettled: func(t *testing.T) int { return lag(t, cl, "inbox", "orders") },
			}
		},
		Features: consumertest.Features{RetriesInPlace: true},
	})
}

// lag returns how many records of topic the group has not committed past.
func lag(t *testing.T, cl *kgo.Client, group, topic string) int {
	t.Helper()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ends.Each(func(end kadm.ListedOffset) {
		from := int64(0)
		if o, ok := committed.Lookup(end.Topic, end.Partition); ok {
			from = o.At
		}
		n += int(end.Offset - from)
	})
	return n
}

// publish sends n events of a few aggregates through the relay's Kafka sink
// and returns their ids.
func publish(t *testing.T, s *sinkkafka.Sink, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	var wg sync.WaitGroup
	for i := range ids {
		m := &sink.Message{Event: postbox.Event{
			ID: postbox.NewID(), EventType: "order.paid", AggregateType: "order",
			AggregateID: fmt.Sprint(i % 40), Payload: fmt.Appendf(nil, `{"n": %d}`, i),
		}, Attempt: 1}
		ids[i] = m.ID
		wg.Go(func() {
			if err := s.Publish(t.Context(), m); err != nil {
				t.Errorf("publish: %v", err)
			}
		})
	}
	wg.Wait()
	return ids
}

// A handler that fails 30% of the time, a second consumer joining the group
// and the first one leaving, while events keep coming: every event is
// applied exactly once.
func TestEveryEventOnceThroughFailuresAndRebalances(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "orders", 6)
	s, err := sinkkafka.New(t.Context(), sinkkafka.Config{Brokers: brokers, Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ledger := kafkatest.NewLedger(t, pgtest.Store(t))

	ids := publish(t, s, 300)
	first := ledger.StartConsumer(t, brokers, "shipping", "orders", 0.3)
	waitApplied(t, ledger, 100)
	second := ledger.StartConsumer(t, brokers, "shipping", "orders", 0.3) // joins: the partitions are shared anew
	// Events keep coming until the second consumer has a share of them: the
	// group's rebalance takes its time on a loaded machine.
	deadline := time.Now().Add(time.Minute)
	for second.Processed() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the second consumer applied nothing in a minute while both ran: the group did not rebalance")
		}
		ids = append(ids, publish(t, s, 50)...)
		time.Sleep(100 * time.Millisecond)
	}
	waitApplied(t, ledger, len(ids))
	first.Stop() // leaves: its partitions move to the second
	before := second.Processed()
	ids = append(ids, publish(t, s, 300)...)
	ledger.WaitExactlyOnce(t, ids, time.Minute)
	if after := second.Processed() - before; after < 300 {
		t.Fatalf("the second consumer applied %d of the 300 events published after the first left: its partitions did not move", after)
	}
}

func waitApplied(t *testing.T, l *kafkatest.Ledger, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(l.Applied(t)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %d events applied; %d are", n, len(l.Applied(t)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Records that Debezium's Outbox Event Router produced (the event id in
// the "id" header, also as a JSON string as its JSON header converter
// writes it; the aggregate id as the key; nothing else) are processed, and
// the group's offset ends past them.
func TestDebeziumRecords(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "outbox.event.order", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("outbox.event.order"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	plain, quoted := uuid.New(), uuid.New()
	records := []*kgo.Record{
		{Key: []byte("42"), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(plain.String())}}, Value: []byte(`{"order_id": 42}`)},
		{Key: []byte("43"), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(`"` + quoted.String() + `"`)}}, Value: []byte(`{"order_id": 43}`)},
	}
	if err := cl.ProduceSync(t.Context(), records...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	got := make(chan *inbox.Event, 10)
	c, err := kafka.New(kafka.Config{
		Brokers: brokers, Group: "g", Topics: []string{"outbox.event.order"},
		Process: func(_ context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			got <- ev
			return inbox.Processed, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for _, want := range []struct {
		id        uuid.UUID
		aggregate string
	}{{plain, "42"}, {quoted, "43"}} {
		select {
		case ev := <-got:
			if ev.ID != want.id || ev.AggregateID != want.aggregate || string(ev.Payload) != `{"order_id": `+want.aggregate+`}` {
				t.Errorf("processed %+v, want event %s of aggregate %s", ev, want.id, want.aggregate)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the Debezium record %s was never processed", want.id)
		}
	}
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(30 * time.Second)
	for {
		offsets, err := adm.FetchOffsets(t.Context(), "g")
		if o, ok := offsets.Lookup("outbox.event.order", 0); err == nil && ok && o.At == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's offset never reached 2: %v %v", offsets, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// New refuses a Config without what it reads, naming the field.
func TestNewRefusesIncompleteConfig(t *testing.T) {
	process := func(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil }
	for _, c := range []struct {
		cfg  kafka.Config
		want string
	}{
		{kafka.Config{Group: "g", Topics: []string{"t"}, Process: process}, "Config.Brokers"},
		{kafka.Config{Brokers: []string{"b:9092"}, Topics: []string{"t"}, Process: process}, "Config.Group"},
		{kafka.Config{Brokers: []string{"b:9092"}, Group: "g", Process: process}, "Config.Topics"},
	} {
		if _, err := kafka.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New without %s: %v", c.want, err)
		}
	}
}

// A consumer stopped while a record is in flight past its ShutdownTimeout
// commits the records before it, never that one: the next consumer of the
// group starts there.
func TestRecordInFlightIsNotCommitted(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "orders", 1)
	s, err := sinkkafka.New(t.Context(), sinkkafka.Config{Brokers: brokers, Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := publish(t, s, 1)
	ids = append(ids, publish(t, s, 1)...) // after the first: the partition's order
	ids = append(ids, publish(t, s, 1)...)

	inFlight := make(chan struct{})
	first, err := kafka.New(kafka.Config{Brokers: brokers, Group: "g", Topics: []string{"orders"}, ShutdownTimeout: 100 * time.Millisecond,
		Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			if ev.ID == ids[1] {
				close(inFlight)
				<-ctx.Done() // a long handler, cancelled past the stop's grace
				return 0, ctx.Err()
			}
			return inbox.Processed, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	select {
	case <-inFlight:
	case <-time.After(30 * time.Second):
		t.Fatal("the second record never reached the handler")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offsets, err := kadm.NewClient(cl).FetchOffsets(t.Context(), "g")
	if o, ok := offsets.Lookup("orders", 0); err != nil || !ok || o.At != 1 {
		t.Fatalf("committed offset %+v (%v), want 1: past the first record, not the one in flight", o, err)
	}

	got := make(chan uuid.UUID, 3)
	second, err := kafka.New(kafka.Config{Brokers: brokers, Group: "g", Topics: []string{"orders"},
		Process: func(_ context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			got <- ev.ID
			return inbox.Processed, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = second.Run(ctx) }()
	for _, want := range ids[1:] {
		select {
		case id := <-got:
			if id != want {
				t.Fatalf("the next consumer processed %v, want %v", id, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the next consumer never processed %v", want)
		}
	}
}
