package nats_test

import (
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/sinktest"
	"github.com/postbox-go/postbox/sink/nats"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinktest.Destination {
			nc, js := natstest.Connect(t, natstest.URL())
			st, prefix := natstest.Stream(t, js, nil)
			s := newSink(t, natstest.URL(), prefix+".{event_type}")
			// The server's max_payload, from its INFO.
			return sinktest.Destination{Sink: s, Received: readStream(t, st), MaxPayload: int(nc.MaxPayload())}
		},
		Features: sinktest.Features{Deduplicates: true, OrderedPerAggregate: true, CarriesHeaders: true},
		Refused: []sinktest.Header{
			{Name: "X-Injected", Value: "v\r\nX-Forged: 1"},
			{Name: "X-Cr", Value: "v\rw"},
			{Name: "with:colon", Value: "v"},
			{Name: "with space", Value: "v"},
			{Name: "with\nnewline", Value: "v"},
		},
	})
}

// newSink returns a sink of the URL's server publishing to subject, closed
// when the test ends.
func newSink(t *testing.T, url, subject string) *nats.Sink {
	t.Helper()
	c, err := nats.ParseURL(url + "?subject=" + subject)
	if err != nil {
		t.Fatal(err)
	}
	s, err := nats.New(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// readStream consumes st with an ordered consumer until the test ends and
// returns what it has read so far, in the stream's order: what a consumer
// of the stream receives.
func readStream(t *testing.T, st jetstream.Stream) func() []sinktest.Delivery {
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
		got = append(got, sinktest.Delivery{
			ID:          id,
			EventType:   h.Get(postbox.HeaderEventType),
			AggregateID: h.Get(postbox.HeaderAggregateID),
			Payload:     slices.Clone(m.Data()),
			Headers:     maps.Clone(headers),
		})
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
