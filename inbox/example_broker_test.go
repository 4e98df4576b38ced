package inbox_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/inbox"
)

// message stands for a broker client's message: a NATS JetStream
// jetstream.Msg, a Kafka record, an AMQP amqp091.Delivery. ID is the
// broker's message id, which the relay sets to the event id (Nats-Msg-Id,
// AMQP message_id, the Kafka sink's id header).
type message struct {
	ID      string
	Subject string // the event type
	Key     string // the aggregate id (Kafka key)
	Data    []byte
}

// Acknowledgements, named as JetStream names them.
func (m *message) Ack()          { fmt.Println("ack") }
func (m *message) NakWithDelay() { fmt.Println("nak: redeliver later") }
func (m *message) Term()         { fmt.Println("term: never redeliver") }

// A broker consumer maps each message to the same Process call as the
// webhook handler, and acknowledges by the outcome.
func Example_broker() {
	pgStore, close := exampleStore()
	defer close()
	ib := inbox.New(pgStore.Driver())

	consume := func(ctx context.Context, m *message) {
		id, err := uuid.Parse(m.ID)
		if err != nil {
			m.Term() // not a postbox event: dead-letter it
			return
		}
		ev := &inbox.Event{ID: id, EventType: m.Subject, AggregateType: "order", AggregateID: m.Key, Payload: m.Data}
		_, err = ib.Process(ctx, ev, shipOrder)
		switch {
		case err == nil: // processed or duplicate
			m.Ack()
		case errors.Is(err, inbox.ErrInvalidEvent), errors.Is(err, inbox.ErrSequenceApplied):
			m.Term()
		default: // the handler failed, or the event is out of order: later
			m.NakWithDelay()
		}
	}

	paid := &message{
		ID:      "0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6e",
		Subject: "order.paid",
		Key:     "42",
		Data:    []byte(`{"order_id": 42}`),
	}
	ctx := context.Background()
	consume(ctx, paid)
	consume(ctx, paid) // redelivered
	consume(ctx, &message{ID: "not-an-id"})
	consume(ctx, &message{ID: "0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6f", Data: []byte(`{"order_id": "x"}`)})
	// Output:
	// ack
	// ack
	// term: never redeliver
	// nak: redeliver later
}
