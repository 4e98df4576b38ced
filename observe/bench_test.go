package observe_test

import (
	"testing"
	"time"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/observe"
	"github.com/postbox-go/postbox/relay"
)

// BenchmarkRelayAttempted is the Prometheus observer's cost per delivery:
// one Attempted call (a counter by event type and outcome, two histograms),
// from parallel goroutines as the relay's settler and publishers would.
func BenchmarkRelayAttempted(b *testing.B) {
	_, m := newMetrics(b, observe.Options{})
	o := m.Relay()
	types := []string{"order.created", "order.paid", "order.shipped", "order.cancelled"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			o.Attempted(relay.Attempt{EventType: types[i%len(types)], Outcome: relay.OutcomeDelivered, Attempt: 1,
				Sent: true, Duration: 3 * time.Millisecond, Age: 20 * time.Millisecond})
			i++
		}
	})
}

// BenchmarkInboxHandled is the Prometheus observer's cost per inbox event.
func BenchmarkInboxHandled(b *testing.B) {
	_, m := newMetrics(b, observe.Options{})
	o := m.Inbox()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o.Handled(inbox.Handling{EventType: "order.created", Outcome: inbox.Processed, HandlerRan: true, HandlerDuration: time.Millisecond})
		}
	})
}
