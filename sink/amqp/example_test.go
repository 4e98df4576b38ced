package amqp_test

import (
	"context"
	"fmt"
	"log"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/amqp"
)

// The relay's RabbitMQ sink, as `postbox relay --sink amqp://...` makes it:
// an event published to the exchange "example_orders" with its type as
// routing key, and read back from a queue bound to it.
func Example() {
	ctx := context.Background()
	// The topology is the application's: an exchange and a quorum queue.
	conn, err := amqp091.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if err := ch.ExchangeDeclare("example_orders", "topic", true, false, false, false, nil); err != nil {
		log.Fatal(err)
	}
	defer ch.ExchangeDelete("example_orders", false, false)
	q, err := ch.QueueDeclare("example_shipping", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
	if err != nil {
		log.Fatal(err)
	}
	defer ch.QueueDelete(q.Name, false, false, false)
	if err := ch.QueueBind(q.Name, "order.*", "example_orders", false, nil); err != nil {
		log.Fatal(err)
	}

	cfg, err := amqp.ParseURL("amqp://guest:guest@127.0.0.1:5672/?exchange=example_orders&routing_key={event_type}")
	if err != nil {
		log.Fatal(err)
	}
	s, err := amqp.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	fmt.Println(s)

	m := &sink.Message{Event: postbox.Event{
		ID: postbox.NewID(), EventType: "order.created", AggregateType: "order", AggregateID: "42",
		Payload: []byte(`{"order_id": 42}`),
	}, Attempt: 1}
	if err := s.Publish(ctx, m); err != nil { // returns once the server confirmed it
		log.Fatal(err)
	}

	d, ok, err := ch.Get(q.Name, true)
	if err != nil || !ok {
		log.Fatal("no message: ", err)
	}
	fmt.Println(d.Type, d.Headers[postbox.HeaderAggregateID], string(d.Body), d.MessageId == m.ID.String())
	// Output:
	// rabbitmq amqp://127.0.0.1:5672 vhost "/" exchange "example_orders" routing key "{event_type}"
	// order.created 42 {"order_id": 42} true
}
