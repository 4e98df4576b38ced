package amqp_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/sinktest"
	"github.com/postbox-go/postbox/sink/amqp"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinktest.Destination {
			srv := amqptest.Connect(t)
			exchange := srv.Exchange()
			r := consume(t, srv.Queue(exchange, "#", nil))
			const limit = 64 << 10
			cfg := sinkConfig(t, exchange, "")
			cfg.MaxMessageBytes = limit
			k, err := amqp.New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Close() })
			return sinktest.Destination{Sink: k, Received: r.received, MaxPayload: limit}
		},
		Features: sinktest.Features{Deduplicates: false, OrderedPerAggregate: true, CarriesHeaders: true},
		Refused: []sinktest.Header{
			{Name: strings.Repeat("n", 256), Value: "v"},
			{Name: "X-Big", Value: strings.Repeat("v", 200<<10)},
			{Name: "BCC", Value: "elsewhere"},
			{Name: "cc", Value: "elsewhere"},
		},
	})
}

// newSink returns a sink publishing to exchange of the test server, closed
// when the test ends; an empty routingKey is the default.
func newSink(t *testing.T, exchange, routingKey string) *amqp.Sink {
	t.Helper()
	k, err := amqp.New(t.Context(), sinkConfig(t, exchange, routingKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func sinkConfig(t *testing.T, exchange, routingKey string) amqp.Config {
	t.Helper()
	q := "?exchange=" + exchange
	if routingKey != "" {
		q += "&routing_key=" + routingKey
	}
	cfg, err := amqp.ParseURL(amqptest.URL() + q)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// receiver keeps what a consumer of a queue received, as a partner's
// service would read it with amqp091-go.
type receiver struct {
	mu  sync.Mutex
	got []sinktest.Delivery
}

// consume reads queue until the test ends.
func consume(t *testing.T, queue string) *receiver {
	t.Helper()
	r := &receiver{}
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
			r.add(t, d)
		}
	}()
	return r
}

func (r *receiver) add(t *testing.T, d amqp091.Delivery) {
	id, err := uuid.Parse(d.MessageId)
	if err != nil {
		t.Errorf("message_id %q: %v", d.MessageId, err)
		return
	}
	if d.DeliveryMode != amqp091.Persistent || d.ContentType != postbox.ContentTypeJSON || d.Type == "" {
		t.Errorf("message %s: delivery mode %d, content type %q, type %q; want persistent, %s, the event type",
			id, d.DeliveryMode, d.ContentType, d.Type, postbox.ContentTypeJSON)
	}
	headers := map[string]string{}
	for name, v := range d.Headers {
		headers[name] = fmt.Sprint(v)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, sinktest.Delivery{
		ID: id, EventType: d.Type, AggregateID: headers[postbox.HeaderAggregateID], Payload: d.Body, Headers: headers,
	})
}

func (r *receiver) received() []sinktest.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}
