package envelope_test

import (
	"context"
	"fmt"
	"log"
	"maps"
	"slices"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/envelope"
)

// printer is a sink that prints what a webhook would send: the content
// type, the event's headers and the body.
type printer struct{}

func (printer) Publish(_ context.Context, m *sink.Message) error {
	fmt.Println("Content-Type:", m.ContentType)
	for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
		fmt.Printf("%s: %s\n", name, m.Headers[name])
	}
	fmt.Printf("\n%s\n", m.Payload)
	return nil
}

func (printer) String() string { return "printer" }

func (printer) Destination() sink.Destination {
	return sink.Destination{System: "webhook", Name: "printer"}
}

// orderCreated is an event as the relay hands it to a sink; its id is a
// UUIDv7, whose time is the event's time.
func orderCreated() *sink.Message {
	return &sink.Message{Event: postbox.Event{
		ID:        uuid.MustParse("01890a5d-ac96-774b-bcce-b302099a8057"),
		EventType: "order.created", AggregateType: "order", AggregateID: "42",
		Payload: []byte(`{"order_id": 42}`),
	}, Attempt: 1}
}

// A webhook endpoint that takes CloudEvents in structured mode. In a
// program, the wrapped sink is a webhook.Sink (or any other), and the
// envelope's name comes from its configuration (ParseKind).
func Example() {
	s, err := envelope.Wrap(printer{}, envelope.Config{Kind: envelope.CloudEvents, Source: "https://shop.example/orders"})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Publish(context.Background(), orderCreated()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// Content-Type: application/cloudevents+json; charset=utf-8
	//
	// {"specversion":"1.0","id":"01890a5d-ac96-774b-bcce-b302099a8057","source":"https://shop.example/orders","type":"order.created","time":"2023-06-30T03:34:18.518000Z","subject":"42","aggregatetype":"order","datacontenttype":"application/json","data":{"order_id": 42}}
}

// The same event in binary mode over HTTP: the payload as it is, the
// attributes as ce-* headers.
func Example_binary() {
	s, err := envelope.Wrap(printer{}, envelope.Config{Kind: envelope.CloudEventsBinary, Binding: envelope.HTTP})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Publish(context.Background(), orderCreated()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// Content-Type: application/json
	// ce-aggregatetype: order
	// ce-id: 01890a5d-ac96-774b-bcce-b302099a8057
	// ce-source: /postbox
	// ce-specversion: 1.0
	// ce-subject: 42
	// ce-time: 2023-06-30T03:34:18.518000Z
	// ce-type: order.created
	//
	// {"order_id": 42}
}

// The Standard Webhooks payload structure.
func Example_standard() {
	kind, err := envelope.ParseKind("standard")
	if err != nil {
		log.Fatal(err)
	}
	s, err := envelope.Wrap(printer{}, envelope.Config{Kind: kind})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Publish(context.Background(), orderCreated()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// Content-Type: application/json
	//
	// {"type":"order.created","timestamp":"2023-06-30T03:34:18.518000Z","data":{"order_id": 42}}
}
