package envelope_test

import (
	"context"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/envelope"
)

// noop is a sink that accepts every message at once.
type noop struct{ system string }

func (noop) Publish(context.Context, *sink.Message) error { return nil }
func (noop) String() string                               { return "noop" }
func (n noop) Destination() sink.Destination              { return sink.Destination{System: n.system} }

// BenchmarkPublish is the cost of an envelope: Publish through the wrapped
// sink to one that does nothing, for each envelope and two payload sizes.
func BenchmarkPublish(b *testing.B) {
	configs := []struct {
		name   string
		system string
		config envelope.Config
	}{
		{"raw", "webhook", envelope.Config{}},
		{"standard", "webhook", envelope.Config{Kind: envelope.Standard}},
		{"cloudevents", "webhook", envelope.Config{Kind: envelope.CloudEvents}},
		{"cloudevents-binary-http", "webhook", envelope.Config{Kind: envelope.CloudEventsBinary, Binding: envelope.HTTP}},
		{"cloudevents-binary-kafka", "kafka", envelope.Config{Kind: envelope.CloudEventsBinary, Binding: envelope.Kafka}},
	}
	for _, size := range []struct {
		name    string
		payload []byte
	}{{"1KiB", largePayload(1 << 10)}, {"64KiB", largePayload(64 << 10)}} {
		for _, c := range configs {
			b.Run(c.name+"/"+size.name, func(b *testing.B) {
				s, err := envelope.Wrap(noop{c.system}, c.config)
				if err != nil {
					b.Fatal(err)
				}
				m := &sink.Message{Event: postbox.Event{
					ID: postbox.NewID(), EventType: "order.created", AggregateType: "order", AggregateID: "42", Payload: size.payload,
					Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
				}, Attempt: 1}
				b.SetBytes(int64(len(size.payload)))
				b.ReportAllocs()
				for b.Loop() {
					if err := s.Publish(b.Context(), m); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
