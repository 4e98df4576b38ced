package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/kafka"
)

// benchSink is a sink to a three-broker kfake cluster that acknowledges
// records without keeping them (as the bench's kafka scenario's), with a
// topic of six partitions, and a message with the trace context headers of
// a typical event.
func benchSink(b *testing.B) (*kafka.Sink, *sink.Message) {
	_, brokers := kafkatest.NewCluster(b, kfake.BlackholeProduce())
	kafkatest.CreateTopic(b, brokers, "bench", 6)
	s, err := kafka.New(b.Context(), kafka.Config{Brokers: brokers, Topic: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	m := message("order", "42", []byte(`{"order_id": 42, "total": "9.90"}`))
	m.Headers = map[string]string{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate":  "congo=t61rcWkgMzE",
	}
	return s, m
}

// BenchmarkPublish measures one publish and its acknowledgement (acks=all),
// from 1024 goroutines at once (the relay's default concurrency for
// kafka://, one event per publish), to an in-process kfake cluster: the
// sink's own cost per record plus kfake's. Allocations per op are the
// robust figure; ns/op depends on the machine's load.
func BenchmarkPublish(b *testing.B) {
	s, m := benchSink(b)
	b.ReportAllocs()
	b.SetParallelism(512) // 1024 goroutines on 2 CPUs
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Publish(b.Context(), m); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPublishBatch measures a record published in batches of 256 (the
// relay's default --publish-batch for kafka://) by 4 goroutines at once
// (its default --concurrency 1024 over batches of 256), to the same
// cluster as BenchmarkPublish: ns/op and allocations per record.
func BenchmarkPublishBatch(b *testing.B) {
	s, m := benchSink(b)
	const size = 256
	msgs := make([]*sink.Message, size)
	for i := range msgs {
		msgs[i] = m
	}
	b.ReportAllocs()
	b.SetParallelism(2) // 4 goroutines on 2 CPUs
	b.RunParallel(func(pb *testing.PB) {
		errs := make([]error, size)
		for {
			n := 0
			for n < size && pb.Next() {
				n++
			}
			if n == 0 {
				return
			}
			s.PublishBatch(b.Context(), msgs[:n], errs[:n])
			for _, err := range errs[:n] {
				if err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}
