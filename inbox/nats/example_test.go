package nats_test

import (
	"context"
	"encoding/json"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox/inbox"
	inboxnats "github.com/postbox-go/postbox/inbox/nats"
	"github.com/postbox-go/postbox/store/postgres"
)

// A service that applies the "order.paid" events a postbox relay publishes
// with --sink 'nats://127.0.0.1:4222?subject=orders.{event_type}', exactly
// once: the shipment and the inbox row commit together, and a message is
// acknowledged only after that commit.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/shipping")
	if err != nil {
		log.Fatal(err)
	}
	store, err := postgres.New(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Migrate(ctx); err != nil { // the inbox_events table
		log.Fatal(err)
	}
	ib := inbox.New(store.Driver())

	nc, err := natsgo.Connect("nats://127.0.0.1:4222", natsgo.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	// A durable pull consumer of the stream ORDERS (created beside the
	// relay: postbox sink setup --sink 'nats://...?subject=orders.{event_type}&stream=ORDERS').
	cons, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{
		Durable:       "shipping",
		FilterSubject: "orders.order.paid",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}

	ship := func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
		var paid struct {
			OrderID int64 `json:"order_id"`
		}
		if err := json.Unmarshal(ev.Payload, &paid); err != nil {
			return inbox.Reject(err) // never processable: terminated
		}
		_, err := tx.Exec(ctx, "insert into shipments (order_id) values ($1)", paid.OrderID)
		return err // an error rolls back; the message is delivered again
	}
	c, err := inboxnats.New(inboxnats.Config{
		Consumer:    cons,
		Process:     ib.Processor(ship),
		Concurrency: 8,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil { // until SIGINT or SIGTERM
		log.Fatal(err)
	}
}
