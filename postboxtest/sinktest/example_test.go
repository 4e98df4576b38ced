package sinktest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/sinktest"
	"github.com/postbox-go/postbox/sink"
)

// memory is a sink whose destination is a slice: the smallest sink that
// passes the suite.
type memory struct {
	dedup bool // drop ids already received, as JetStream does
	// max is the largest payload it takes, 0 for any; it refuses
	// Authorization headers.
	max int

	mu  sync.Mutex
	got []sinktest.Delivery
}

func (m *memory) Publish(ctx context.Context, msg *sink.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.max > 0 && len(msg.Payload) > m.max {
		return &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("memory: the payload is %d bytes, over %d", len(msg.Payload), m.max)}
	}
	if _, ok := msg.Headers["Authorization"]; ok {
		return &sink.Error{Kind: sink.Permanent, Err: errors.New("memory: header Authorization is refused")}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dedup && slices.ContainsFunc(m.got, func(d sinktest.Delivery) bool { return d.ID == msg.ID }) {
		return nil
	}
	m.got = append(m.got, sinktest.Delivery{
		ID:          msg.ID,
		EventType:   msg.EventType,
		AggregateID: msg.AggregateID,
		Payload:     slices.Clone(msg.Payload),
		Headers:     maps.Clone(msg.Headers),
	})
	return nil
}

func (m *memory) String() string { return "memory" }

func (m *memory) Destination() sink.Destination {
	return sink.Destination{System: "memory", Name: "memory"}
}

func (m *memory) received() []sinktest.Delivery {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

// A backend's conformance test is one call of Run; this one would live in
// the backend's package as TestConformance.
func ExampleRun() {
	testConformance := func(t *testing.T) {
		sinktest.Run(t, sinktest.Harness{
			New: func(t *testing.T) sinktest.Destination {
				m := &memory{}
				return sinktest.Destination{Sink: m, Received: m.received}
			},
			Features: sinktest.Features{OrderedPerAggregate: true, CarriesHeaders: true},
		})
	}
	_ = testConformance
}
