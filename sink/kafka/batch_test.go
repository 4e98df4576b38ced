package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/postboxtest/sinktest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/kafka"
)

var _ sink.BatchSink = (*kafka.Sink)(nil)

// publishBatch publishes msgs in one PublishBatch, within 30s, and returns
// their errors.
func publishBatch(t *testing.T, s *kafka.Sink, msgs []*sink.Message) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	errs := make([]error, len(msgs))
	s.PublishBatch(ctx, msgs, errs)
	return errs
}

// A record too large for a batch fails alone, permanently, and is never
// produced; the others of its batch are delivered, each once.
func TestPublishBatchOversizeRecordFailsAlone(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "t", 3)
	r := kafkatest.NewReader(t, brokers, "t")
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "t", MaxMessageBytes: 64 << 10})
	msgs := make([]*sink.Message, 20)
	for i := range msgs {
		msgs[i] = message("order", strconv.Itoa(i%4), fmt.Appendf(nil, `{"n": %d}`, i))
	}
	const big = 7
	msgs[big].Payload = []byte(`"` + strings.Repeat("x", 100<<10) + `"`)
	errs := publishBatch(t, s, msgs)
	for i, err := range errs {
		kind, _, _ := sink.Classify(err)
		switch {
		case i == big && (kind != sink.Permanent || !strings.Contains(fmt.Sprint(err), msgs[big].ID.String())):
			t.Errorf("the oversize message: %v (%v), want permanent, naming the event", err, kind)
		case i != big && err != nil:
			t.Errorf("message %d: %v", i, err)
		}
	}
	waitRecords(t, r, len(msgs)-1)
	time.Sleep(200 * time.Millisecond) // a stray record would show by now
	seen := map[string]int{}
	for _, rec := range r.Records() {
		seen[kafkatest.Header(rec, "id")]++
	}
	for i, m := range msgs {
		if want := map[bool]int{true: 0, false: 1}[i == big]; seen[m.ID.String()] != want {
			t.Errorf("message %d produced %d times, want %d", i, seen[m.ID.String()], want)
		}
	}
}

// With every broker gone, each message of a batch fails as Unavailable,
// within the sink's timeout (and the check of whether a broker answers).
func TestPublishBatchBrokersGone(t *testing.T) {
	c, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "t", 3)
	const timeout = 2 * time.Second
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "t", Timeout: timeout})
	c.Close()
	msgs := make([]*sink.Message, 50)
	for i := range msgs {
		msgs[i] = message("order", strconv.Itoa(i), []byte(`{}`))
	}
	start := time.Now()
	errs := publishBatch(t, s, msgs)
	if took := time.Since(start); took > timeout+3*time.Second {
		t.Errorf("PublishBatch with the brokers gone took %s, want about the timeout, %s", took, timeout)
	}
	for i, err := range errs {
		var se *sink.Error
		if !errors.As(err, &se) || se.Kind != sink.Unavailable {
			t.Errorf("message %d with the brokers gone: %v, want unavailable", i, err)
		}
	}
}

// PublishBatch returns once its context ends, each message not
// acknowledged by then failing with the context's cause.
func TestPublishBatchHonoursTheContext(t *testing.T) {
	c, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "t", 3)
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "t", Timeout: time.Minute})
	c.Close()
	msgs := []*sink.Message{message("order", "1", []byte(`{}`)), message("order", "2", []byte(`{}`))}
	cause := errors.New("the lease ended")
	ctx, cancel := context.WithCancelCause(t.Context())
	time.AfterFunc(300*time.Millisecond, func() { cancel(cause) })
	errs := make([]error, len(msgs))
	start := time.Now()
	s.PublishBatch(ctx, msgs, errs)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("PublishBatch took %s after its context ended", took)
	}
	for i, err := range errs {
		if !errors.Is(err, cause) {
			t.Errorf("message %d: %v, want the context's cause", i, err)
		}
	}
}

