package endpoint_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/sinktest"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/amqp"
	"github.com/postbox-go/postbox/sink/kafka"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// brokerKinds are the sinks other than webhooks that endpoints may be, as
// postbox relay offers them.
var brokerKinds = []sink.URLKind{nats.URL, amqp.URL, kafka.URL}

// payloadLimit is the largest payload of the conformance sinks.
const payloadLimit = 64 << 10

// openEndpointSink opens the sink of an endpoint at url as its lane does
// (endpoint.OpenSink), closed when the test ends.
func openEndpointSink(t *testing.T, cfg endpoint.SinkConfig, url string) sink.Sink {
	t.Helper()
	cfg.Kinds, cfg.Logger = brokerKinds, testlog.New(t)
	e := store.Endpoint{ID: uuid.New(), Name: "conformance", URL: url, Secret: secret, Concurrency: 8}
	s, err := endpoint.OpenSink(t.Context(), cfg, e, time.Now())
	if err != nil {
		t.Fatalf("OpenSink %s: %v", sink.Redact(url), err)
	}
	closer, ok := s.(interface{ Close() error })
	if !ok {
		t.Fatalf("the sink of %s is no io.Closer", sink.Redact(url))
	}
	t.Cleanup(func() {
		if err := closer.Close(); err != nil {
			t.Errorf("closing the sink: %v", err)
		}
	})
	return s
}

// Each kind of endpoint passes the sinks' suite with the sink its lane
// opens (endpoint.OpenSink), from the endpoint's URL alone, as postbox
// relay --sink takes it: a webhook (signed with the endpoint's secret,
// checked by a receiver of its own), a NATS subject, a RabbitMQ exchange
// and a Kafka topic.
func TestEndpointSinkConformance(t *testing.T) {
	t.Parallel()
	t.Run("webhook", func(t *testing.T) {
		sinktest.Run(t, sinktest.Harness{
			New: func(t *testing.T) sinktest.Destination {
				rc := receiver.New(t, secret, nil)
				s := openEndpointSink(t, endpoint.SinkConfig{Webhook: webhook.Config{MaxMessageBytes: payloadLimit}}, rc.URL+"/hook")
				return sinktest.Destination{Sink: s, Received: webhookReceived(rc), MaxPayload: payloadLimit}
			},
			Features: sinktest.Features{OrderedPerAggregate: true, CarriesHeaders: true},
			Refused: []sinktest.Header{
				{Name: "Authorization", Value: "Bearer forged"},
				{Name: "Cookie", Value: "session=forged"},
				{Name: "Transfer-Encoding", Value: "chunked"},
				{Name: "X-Injected", Value: "v\r\nX-Forged: 1"},
				{Name: "with space", Value: "v"},
			},
		})
	})
	t.Run("nats", func(t *testing.T) {
		sinktest.Run(t, sinktest.Harness{
			New: func(t *testing.T) sinktest.Destination {
				nc, js := natstest.Connect(t, natstest.URL())
				st, prefix := natstest.Stream(t, js, nil)
				s := openEndpointSink(t, endpoint.SinkConfig{}, natstest.URL()+"?subject="+prefix+".{event_type}")
				return sinktest.Destination{Sink: s, Received: natsReceived(t, st), MaxPayload: int(nc.MaxPayload())}
			},
			Features: sinktest.Features{Deduplicates: true, OrderedPerAggregate: true, CarriesHeaders: true},
			Refused: []sinktest.Header{
				{Name: "X-Injected", Value: "v\r\nX-Forged: 1"},
				{Name: "with:colon", Value: "v"},
				{Name: "with space", Value: "v"},
			},
		})
	})
	t.Run("amqp", func(t *testing.T) {
		sinktest.Run(t, sinktest.Harness{
			New: func(t *testing.T) sinktest.Destination {
				srv := amqptest.Connect(t)
				exchange := srv.Exchange()
				received := amqpReceived(t, srv.Queue(exchange, "#", nil))
				s := openEndpointSink(t, endpoint.SinkConfig{}, amqptest.URL()+"?exchange="+exchange+"&max_message_bytes="+strconv.Itoa(payloadLimit))
				return sinktest.Destination{Sink: s, Received: received, MaxPayload: payloadLimit}
			},
			Features: sinktest.Features{OrderedPerAggregate: true, CarriesHeaders: true},
			Refused: []sinktest.Header{
				{Name: strings.Repeat("n", 256), Value: "v"},
				{Name: "BCC", Value: "elsewhere"},
				{Name: "cc", Value: "elsewhere"},
			},
		})
	})
	t.Run("kafka", func(t *testing.T) {
		_, brokers := kafkatest.NewCluster(t)
		sinktest.Run(t, sinktest.Harness{
			New: func(t *testing.T) sinktest.Destination {
				topic := newTopic(t, brokers)
				r := kafkatest.NewReader(t, brokers, topic)
				s := openEndpointSink(t, endpoint.SinkConfig{}, kafkatest.URL(brokers, "topic="+topic+"&max_message_bytes="+strconv.Itoa(payloadLimit)))
				return sinktest.Destination{Sink: s, Received: kafkaReceived(r), MaxPayload: payloadLimit}
			},
			Features: sinktest.Features{OrderedPerAggregate: true, CarriesHeaders: true},
			Refused: []sinktest.Header{
				{Name: "X-Not-UTF-8-\xff", Value: "v"},
				{Name: "X-Big", Value: strings.Repeat("v", 100<<10)},
			},
		})
	})
}

