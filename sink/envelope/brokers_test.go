package envelope_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/amqp"
	"github.com/postbox-go/postbox/sink/envelope"
	"github.com/postbox-go/postbox/sink/kafka"
	"github.com/postbox-go/postbox/sink/nats"
)

// brokerEvents is the table with a large payload that fits every broker's
// default limit (1 MiB).
func brokerEvents() []testEvent {
	events := testEvents()
	large := &events[len(events)-1]
	large.event.Payload = largePayload(200 << 10)
	return events
}

// publishAll publishes the table's events to s and returns their messages
// and the times before and after.
func publishAll(t *testing.T, s sink.Sink, events []testEvent) (msgs []*sink.Message, before, after time.Time) {
	t.Helper()
	before = time.Now()
	for _, tc := range events {
		m := message(tc.event)
		if err := s.Publish(t.Context(), m); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		unchanged(t, m, tc.event)
		msgs = append(msgs, m)
	}
	return msgs, before, time.Now()
}

// eventFromBinary is the event a receiver makes of a binary-mode message
// by its binding's rules: each header named prefix+attribute is that
// attribute, its value as it is (Kafka and AMQP send UTF-8 strings), the
// protocol's content type the datacontenttype, the body the data.
func eventFromBinary(t *testing.T, prefix string, headers map[string]any, contentType string, data []byte) *event.Event {
	t.Helper()
	ev := event.New()
	for name, v := range headers {
		attr, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		value, isString := v.(string)
		if !isString {
			t.Errorf("header %s is a %T, want a string", name, v)
		}
		switch attr {
		case "specversion":
			if value != "1.0" {
				t.Errorf("%s = %q", name, value)
			}
		case "id":
			ev.SetID(value)
		case "source":
			ev.SetSource(value)
		case "type":
			ev.SetType(value)
		case "subject":
			ev.SetSubject(value)
		case "time":
			tm, err := time.Parse(time.RFC3339Nano, value)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			ev.SetTime(tm)
		case "datacontenttype":
			t.Errorf("header %s: the protocol's content type holds the datacontenttype", name)
		default:
			ev.SetExtension(attr, value)
		}
	}
	ev.SetDataContentType(contentType)
	ev.DataEncoded = data
	return &ev
}

// eventFromJSON is the event of a structured message's body.
func eventFromJSON(t *testing.T, body []byte) *event.Event {
	t.Helper()
	ev := event.New()
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatalf("the body is no CloudEvents JSON: %v", err)
	}
	return &ev
}

// checkData fails t when the event's data is not the payload: byte for
// byte in binary mode, from its first byte to the end of the JSON value
// in structured mode.
func checkData(t *testing.T, ev *event.Event, m *sink.Message, binary bool) {
	t.Helper()
	want := m.Payload
	if !binary {
		want = bytes.TrimRight(want, " \t\r\n")
	}
	if !bytes.Equal(ev.Data(), want) {
		t.Errorf("data %.80q, want the payload %.80q", ev.Data(), want)
	}
}

// Over Kafka, binary mode sends the attributes as "ce_" headers and the
// content type as "content-type", structured mode the JSON event format
// with content-type application/cloudevents+json: what a CloudEvents
// Kafka receiver reads (Kafka protocol binding 3.2 and 3.3).
func TestCloudEventsOverKafka(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	for _, kind := range []envelope.Kind{envelope.CloudEventsBinary, envelope.CloudEvents} {
		t.Run(kind.String(), func(t *testing.T) {
			topic := "envelope." + kind.String()
			kafkatest.CreateTopic(t, brokers, topic, 1)
			r := kafkatest.NewReader(t, brokers, topic)
			k, err := kafka.New(t.Context(), kafka.Config{Brokers: brokers, Topic: topic})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(k.Close)
			s, err := envelope.Wrap(k, envelope.Config{Kind: kind, Binding: envelope.Kafka, Source: "/shop/orders"})
			if err != nil {
				t.Fatal(err)
			}
			msgs, before, after := publishAll(t, s, brokerEvents())
			deadline := time.Now().Add(15 * time.Second)
			for len(r.Records()) < len(msgs) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			records := r.Records()
			if len(records) != len(msgs) {
				t.Fatalf("read %d records, want %d", len(records), len(msgs))
			}
			for i, rec := range records {
				m := msgs[i]
				headers := map[string]any{}
				for _, h := range rec.Headers {
					headers[h.Key] = string(h.Value)
				}
				if headers["id"] != m.ID.String() || headers["Content-Type"] != nil {
					t.Errorf("record %d: headers %v: want the event's, without Content-Type", i, headers)
				}
				var ev *event.Event
				if kind == envelope.CloudEventsBinary {
					contentType, _ := headers["content-type"].(string)
					ev = eventFromBinary(t, "ce_", headers, contentType, rec.Value)
				} else {
					if headers["content-type"] != envelope.ContentTypeCloudEvents {
						t.Errorf("record %d: content-type %v", i, headers["content-type"])
					}
					ev = eventFromJSON(t, rec.Value)
				}
				checkEvent(t, ev, m, "/shop/orders", before, after, nil)
				checkData(t, ev, m, kind == envelope.CloudEventsBinary)
			}
		})
	}
}

