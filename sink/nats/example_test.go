package nats_test

import (
	"context"
	"log"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/store/postgres"
)

// A relay publishing an outbox into the stream that captures "orders.>"
// (created beforehand by postbox sink setup with the same URL, or
// nats.Setup), one subject per event type: an "order.paid"
// event goes to "orders.order.paid". This is what `postbox relay --sink
// 'nats://127.0.0.1:4222?subject=orders.{event_type}&stream=ORDERS'` does.
func Example() {
	ctx := context.Background()
	var outbox *postgres.Store // the producer's store, postgres.New(pool, postgres.Config{})

	cfg, err := nats.ParseURL("nats://127.0.0.1:4222?subject=orders.{event_type}&stream=ORDERS")
	if err != nil {
		log.Fatal(err)
	}
	s, err := nats.New(ctx, cfg) // connects; fails if the stream is missing
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	r, err := relay.New(relay.Config{Store: outbox.Driver(), Sink: s})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
