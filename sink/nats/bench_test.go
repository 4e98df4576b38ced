package nats_test

import (
	"testing"

	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/sink/nats"
)

// BenchmarkPublish measures one publish to JetStream and its PubAck, from
// 64 goroutines at once (the relay's default concurrency), with the trace
// context headers of a typical event: the sink's own cost per message
// (building and checking it, pipelining it on the shared connection,
// matching its PubAck) plus the server's. Allocations per op are the
// robust figure; ns/op depends on the machine's load.
func BenchmarkPublish(b *testing.B) {
	_, js := natstest.Connect(b, natstest.URL())
	_, prefix := natstest.Stream(b, js, nil)
	c, err := nats.ParseURL(natstest.URL() + "?subject=" + prefix + ".{event_type}")
	if err != nil {
		b.Fatal(err)
	}
	s, err := nats.New(b.Context(), c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	m := message("42", []byte(`{"order_id": 42, "total": "9.90"}`))
	m.Headers = map[string]string{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate":  "congo=t61rcWkgMzE",
	}
	b.ReportAllocs()
	b.SetParallelism(32) // 64 goroutines on 2 CPUs
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Publish(b.Context(), m); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
