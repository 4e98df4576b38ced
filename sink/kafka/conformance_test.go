package kafka_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/sinktest"
	"github.com/postbox-go/postbox/sink/kafka"
)

// topicSeq names each test's topic.
var topicSeq atomic.Int64

func newTopic(t *testing.T, brokers []string, partitions int32) string {
	topic := fmt.Sprintf("conformance-%d", topicSeq.Add(1))
	kafkatest.CreateTopic(t, brokers, topic, partitions)
	return topic
}

func newSink(t *testing.T, cfg kafka.Config) *kafka.Sink {
	t.Helper()
	s, err := kafka.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestConformance(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinktest.Destination {
			topic := newTopic(t, brokers, 3)
			r := kafkatest.NewReader(t, brokers, topic)
			const limit = 64 << 10
			return sinktest.Destination{
				MaxPayload: limit,
				Sink:       newSink(t, kafka.Config{Brokers: brokers, Topic: topic, MaxMessageBytes: limit}),
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
