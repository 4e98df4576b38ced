package kafka_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/kafka"
)

// The sink reads the brokers' message.max.bytes at start: a record that
// cannot fit alone in a batch that large fails at once, permanently,
// naming the sizes, and the small records published beside it, batched
// together, are delivered.
func TestRecordOverTheBrokersLimitFailsAlone(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4096"}))
	kafkatest.CreateTopic(t, brokers, "events.order", 1)
	r := kafkatest.NewReader(t, brokers, "events.order")
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "events.{aggregate_type}"})
	big := message("order", "1", []byte(`"`+strings.Repeat("x", 5000)+`"`))
	err := s.Publish(t.Context(), big)
	if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent {
		t.Fatalf("publish of 5002 bytes with message.max.bytes 4096: %v (%v), want permanent", err, kind)
	}
	for _, want := range []string{"a payload of 5002", "4096"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	const n = 50 // 3 KiB each: several fill a batch of 4 KiB
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := s.Publish(t.Context(), message("order", "2", []byte(`"`+strings.Repeat("y", 3000)+`"`))); err != nil {
				t.Errorf("publish of a record under the limit: %v", err)
			}
		})
	}
	wg.Wait()
	waitRecords(t, r, n)
}

// A topic name that the template made invalid fails its event at once,
// permanently.
func TestInvalidTopicNameIsPermanent(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	s := newSink(t, kafka.Config{Brokers: brokers, Topic: "events.{aggregate_type}"})
	for _, aggregateType := range []string{"with space", "slash/ed", strings.Repeat("a", 250), "caf\u00e9"} {
		err := s.Publish(t.Context(), message(aggregateType, "1", []byte(`{}`)))
		if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent || !strings.Contains(err.Error(), "topic name") {
			t.Errorf("aggregate type %.20q: %v (%v), want a permanent failure about the topic name", aggregateType, err, kind)
		}
	}
}
