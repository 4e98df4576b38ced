// Package sinktest is the conformance suite every sink passes: webhook,
// NATS JetStream, RabbitMQ and Kafka. A backend calls Run from one test with a Harness that says
// how to make its sink, how to read what its destination received, and which
// guarantees it gives (Features); each case then runs in parallel against a
// fresh destination of its own.
package sinktest

import (
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/sink"
)

// Delivery is one message as the destination received it.
type Delivery struct {
	ID          uuid.UUID
	EventType   string
	AggregateID string
	Payload     []byte
	// Headers are the headers the destination got; the suite compares their
	// names case-insensitively and looks only for the message's own headers.
	Headers map[string]string
}

// Features declares what a sink guarantees; the suite checks exactly that.
type Features struct {
	// Deduplicates is true when the destination drops a message whose id it
	// has already received (NATS JetStream with Nats-Msg-Id). When false, a
	// republished message must be delivered again: at least once.
	Deduplicates bool
	// OrderedPerAggregate is true when messages of one aggregate, each
	// published after the previous Publish returned, arrive in that order.
	OrderedPerAggregate bool
	// CarriesHeaders is true when Message.Headers reach the destination.
	CarriesHeaders bool
}

// Destination is a sink under test and the receiving end it publishes to.
type Destination struct {
	Sink sink.Sink
	// Received returns what the destination has received so far, in arrival
	// order. It must be safe to call while publishes are in flight.
	Received func() []Delivery
	// MaxPayload is the largest payload the sink sends (its own limit or
	// the server's): the suite checks that a larger event fails alone,
	// permanently. 0 skips that case.
	MaxPayload int
}

// Header is one header of an event.
type Header struct{ Name, Value string }

// Harness connects a sink to the suite.
type Harness struct {
	// New returns a sink publishing to a fresh destination that has received
	// nothing yet, and releases what it made with t.Cleanup. It is called
	// once per case, from parallel tests.
	New func(t *testing.T) Destination
	// Features are the sink's guarantees.
	Features Features
	// Refused are event headers the sink must refuse: an event with one
	// of them fails alone, permanently, with an error that names the
	// header (or the first 32 bytes of its name).
	Refused []Header
}

// Run runs every case of the suite against h, each as a parallel subtest.
func Run(t *testing.T, h Harness) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, Destination, Features)
	}{
		{"PublishDeliversExactly", testPublishDeliversExactly},
		{"ConcurrentPublishes", testConcurrentPublishes},
		{"CancelledContext", testCancelledContext},
		{"Republish", testRepublish},
		{"OrderPerAggregate", testOrderPerAggregate},
		{"OversizeFailsAlone", testOversizeFailsAlone},
		{"HostileHeadersFailAlone", testHostileHeadersFailAlone},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, h.New(t), h.Features)
		})
	}
	t.Run("RefusedHeadersFailAlone", func(t *testing.T) {
		t.Parallel()
		testRefusedHeadersFailAlone(t, h.New(t), h.Refused)
	})
}
