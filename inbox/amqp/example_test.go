package amqp_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/inbox/amqp"
	"github.com/postbox-go/postbox/store/postgres"
)

// A service applies the events of its queue "shipping" into its own
// database, each once: the handler runs in the inbox's transaction, and
// the message is acknowledged after it commits.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DB_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	pgStore, err := postgres.New(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ib := inbox.New(pgStore.Driver())

	ship := func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
		_, err := tx.Exec(ctx, "insert into shipments (order_id) values (($1::jsonb->>'order_id')::bigint)", ev.Payload)
		return err // an error rolls back; the message is requeued, after a delay
	}
	c, err := amqp.New(amqp.Config{
		URL:     "amqp://guest:guest@127.0.0.1:5672/",
		Queue:   "shipping",
		Process: ib.Processor(ship),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil { // until Ctrl-C
		log.Fatal(err)
	}
}
