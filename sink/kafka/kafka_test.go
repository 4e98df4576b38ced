package kafka_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/kafka"
)

func message(aggregateType, aggregateID string, payload []byte) *sink.Message {
	return &sink.Message{Event: postbox.Event{
		ID: uuid.New(), EventType: "order.created", AggregateType: aggregateType, AggregateID: aggregateID,
		Payload: payload, Headers: map[string]string{"id": "forged", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}, Attempt: 1}
}

// The record as Debezium's Outbox Event Router lays it out: topic from the
// aggregate type, key = aggregate id, value = payload, header "id" = the
// event id (once, whatever the event's own headers hold); and the
// postbox wire headers beside it.
func TestRecordLayoutIsDebeziums(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "outbox.event.order", 3)
	r := kafkatest.NewReader(t, brokers, "outbox.event.order")
	s := newSink(t, kafka.Config{Brokers: brokers}) // the default topic template
	m := message("order", "42", []byte(`{"order_id": 42}`))
	if err := s.Publish(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	waitRecords(t, r, 1)
	rec := r.Records()[0]
	if string(rec.Key) != "42" || string(rec.Value) != `{"order_id": 42}` {
		t.Fatalf("key %q value %q", rec.Key, rec.Value)
	}
	ids := 0
	for _, h := range rec.Headers {
		if h.Key == "id" {
			ids++
		}
	}
	if ids != 1 || kafkatest.Header(rec, "id") != m.ID.String() {
		t.Fatalf("%d id headers, first %q; want one, %s", ids, kafkatest.Header(rec, "id"), m.ID)
	}
	for name, want := range map[string]string{
		postbox.HeaderEventID: m.ID.String(), postbox.HeaderEventType: "order.created", postbox.HeaderAggregateType: "order",
		postbox.HeaderAggregateID: "42", postbox.HeaderContentType: postbox.ContentTypeJSON, "traceparent": m.Headers["traceparent"],
	} {
		if got := kafkatest.Header(rec, name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if d := s.Destination(); d.System != "kafka" || d.Name != kafka.TopicDefault {
		t.Errorf("destination %+v", d)
	}
}

// A fixed topic that does not exist stops New with an error that says
// what to do; allow_auto_topic_creation lets the brokers create it.
func TestMissingFixedTopicFailsAtStart(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	_, err := kafka.New(t.Context(), kafka.Config{Brokers: brokers, Topic: "nope"})
	if err == nil || !strings.Contains(err.Error(), `topic "nope" does not exist`) || !strings.Contains(err.Error(), "allow_auto_topic_creation") {
		t.Fatalf("New with a missing topic: %v", err)
	}
}

func TestAutoTopicCreation(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t, kfake.AllowAutoTopicCreation())
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "created.on.demand", AllowAutoTopicCreation: true})
	if err := s.Publish(t.Context(), message("order", "1", []byte(`{}`))); err != nil {
		t.Fatal(err)
	}
}

// A templated topic that does not exist fails the publish as Rejected:
// the relay tries it a few times, then dead-letters the event.
func TestMissingTemplatedTopicIsRejected(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "events.{aggregate_type}"})
	err := s.Publish(t.Context(), message("ghost", "1", []byte(`{}`)))
	if kind, _, _ := sink.Classify(err); kind != sink.Rejected || !strings.Contains(err.Error(), `topic "events.ghost" does not exist`) {
		t.Fatalf("publish to a missing topic: %v (%v), want rejected", err, kind)
	}
}

// A record larger than the brokers take fails for good.
func TestRecordTooLargeIsPermanent(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "big", 1)
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "big"})
	payload := []byte(`"` + strings.Repeat("x", 2<<20) + `"`)
	err := s.Publish(t.Context(), message("order", "1", payload))
	if kind, _, _ := sink.Classify(err); kind != sink.Permanent {
		t.Fatalf("publish of a 2 MiB record: %v (%v), want permanent", err, kind)
	}
}

// With every broker gone, a publish fails as Unavailable.
func TestBrokersGoneIsUnavailable(t *testing.T) {
	c, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "t", 1)
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "t", Timeout: 2 * time.Second})
	c.Close()
	err := s.Publish(t.Context(), message("order", "1", []byte(`{}`)))
	var se *sink.Error
	if !errors.As(err, &se) || se.Kind != sink.Unavailable {
		t.Fatalf("publish with the brokers gone: %v, want unavailable", err)
	}
}

func TestBrokersDownAtStart(t *testing.T) {
	c, brokers := kafkatest.NewCluster(t)
	c.Close()
	if _, err := kafka.New(t.Context(), kafka.Config{Brokers: brokers, Topic: "t"}); err == nil || !strings.Contains(err.Error(), "no broker of") {
		t.Fatalf("New with the brokers down: %v", err)
	}
}

func waitRecords(t *testing.T, r *kafkatest.Reader, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for len(r.Records()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("read %d records, want %d", len(r.Records()), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A message's own content type travels in the header "content-type", the
// name the CloudEvents Kafka binding reads, and no "Content-Type" beside
// it; a message that names none keeps today's "Content-Type:
// application/json". An event header of that name never replaces it.
func TestContentTypeHeader(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "outbox.event.order", 1)
	r := kafkatest.NewReader(t, brokers, "outbox.event.order")
	s := newSink(t, kafka.Config{Brokers: brokers})
	plain := message("order", "1", []byte(`{}`))
	plain.Headers["content-type"] = "text/forged"
	enveloped := message("order", "1", []byte(`{"specversion":"1.0"}`))
	enveloped.ContentType = "application/cloudevents+json; charset=utf-8"
	enveloped.Headers["Content-Type"] = "text/forged"
	for _, m := range []*sink.Message{plain, enveloped} {
		if err := s.Publish(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	waitRecords(t, r, 2)
	want := []string{
		postbox.HeaderContentType + ": " + postbox.ContentTypeJSON,
		"content-type: " + enveloped.ContentType,
	}
	for i, rec := range r.Records() {
		var got []string
		for _, h := range rec.Headers {
			if strings.EqualFold(h.Key, postbox.HeaderContentType) {
				got = append(got, h.Key+": "+string(h.Value))
			}
		}
		if len(got) != 1 || got[0] != want[i] {
			t.Errorf("record %d: content type headers %q, want [%q]", i, got, want[i])
		}
	}
}