// webhookReceived is what rc accepted, as the suite reads it.
func webhookReceived(rc *receiver.Receiver) func() []sinktest.Delivery {
	return func() []sinktest.Delivery {
		var ds []sinktest.Delivery
		for _, d := range rc.Accepted() {
			headers := map[string]string{}
			for name := range d.Header {
				headers[name] = d.Header.Get(name)
			}
			id, _ := uuid.Parse(d.ID)
			ds = append(ds, sinktest.Delivery{ID: id, EventType: d.EventType, AggregateID: d.AggregateID, Payload: d.Body, Headers: headers})
		}
		return ds
	}
}

// natsReceived consumes st with an ordered consumer until the test ends
// and returns what it has read so far, in the stream's order.
func natsReceived(t *testing.T, st jetstream.Stream) func() []sinktest.Delivery {
	cons, err := st.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got []sinktest.Delivery
	)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		h := m.Headers()
		headers := map[string]string{}
		for name := range h {
			headers[name] = h.Get(name)
		}
		id, _ := uuid.Parse(h.Get(postbox.HeaderEventID))
		mu.Lock()
		defer mu.Unlock()
		got = append(got, sinktest.Delivery{ID: id, EventType: h.Get(postbox.HeaderEventType), AggregateID: h.Get(postbox.HeaderAggregateID),
			Payload: slices.Clone(m.Data()), Headers: maps.Clone(headers)})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return func() []sinktest.Delivery {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// amqpReceived consumes queue until the test ends and returns what it has
// read so far, in arrival order.
func amqpReceived(t *testing.T, queue string) func() []sinktest.Delivery {
	var (
		mu  sync.Mutex
		got []sinktest.Delivery
	)
	consumeQueue(t, queue, func(d amqp091.Delivery) {
		headers := map[string]string{}
		for name, v := range d.Headers {
			headers[name] = fmt.Sprint(v)
		}
		id, _ := uuid.Parse(d.MessageId)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, sinktest.Delivery{ID: id, EventType: d.Type, AggregateID: headers[postbox.HeaderAggregateID], Payload: d.Body, Headers: headers})
	})
	return func() []sinktest.Delivery {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// consumeQueue hands each message of queue to got, until the test ends.
func consumeQueue(t *testing.T, queue string, got func(amqp091.Delivery)) {
	t.Helper()
	conn, err := amqp091.Dial(amqptest.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for d := range deliveries {
			got(d)
		}
	}()
}

// kafkaReceived is what r read, as the suite reads it.
func kafkaReceived(r *kafkatest.Reader) func() []sinktest.Delivery {
	return func() []sinktest.Delivery {
		var ds []sinktest.Delivery
		for _, rec := range r.Records() {
			headers := map[string]string{}
			for _, h := range rec.Headers {
				headers[h.Key] = string(h.Value)
			}
			id, _ := uuid.Parse(headers[postbox.HeaderEventID])
			ds = append(ds, sinktest.Delivery{ID: id, EventType: headers[postbox.HeaderEventType], AggregateID: string(rec.Key),
				Payload: rec.Value, Headers: headers})
		}
		return ds
	}
}

// topicSeq names the tests' Kafka topics.
var topicSeq atomic.Int64

// newTopic creates a topic of 3 partitions in the cluster of brokers.
func newTopic(t *testing.T, brokers []string) string {
	t.Helper()
	topic := fmt.Sprintf("endpoint-%d", topicSeq.Add(1))
	kafkatest.CreateTopic(t, brokers, topic, 3)
	return topic
}