// The records of one aggregate keep the batch's order: the key is the
// aggregate id, so they share a partition, and the producer sends them in
// the order given.
func TestPublishBatchKeepsOrderPerAggregate(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "t", 3)
	r := kafkatest.NewReader(t, brokers, "t")
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "t"})
	const aggregates, batches, perBatch = 7, 4, 250
	for b := range batches {
		msgs := make([]*sink.Message, perBatch)
		for i := range msgs {
			n := b*perBatch + i
			msgs[i] = message("order", "a"+strconv.Itoa(n%aggregates), []byte(strconv.Itoa(n)))
		}
		for i, err := range publishBatch(t, s, msgs) {
			if err != nil {
				t.Fatalf("batch %d, message %d: %v", b, i, err)
			}
		}
	}
	waitRecords(t, r, batches*perBatch)
	last := map[string]int{}
	for _, rec := range r.Records() {
		n, err := strconv.Atoi(string(rec.Value))
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[string(rec.Key)]; ok && n <= prev {
			t.Fatalf("aggregate %s: record %d after %d", rec.Key, n, prev)
		}
		last[string(rec.Key)] = n
	}
	if len(last) != aggregates {
		t.Errorf("%d aggregates read, want %d", len(last), aggregates)
	}
}

// batchOfOne publishes every message through PublishBatch, so that the
// shared suite checks the records of a batch as it checks Publish's.
type batchOfOne struct{ *kafka.Sink }

func (b batchOfOne) Publish(ctx context.Context, m *sink.Message) error {
	errs := make([]error, 1)
	b.PublishBatch(ctx, []*sink.Message{m}, errs)
	return errs[0]
}

// The shared suite through PublishBatch: the same records, headers and
// refusals as Publish (TestConformance, whose harness this repeats).
func TestConformanceOfPublishBatch(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinktest.Destination {
			topic := newTopic(t, brokers, 3)
			r := kafkatest.NewReader(t, brokers, topic)
			const limit = 64 << 10
			return sinktest.Destination{
				MaxPayload: limit,
				Sink:       batchOfOne{newSink(t, kafka.Config{Brokers: brokers, Topic: topic, MaxMessageBytes: limit})},
				Received: func() []sinktest.Delivery {
					var ds []sinktest.Delivery
					for _, rec := range r.Records() {
						headers := map[string]string{}
						for _, h := range rec.Headers {
							headers[h.Key] = string(h.Value)
						}
						ds = append(ds, sinktest.Delivery{
							ID:          uuid.MustParse(headers[postbox.HeaderEventID]),
							EventType:   headers[postbox.HeaderEventType],
							AggregateID: string(rec.Key),
							Payload:     rec.Value,
							Headers:     headers,
						})
					}
					return ds
				},
			}
		},
		Features: sinktest.Features{Deduplicates: false, OrderedPerAggregate: true, CarriesHeaders: true},
		Refused: []sinktest.Header{
			{Name: "X-Not-UTF-8-\xff", Value: "v"},
			{Name: "X-Big", Value: strings.Repeat("v", 100<<10)},
		},
	})
}

// Through the relay, ordered (--ordered) and publishing in batches (the
// kafka:// default): every aggregate's records are in the order of its
// events, each event once. A run of an aggregate goes alone, one event
// after the other; batches hold one event of each of many aggregates.
func TestRelayOrderedInBatchesKeepsOrderPerAggregate(t *testing.T) {
	st := pgtest.Store(t)
	ctx := t.Context()
	if err := st.MigrateOrdered(ctx); err != nil {
		t.Fatal(err)
	}
	const n, aggregates = 3000, 40
	if _, err := st.Pool().Exec(ctx, fmt.Sprintf(`insert into %s (aggregate_type, aggregate_id, event_type, payload)
select 'order', 'agg-' || (g %% %d), 'order.updated', g::text::jsonb from generate_series(1, %d) g`, st.Table("outbox_events"), aggregates, n)); err != nil {
		t.Fatal(err)
	}
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "t", 6)
	r := kafkatest.NewReader(t, brokers, "t")
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "t"})
	relaytest.Start(t, relay.Config{Store: st.Driver(), Sink: s, Ordered: true, Concurrency: 1024, PublishBatch: kafka.URL.PublishBatch})
	waitRecords(t, r, n)
	last := map[string]int{}
	seen := map[string]bool{}
	for _, rec := range r.Records() {
		id := kafkatest.Header(rec, "id")
		if seen[id] {
			t.Fatalf("event %s produced twice", id)
		}
		seen[id] = true
		g, err := strconv.Atoi(string(rec.Value))
		if err != nil {
			t.Fatal(err)
		}
		if prev := last[string(rec.Key)]; g <= prev {
			t.Fatalf("aggregate %s: event %d after %d", rec.Key, g, prev)
		}
		last[string(rec.Key)] = g
	}
	if len(seen) != n || len(last) != aggregates {
		t.Fatalf("%d events of %d aggregates read, want %d of %d", len(seen), len(last), n, aggregates)
	}
}