// Over RabbitMQ, binary mode sends the attributes as "cloudEvents:"
// headers (strings) and the datacontenttype as the content_type property,
// structured mode the JSON event format with content_type
// application/cloudevents+json (AMQP protocol binding 3.1 and 3.2).
func TestCloudEventsOverRabbitMQ(t *testing.T) {
	srv := amqptest.Connect(t)
	for _, kind := range []envelope.Kind{envelope.CloudEventsBinary, envelope.CloudEvents} {
		t.Run(kind.String(), func(t *testing.T) {
			exchange := srv.Exchange()
			queue := srv.Queue(exchange, "#", nil)
			cfg, err := amqp.ParseURL(amqptest.URL() + "?exchange=" + exchange + "&routing_key=events")
			if err != nil {
				t.Fatal(err)
			}
			k, err := amqp.New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Close() })
			s, err := envelope.Wrap(k, envelope.Config{Kind: kind, Binding: envelope.AMQP})
			if err != nil {
				t.Fatal(err)
			}
			msgs, before, after := publishAll(t, s, brokerEvents())
			srv.Do("get", func(ch *amqp091.Channel) error {
				for i, m := range msgs {
					d, ok, err := ch.Get(queue, true)
					if err != nil || !ok {
						return fmt.Errorf("get message %d: %v (a message: %v)", i, err, ok)
					}
					if d.MessageId != m.ID.String() {
						t.Errorf("message %d is %s, want %s", i, d.MessageId, m.ID)
					}
					var ev *event.Event
					if kind == envelope.CloudEventsBinary {
						ev = eventFromBinary(t, "cloudEvents:", d.Headers, d.ContentType, d.Body)
					} else {
						if d.ContentType != envelope.ContentTypeCloudEvents {
							t.Errorf("message %d: content_type %q", i, d.ContentType)
						}
						ev = eventFromJSON(t, d.Body)
					}
					checkEvent(t, ev, m, envelope.SourceDefault, before, after, nil)
					checkData(t, ev, m, kind == envelope.CloudEventsBinary)
				}
				return nil
			})
		})
	}
}

// Over NATS, structured mode sends the JSON event format with the header
// Content-Type: application/cloudevents+json (NATS protocol binding 3).
func TestCloudEventsOverNATS(t *testing.T) {
	_, js := natstest.Connect(t, natstest.URL())
	st, prefix := natstest.Stream(t, js, nil)
	c, err := nats.ParseURL(natstest.URL() + "?subject=" + prefix + ".events")
	if err != nil {
		t.Fatal(err)
	}
	k, err := nats.New(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	s, err := envelope.Wrap(k, envelope.Config{Kind: envelope.CloudEvents, Binding: envelope.NATS})
	if err != nil {
		t.Fatal(err)
	}
	msgs, before, after := publishAll(t, s, brokerEvents())
	cons, err := st.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		got, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if ct := got.Headers().Get("Content-Type"); ct != envelope.ContentTypeCloudEvents {
			t.Errorf("message %d: Content-Type %q", i, ct)
		}
		ev := eventFromJSON(t, got.Data())
		checkEvent(t, ev, m, envelope.SourceDefault, before, after, nil)
		checkData(t, ev, m, false)
	}
}
